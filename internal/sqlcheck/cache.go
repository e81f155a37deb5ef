package sqlcheck

import (
	"crypto/sha256"

	"github.com/harbormaster-dev/harbormaster/internal/memo"
)

// Cache remembers the static check's work for one caller (the gateway
// and the Pilot each hold their own). The check is a function of the
// statement's shape (its normalized text and its constants' kinds: the
// check reads no constant's value, except those a template keeps in the
// text), the catalog and the bound's rules, so a later statement of a
// remembered shape, with new literals, pays a normalize and a scan, and
// its canonical text is rebuilt from the shape's template.
//
// What is keyed by what:
//
//   - a bound's catalog (Scope): by the catalog's identity (a refreshed
//     catalog is a new *Catalog, which a key holds alive, so its address
//     is never reused while remembered) and the bound's id;
//   - which constants a shape's template keeps in the text: by the
//     catalog and the shape's key (normalized text and constant kinds);
//   - an analysis and its template (Analyze): by the catalog and the
//     shape's key with the values of its baked constants, or, for a
//     statement without a template, by the catalog and its text;
//   - a caller's value (Value, Put: the gateway's decision, the Pilot's
//     guarded template): by the analysis's Key and the bound's id.
//
// The catalog an analysis is keyed by is the bound's own (Scope), so a
// decision is never reused for another bound, another catalog or another
// baked value. A caller's value must be a function of exactly the
// analysis and the bound the id names (their signed bytes' hash), never
// of the statement's parameters' values. A statement is remembered by its
// shape whether its analysis succeeds or has reasons (the walker reads no
// parameter's value, so a reason is as much a function of the shape as a
// success is: TestRememberedShapeEqualsFreshCheck holds both to a fresh
// parse); one without a single parsed statement, or whose template does
// not rebuild its canonical text exactly, is remembered by its text.
// Each map holds at most Config.Max entries and is cleared when full
// (bounded).
type Cache[V any] struct {
	cfg CacheConfig

	texts  memo.Map[Key, *Analysis]
	baked  memo.Map[Key, []int]
	shapes memo.Map[Key, shaped]
	scoped memo.Map[scopedKey, *Catalog]
	values memo.Map[valueKey, V]
}

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Max bounds each of the cache's maps. Defaults to 4096.
	Max int
	// MaxSQL is the longest statement text remembered, in bytes; a
	// negative MaxSQL remembers statements of any length. Defaults to
	// 16 KiB.
	MaxSQL int
	// Limits are Analyze's and ShapeOf's.
	Limits Limits
}

// WithDefaults returns cfg with its zero fields set to their defaults.
func (cfg CacheConfig) WithDefaults() CacheConfig {
	if cfg.Max == 0 {
		cfg.Max = 4096
	}
	if cfg.MaxSQL == 0 {
		cfg.MaxSQL = 16 << 10
	}
	return cfg
}

// NewCache returns an empty cache.
func NewCache[V any](cfg CacheConfig) *Cache[V] {
	cfg = cfg.WithDefaults()
	return &Cache[V]{cfg: cfg,
		texts:  memo.Map[Key, *Analysis]{Max: cfg.Max},
		baked:  memo.Map[Key, []int]{Max: cfg.Max},
		shapes: memo.Map[Key, shaped]{Max: cfg.Max},
		scoped: memo.Map[scopedKey, *Catalog]{Max: cfg.Max},
		values: memo.Map[valueKey, V]{Max: cfg.Max}}
}

// Key names one remembered analysis: the catalog it was made against,
// and the statement's shape with its baked constants' values, or its
// text. The zero Key names nothing (a statement too long to remember, or
// no catalog).
type Key struct {
	cat *Catalog
	sum [32]byte
}

// Remembered reports whether values can be remembered under k.
func (k Key) Remembered() bool { return k.cat != nil }

type scopedKey struct {
	cat   *Catalog
	bound string
}

type valueKey struct {
	Key
	bound string
}

// shaped is a remembered shape: what the check reads (the facts and the
// analysis's own reasons), and the template that rebuilds a statement's
// canonical text.
type shaped struct {
	facts         *Facts
	reasons       []Reason
	notApprovable *Reason
	tpl           *Template
}

// analysis is the remembered analysis of the statement of shape s.
func (r shaped) analysis(s *Shape) *Analysis {
	return &Analysis{Facts: r.facts, Reasons: r.reasons, NotApprovable: r.notApprovable, Canonical: r.tpl.Canonical(s)}
}

func keyOf(cat *Catalog, kind, s string) Key {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(s))
	k := Key{cat: cat}
	h.Sum(k.sum[:0])
	return k
}

// Analyzed is a statement's analysis as the cache has it.
type Analyzed struct {
	// Analysis is the statement's: a remembered one keeps what the check
	// reads (facts, reasons, canonical text), not the tree; a Fresh one
	// is Analyze's own, and the cache keeps its facts: the caller must
	// not change its tree.
	*Analysis
	Key Key
	// Shape is the statement's shape; nil when it has none.
	Shape *Shape
	// Template is the shape's template; nil when the statement is
	// remembered by its text (or not at all).
	Template *Template
	// Fresh is set when the statement was analyzed now.
	Fresh bool
}

// Analyze is Analyze(sql, cat, Limits), remembered by shape (or, for a
// statement without a template, by text). A statement longer than MaxSQL
// is analyzed afresh, with no shape and the zero Key.
func (c *Cache[V]) Analyze(sql string, cat *Catalog) Analyzed {
	if cat == nil || c.cfg.MaxSQL >= 0 && len(sql) > c.cfg.MaxSQL {
		return Analyzed{Analysis: Analyze(sql, cat, c.cfg.Limits), Fresh: true}
	}
	if s, ok := ShapeOf(sql, c.cfg.Limits); ok {
		return c.AnalyzeShape(sql, s, cat)
	}
	if r, ok := c.byText(sql, cat); ok {
		return r
	}
	a := Analyze(sql, cat, c.cfg.Limits)
	return Analyzed{Analysis: a, Key: c.rememberText(sql, cat, a), Fresh: true}
}

// byText is the analysis remembered for the text sql.
func (c *Cache[V]) byText(sql string, cat *Catalog) (Analyzed, bool) {
	k := keyOf(cat, "text", sql)
	a, ok := c.texts.Get(k)
	return Analyzed{Analysis: a, Key: k}, ok
}

// AnalyzeShape is Analyze for a statement whose shape, s, the caller
// already has (ShapeOf(sql, Limits)).
func (c *Cache[V]) AnalyzeShape(sql string, s *Shape, cat *Catalog) Analyzed {
	if cat == nil || c.cfg.MaxSQL >= 0 && len(sql) > c.cfg.MaxSQL {
		return Analyzed{Analysis: Analyze(sql, cat, c.cfg.Limits), Shape: s, Fresh: true}
	}
	sk := keyOf(cat, "shape", s.Key())
	baked, ok := c.baked.Get(sk)
	if ok {
		k := keyOf(cat, "template", BakedKey(s, baked))
		if r, ok := c.shapes.Get(k); ok {
			return Analyzed{Analysis: r.analysis(s), Key: k, Shape: s, Template: r.tpl}
		}
	} else if r, ok := c.byText(sql, cat); ok {
		// A shape without a template is remembered by its text.
		r.Shape = s
		return r
	}
	a := Analyze(sql, cat, c.cfg.Limits)
	if tpl, err := NewTemplate(a, s); err == nil {
		k := keyOf(cat, "template", BakedKey(s, tpl.Baked()))
		c.baked.Put(sk, tpl.Baked())
		c.shapes.Put(k, shaped{facts: a.Facts, reasons: a.Reasons, notApprovable: a.NotApprovable, tpl: tpl})
		return Analyzed{Analysis: a, Key: k, Shape: s, Template: tpl, Fresh: true}
	}
	return Analyzed{Analysis: a, Key: c.rememberText(sql, cat, a), Shape: s, Fresh: true}
}

// rememberText remembers a statement without a template by its text.
func (c *Cache[V]) rememberText(sql string, cat *Catalog, a *Analysis) Key {
	k := keyOf(cat, "text", sql)
	c.texts.Put(k, &Analysis{Facts: a.Facts, Reasons: a.Reasons, Canonical: a.Canonical, NotApprovable: a.NotApprovable})
	return k
}

// Scope is cat as the bound named bound sees it: build() on the first
// call for (cat, bound), remembered after. bound is the bound's id (a
// hash of its signed bytes), or "" for the catalog of no bound.
func (c *Cache[V]) Scope(cat *Catalog, bound string, build func() *Catalog) *Catalog {
	k := scopedKey{cat: cat, bound: bound}
	if s, ok := c.scoped.Get(k); ok {
		return s
	}
	s := build()
	c.scoped.Put(k, s)
	return s
}

// Value returns the value remembered for the analysis k against the
// bound named bound.
func (c *Cache[V]) Value(k Key, bound string) (V, bool) {
	if !k.Remembered() {
		var zero V
		return zero, false
	}
	return c.values.Get(valueKey{Key: k, bound: bound})
}

// Put remembers v for the analysis k against the bound named bound; a
// key that names nothing remembers nothing.
func (c *Cache[V]) Put(k Key, bound string, v V) {
	if k.Remembered() {
		c.values.Put(valueKey{Key: k, bound: bound}, v)
	}
}
