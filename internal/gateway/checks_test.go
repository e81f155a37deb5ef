package gateway

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

func memoFixture(t testing.TB) (*Gateway, *sqlcheck.Catalog, *Delegation) {
	t.Helper()
	ddl, err := examples.FS.ReadFile("shop.sql")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcheck.ParseSchemaDDL(string(ddl), nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := examples.FS.ReadFile("unstick-orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, err := bound.Parse(y, "unstick-orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, rep := bound.Compile(d, cat, bound.Options{})
	if !rep.Signable {
		t.Fatal(rep.Problems)
	}
	rules, err := b.CheckRules()
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := b.Canonical()
	cfg := Config{}.WithDefaults()
	g := &Gateway{cfg: cfg, checks: newCheckCache(cfg.Limits)}
	return g, cat, &Delegation{ID: bound.ID(canon), Rules: rules, Bound: b}
}

// TestRememberedCheckIsTheCheck: the remembered analysis and decision are
// the ones a fresh check gives, for a statement that conforms and one
// that does not, and the memo is keyed by the delegation.
func TestRememberedCheckIsTheCheck(t *testing.T) {
	g, cat, d := memoFixture(t)
	other := &Delegation{ID: "dlg_other", Rules: nil}
	for _, sql := range []string{
		"UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 3",
		"DELETE FROM orders WHERE id = 3",
		"SELECT id, total_cents FROM orders",
	} {
		fresh := sqlcheck.Check(sqlcheck.Analyze(sql, cat, g.cfg.Limits), d.Rules)
		for round := 0; round < 2; round++ { // a miss, then a hit
			a, k := g.analyze(sql, cat)
			c := g.check(a, k, d)
			if c.dec.Outcome != fresh.Outcome || a.Canonical != fresh.CanonicalSQL ||
				len(c.reasons) != len(fresh.Reasons) || (fresh.Rule == nil) != (c.dec.Rule == nil) {
				t.Fatalf("%q round %d: remembered %s %v, fresh %s %v", sql, round, c.dec.Outcome, c.reasons, fresh.Outcome, fresh.ReasonStrings())
			}
			if o := g.check(a, k, other); o.dec.Outcome != sqlcheck.Refer {
				t.Fatalf("%q: a delegation with no rules got %s from the memo", sql, o.dec.Outcome)
			}
		}
	}
}

// BenchmarkRememberedCheck is the statement path's parse and check for a
// statement text seen before (a memo hit), against a fresh check.
//
//	go test -run '^$' -bench RememberedCheck ./internal/gateway/
func BenchmarkRememberedCheck(b *testing.B) {
	g, cat, d := memoFixture(b)
	const sql = "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 3"
	b.Run("hit", func(b *testing.B) {
		for b.Loop() {
			a, k := g.analyze(sql, cat)
			_ = g.check(a, k, d)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			_ = sqlcheck.Check(sqlcheck.Analyze(sql, cat, g.cfg.Limits), d.Rules)
		}
	})
}
