package gateway

import (
	"context"
	"crypto/sha256"

	"harbormaster/internal/memo"
	"harbormaster/internal/pilot"
	"harbormaster/internal/sqlcheck"
)

// The static check is a function of the statement's text, the target's
// catalog and the delegation's rules (which its id, a hash of the signed
// bytes, names), so the gateway remembers both the analysis and each
// delegation's decision for statements it has seen: an agent repeating a
// statement is not parsed again. Whether a delegation is in force, its
// quotas and the switches are decided afresh for every statement.

// maxCheckMemo bounds each memo; statements longer than maxMemoSQL are
// never remembered.
const (
	maxCheckMemo = 4096
	maxMemoSQL   = 16 << 10
)

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

type checkMemo struct {
	analyses  memo.Map[analysisKey, *sqlcheck.Analysis]
	decisions memo.Map[decisionKey, checked]
}

func newCheckMemo() *checkMemo {
	return &checkMemo{analyses: memo.Map[analysisKey, *sqlcheck.Analysis]{Max: maxCheckMemo},
		decisions: memo.Map[decisionKey, checked]{Max: maxCheckMemo}}
}

// analyze is sqlcheck.Analyze, remembered. The remembered analysis keeps
// what the check reads (facts, reasons, canonical text), not the tree.
func (g *Gateway) analyze(sql string, cat *sqlcheck.Catalog) (*sqlcheck.Analysis, analysisKey) {
	if len(sql) > maxMemoSQL {
		return sqlcheck.Analyze(sql, cat, g.cfg.Limits), analysisKey{}
	}
	k := analysisKey{cat: cat, sql: sha256.Sum256([]byte(sql))}
	if a, ok := g.checks.analyses.Get(k); ok {
		return a, k
	}
	a := sqlcheck.Analyze(sql, cat, g.cfg.Limits)
	g.checks.analyses.Put(k, &sqlcheck.Analysis{Facts: a.Facts, Reasons: a.Reasons, Canonical: a.Canonical})
	return a, k
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

// opening is a target transaction being opened while the statement is
// checked (one round trip overlapped with the parse and the check). A
// statement that will not run discards it: rolled back, in the background.
type opening struct {
	ch    chan openResult
	taken bool
}

type openResult struct {
	txn *pilot.Txn
	err error
}

func openTxn(ctx context.Context, p *pilot.Pilot) *opening {
	o := &opening{ch: make(chan openResult, 1)}
	go func() {
		t, err := p.Begin(ctx)
		o.ch <- openResult{t, err}
	}()
	return o
}

// take returns the transaction being opened, or opens one now if there is
// none (or it was discarded); the caller then owns it. It gives up when
// ctx ends (the transaction, if it opens, is rolled back).
func (o *opening) take(ctx context.Context, p *pilot.Pilot) (*pilot.Txn, error) {
	if o == nil || o.taken {
		return p.Begin(ctx)
	}
	select {
	case r := <-o.ch:
		o.taken = true
		return r.txn, r.err
	case <-ctx.Done():
		o.discard()
		return nil, ctx.Err()
	}
}

// discard rolls back a transaction nobody took; safe on nil.
func (o *opening) discard() {
	if o == nil || o.taken {
		return
	}
	o.taken = true
	go func() {
		if r := <-o.ch; r.txn != nil {
			r.txn.Close()
		}
	}()
}
