package pilot_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Regression for issue 9, class 2: a fence written into the statement as a
// plain subquery was flattened by the planner, so a predicate of the
// agent's that raises on some inputs ran on rows outside the fence first,
// and whether the statement failed told the agent about those rows. Row 21
// is a US customer; the typo delegation reads EU customers only. Every one
// of these raised on main before the fence views.
var raisingPredicates = []string{
	"regexp_like(name, '(')",      // an invalid pattern raises on every row it meets
	"CAST(name AS integer) > 0",   // a name is not a number
	"1 / (id - 21) > 0",           // zero only on row 21
	"(name::jsonb ->> 'a') = 'x'", // a name is not JSON
	"CAST(substr(name, 1, 1) AS date) IS NULL",
}

func TestFenceIsABarrier(t *testing.T) {
	f := newFixture(t)
	const typos = "fix-name-typos.yaml"
	for _, pred := range raisingPredicates {
		t.Run(pred, func(t *testing.T) {
			for _, sql := range []string{
				"SELECT id, name FROM customers WHERE id > 20 AND id < 22 AND " + pred,
				"SELECT id FROM customers c WHERE c.id = 21 AND " + strings.ReplaceAll(strings.ReplaceAll(pred, "name", "c.name"), "(id", "(c.id"),
				"SELECT count(*) AS n FROM customers WHERE id IN (SELECT id FROM customers WHERE id = 21 AND " + pred + ")",
			} {
				res, err := f.pilot.Execute(t.Context(), f.request(t, typos, sql))
				if err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				if res.Outcome != pilot.Executed {
					t.Fatalf("%s: %s %s %v (%s): a predicate ran on a row outside the fence", sql, res.Outcome, res.Code, res.Reasons, res.Detail)
				}
				if len(res.Rows) > 1 || len(res.Rows) == 1 && res.Rows[0]["n"] != nil && res.Rows[0]["n"] != int64(0) {
					t.Fatalf("%s: rows %v", sql, res.Rows)
				}
			}
			// The read part of a write: the surveyed rehearsal of an UPDATE
			// whose WHERE raises on row 21 reaches nothing and raises nothing.
			upd := "UPDATE customers SET name = 'x' WHERE id = 21 AND " + pred
			res, err := f.pilot.Rehearse(t.Context(), canonicalSQL(t, f, typos, upd), f.bounds[typos], f.auth(typos), "agent:demo", marque.PathSurveyed)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != pilot.Rehearsed || res.RowsAffected != 0 {
				t.Fatalf("%s: %s %s %v (%s), %d rows", upd, res.Outcome, res.Code, res.Reasons, res.Detail, res.RowsAffected)
			}
		})
	}
}

// An error inside the fence is the agent's to see, as a class: the
// target's own text (which can quote row values) is for humans only.
func TestTargetErrorsAreClasses(t *testing.T) {
	f := newFixture(t)
	res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "SELECT id FROM customers WHERE id = 3 AND CAST(name AS integer) > 0"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedDatabase {
		t.Fatalf("got %s %s", res.Outcome, res.Code)
	}
	if len(res.Reasons) != 1 || res.Reasons[0] != pilot.MessageDatabase {
		t.Fatalf("reasons %q, want only the class message", res.Reasons)
	}
	if strings.Contains(strings.Join(res.Reasons, " "), "Jonh") || !strings.Contains(res.Detail, "Jonh Smith") || !strings.Contains(res.Detail, "22P02") {
		t.Fatalf("the target's text must be in Detail only: reasons %q, detail %q", res.Reasons, res.Detail)
	}
	// Over max_rows: the class, the cap in Detail (the write stops at its
	// 21st row: how many more it would have reached is not known).
	res, err = f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", "UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != pilot.RefusedMaxRows || res.Reasons[0] != pilot.MessageMaxRows || !strings.Contains(res.Detail, "more than 20 rows") {
		t.Fatalf("got %s %q %q", res.Code, res.Reasons, res.Detail)
	}
}

// The barrier keeps the index: id = 3 through the fence view is still a
// primary-key index scan, for a read and for the write's target.
func TestFenceViewKeepsTheIndex(t *testing.T) {
	f := newFixture(t)
	const typos = "fix-name-typos.yaml"
	cases := []struct{ sql, path string }{
		{"SELECT id, name FROM customers WHERE id = 3", marque.PathCompiled},
		{"UPDATE customers SET name = 'Jon Smith' WHERE id = 3", marque.PathSurveyed},
	}
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for _, c := range cases {
		canon := canonicalSQL(t, f, typos, c.sql)
		// Running it once creates the view.
		if _, err := f.pilot.Rehearse(t.Context(), canon, f.bounds[typos], f.auth(typos), "agent:demo", c.path); err != nil {
			t.Fatal(err)
		}
		g := guarded(t, f, typos, canon)
		if len(g.Views) != 1 || !strings.Contains(g.SQL, pilot.ViewSchema+"."+g.Views[0].Name) {
			t.Fatalf("%s: not read through a fence view: %s", c.sql, g.SQL)
		}
		var plan strings.Builder
		rows, err := conn.Query(t.Context(), "EXPLAIN "+g.SQL)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		t.Logf("%s\n%s", g.SQL, plan.String())
		if !strings.Contains(plan.String(), "Index Scan using customers_pkey") {
			t.Fatalf("%s: the primary key no longer serves id = 3:\n%s", c.sql, plan.String())
		}
	}
}

// A view dropped behind the Pilot's back (harbormaster.drop_fence_views(),
// before a migration) is recreated: the statement that finds it missing
// refers, the next one runs.
func TestFenceViewsRecreated(t *testing.T) {
	f := newFixture(t)
	sql := "SELECT id FROM customers WHERE id = 3"
	if res, _ := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", sql)); res.Outcome != pilot.Executed {
		t.Fatalf("got %s %v", res.Outcome, res.Reasons)
	}
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT harbormaster.drop_fence_views()").Scan(&n); err != nil || n != 1 {
		t.Fatalf("dropped %d views: %v", n, err)
	}
	if res, _ := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", sql)); res.Outcome != pilot.Refused {
		t.Fatalf("got %s, want the statement that found its view missing refused", res.Outcome)
	}
	if res, _ := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", sql)); res.Outcome != pilot.Executed || len(res.Rows) != 1 {
		t.Fatalf("got %s %v, want the view recreated", res.Outcome, res.Reasons)
	}
	// Someone else's object under a view's name is never read through.
	if _, err := conn.Exec(t.Context(), "SELECT harbormaster.drop_fence_views()"); err != nil {
		t.Fatal(err)
	}
	g := guarded(t, f, "fix-name-typos.yaml", canonicalSQL(t, f, "fix-name-typos.yaml", sql))
	if _, err := conn.Exec(t.Context(), "CREATE VIEW harbormaster."+g.Views[0].Name+" AS SELECT * FROM public.customers"); err != nil {
		t.Fatal(err)
	}
	p2, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if _, err := p2.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", sql)); err == nil || !strings.Contains(err.Error(), "not a security-barrier") {
		t.Fatalf("got %v, want the impostor view refused", err)
	}
}

func canonicalSQL(t *testing.T, f *fixture, example, sql string) string {
	t.Helper()
	a := sqlcheck.Analyze(sql, f.pilot.Catalog(), sqlcheck.Limits{})
	if a.Canonical == "" {
		t.Fatalf("%s: %v", sql, a.Reasons)
	}
	return a.Canonical
}

func guarded(t *testing.T, f *fixture, example, sql string) *pilot.Guarded {
	t.Helper()
	b, err := bound.ParseCanonical(f.bounds[example])
	if err != nil {
		t.Fatal(err)
	}
	rules, _ := b.CheckRules()
	// As the Pilot checks and guards it: against the bound's catalog.
	cat := b.Catalog(f.pilot.Catalog(), bound.CatalogName)
	a := sqlcheck.Analyze(sql, cat, sqlcheck.Limits{})
	d := sqlcheck.Check(a, rules)
	g, err := pilot.BuildGuards(a, d, b, cat)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
