package gateway

import (
	"crypto/sha256"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/memo"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// The static check is a function of the statement's shape (its normalized
// text and its constants' kinds: the check reads no constant's value), the
// target's catalog and the delegation's rules (which its id, a hash of the
// signed bytes, names), so the gateway remembers the analysis of each
// shape and each delegation's decision on it: a later statement of the
// same shape, with new literals, pays a normalize and a scan, and its
// canonical text is rebuilt from the shape's template and its own
// constants (sqlcheck.Template). A statement without a shape is
// remembered by its text. Whether a delegation is in force, its quotas and
// the switches are decided afresh for every statement.

// maxCheckMemo bounds each memo; statements longer than maxMemoSQL are
// never remembered.
const (
	maxCheckMemo = 4096
	maxMemoSQL   = 16 << 10
)

// analysisKey names what a decision depends on: the catalog, and the
// statement's shape with its baked constants, or its text.
type analysisKey struct {
	cat *sqlcheck.Catalog
	sql [32]byte
}

type decisionKey struct {
	analysisKey
	delegation string
}

// checked is one delegation's decision with its reasons as strings.
type checked struct {
	dec     sqlcheck.Decision
	reasons []string
}

// shaped is a remembered shape: what the check reads, and the template
// that rebuilds a statement's canonical text.
type shaped struct {
	facts *sqlcheck.Facts
	tpl   *sqlcheck.Template
}

type checkMemo struct {
	analyses  memo.Map[analysisKey, *sqlcheck.Analysis]
	decisions memo.Map[decisionKey, checked]
	// baked is, by shape, which constants its template keeps in the text
	// (their values are part of the key of shapes).
	baked  memo.Map[analysisKey, []int]
	shapes memo.Map[analysisKey, shaped]
	// scoped are the delegations' catalogs (scope).
	scoped memo.Map[scopedKey, *sqlcheck.Catalog]
}

func newCheckMemo() *checkMemo {
	return &checkMemo{analyses: memo.Map[analysisKey, *sqlcheck.Analysis]{Max: maxCheckMemo},
		decisions: memo.Map[decisionKey, checked]{Max: maxCheckMemo},
		baked:     memo.Map[analysisKey, []int]{Max: maxCheckMemo},
		shapes:    memo.Map[analysisKey, shaped]{Max: maxCheckMemo},
		scoped:    memo.Map[scopedKey, *sqlcheck.Catalog]{Max: maxCheckMemo}}
}

func keyOf(cat *sqlcheck.Catalog, kind, s string) analysisKey {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(s))
	k := analysisKey{cat: cat}
	h.Sum(k.sql[:0])
	return k
}

// analyze is sqlcheck.Analyze, remembered by shape (or, for a statement
// without one, by text). A remembered shape is one whose statement
// analyzed without a reason to refer and whose template rebuilt its
// canonical text exactly: only successes are remembered. The remembered
// analysis keeps what the check reads (facts, reasons, canonical text),
// not the tree.
func (g *Gateway) analyze(sql string, cat *sqlcheck.Catalog) (*sqlcheck.Analysis, analysisKey) {
	if len(sql) > maxMemoSQL {
		return sqlcheck.Analyze(sql, cat, g.cfg.Limits), analysisKey{}
	}
	if s, ok := sqlcheck.ShapeOf(sql, g.cfg.Limits); ok {
		sk := keyOf(cat, "shape", s.Key())
		if baked, ok := g.checks.baked.Get(sk); ok {
			k := keyOf(cat, "template", sqlcheck.BakedKey(s, baked))
			if r, ok := g.checks.shapes.Get(k); ok {
				return &sqlcheck.Analysis{Facts: r.facts, Canonical: r.tpl.Canonical(s)}, k
			}
		}
		a := sqlcheck.Analyze(sql, cat, g.cfg.Limits)
		if a.Facts != nil && len(a.Reasons) == 0 {
			if tpl, err := sqlcheck.NewTemplate(a, s); err == nil {
				k := keyOf(cat, "template", sqlcheck.BakedKey(s, tpl.Baked()))
				g.checks.baked.Put(sk, tpl.Baked())
				g.checks.shapes.Put(k, shaped{facts: a.Facts, tpl: tpl})
				return a, k
			}
		}
		return a, g.rememberText(sql, cat, a)
	}
	k := keyOf(cat, "text", sql)
	if a, ok := g.checks.analyses.Get(k); ok {
		return a, k
	}
	a := sqlcheck.Analyze(sql, cat, g.cfg.Limits)
	return a, g.rememberText(sql, cat, a)
}

// rememberText remembers a statement without a template by its text.
func (g *Gateway) rememberText(sql string, cat *sqlcheck.Catalog, a *sqlcheck.Analysis) analysisKey {
	k := keyOf(cat, "text", sql)
	g.checks.analyses.Put(k, &sqlcheck.Analysis{Facts: a.Facts, Reasons: a.Reasons, Canonical: a.Canonical, NotApprovable: a.NotApprovable})
	return k
}

type scopedKey struct {
	cat        *sqlcheck.Catalog
	delegation string
}

// scope is the catalog as d's bound sees it (bound.Catalog), remembered;
// with no delegation, a catalog of no table.
func (g *Gateway) scope(cat *sqlcheck.Catalog, d *Delegation) *sqlcheck.Catalog {
	k := scopedKey{cat: cat}
	if d != nil {
		k.delegation = d.ID
	}
	if c, ok := g.checks.scoped.Get(k); ok {
		return c
	}
	var c *sqlcheck.Catalog
	if d == nil {
		c = cat.Bounded(nil, bound.CatalogName)
	} else {
		c = d.Bound.Catalog(cat, bound.CatalogName)
	}
	g.checks.scoped.Put(k, c)
	return c
}

// check is sqlcheck.Check of a against d's rules, remembered under k.
func (g *Gateway) check(a *sqlcheck.Analysis, k analysisKey, d *Delegation) checked {
	if k.cat == nil {
		dec := sqlcheck.Check(a, d.Rules)
		return checked{dec: dec, reasons: dec.ReasonStrings()}
	}
	dk := decisionKey{analysisKey: k, delegation: d.ID}
	if c, ok := g.checks.decisions.Get(dk); ok {
		return c
	}
	dec := sqlcheck.Check(a, d.Rules)
	c := checked{dec: dec, reasons: dec.ReasonStrings()}
	g.checks.decisions.Put(dk, c)
	return c
}
