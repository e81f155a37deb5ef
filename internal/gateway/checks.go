package gateway

import (
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// The gateway remembers the static check in a sqlcheck.Cache: each
// delegation's catalog by (catalog, delegation id), the analysis of each
// statement's shape (or text) by (that catalog, shape and baked
// constants' values), and each delegation's decision on it, with its
// reasons as strings, by (analysis, delegation id). A delegation's id is
// a hash of its signed bytes, so it names its rules. Whether a
// delegation is in force, its quotas and the switches are decided afresh
// for every statement.

// maxCheckMemo bounds each of the cache's maps; statements longer than
// maxMemoSQL are never remembered.
const (
	maxCheckMemo = 4096
	maxMemoSQL   = 16 << 10
)

// checked is one delegation's decision with its reasons as strings.
type checked struct {
	dec     sqlcheck.Decision
	reasons []string
}

func newCheckCache(lim sqlcheck.Limits) *sqlcheck.Cache[checked] {
	return sqlcheck.NewCache[checked](sqlcheck.CacheConfig{Max: maxCheckMemo, MaxSQL: maxMemoSQL, Limits: lim})
}

// analyze is sqlcheck.Analyze, remembered (sqlcheck.Cache.Analyze).
func (g *Gateway) analyze(sql string, cat *sqlcheck.Catalog) (*sqlcheck.Analysis, sqlcheck.Key) {
	r := g.checks.Analyze(sql, cat)
	return r.Analysis, r.Key
}

// scope is the catalog as d's bound sees it (bound.Catalog), remembered;
// with no delegation, a catalog of no table.
func (g *Gateway) scope(cat *sqlcheck.Catalog, d *Delegation) *sqlcheck.Catalog {
	if d == nil {
		return g.checks.Scope(cat, "", func() *sqlcheck.Catalog { return cat.Bounded(nil, bound.CatalogName) })
	}
	return g.checks.Scope(cat, d.ID, func() *sqlcheck.Catalog { return d.Bound.Catalog(cat, bound.CatalogName) })
}

// check is sqlcheck.Check of a against d's rules, remembered under k.
func (g *Gateway) check(a *sqlcheck.Analysis, k sqlcheck.Key, d *Delegation) checked {
	if c, ok := g.checks.Value(k, d.ID); ok {
		return c
	}
	dec := sqlcheck.Check(a, d.Rules)
	c := checked{dec: dec, reasons: dec.ReasonStrings()}
	g.checks.Put(k, d.ID, c)
	return c
}
