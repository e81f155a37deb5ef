package pilot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestReview4SystemColumnsOfAWriteTarget: a write target the Pilot runs
// as the table itself (no fence narrows what the agent may read of it)
// has PostgreSQL's system columns. The static check knew no column
// named ctid, but beside a function in FROM, whose output columns it
// cannot name, it counted ctid as the function's; PostgreSQL gave it to
// the table. RETURNING ctid (the new row version's place in the heap,
// which depends on how much room the rows around it take, columns no rule
// lists and rows of others included), xmin, xmax, cmin, cmax and tableoid
// then reached the agent, and WHERE ctid = ... probed the layout
// (DESIGN.md invariant 10). A system column's name now refers wherever it
// appears.
func TestReview4SystemColumnsOfAWriteTarget(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "orders-rw", []byte(`sentence: read most of orders, fix pending ones, delete any
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, customer_id, status, created_at, updated_at]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [status, updated_at]
    fence: status = 'pending' and created_at < now() - interval '1 day'
    max_rows: 20
  - op: delete
    table: public.orders
    max_rows: 1
`))
	for _, sql := range []string{
		"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g WHERE id = 3 RETURNING ctid",
		"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g WHERE id = 3 RETURNING xmin, xmax, cmin, cmax, tableoid",
		"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g WHERE id = 3 AND ctid = '(0,3)'",
		"UPDATE orders SET status = 'failed' FROM jsonb_each('{}') j WHERE id = 3 RETURNING id, ctid::text AS c",
		"DELETE FROM orders USING generate_series(1, 1) g WHERE id = 100000 OR ctid > '(0,0)' RETURNING id",
		"SELECT s.xmin FROM (SELECT id AS xmin FROM orders) s",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-rw", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck || !strings.Contains(fmt.Sprint(res.Reasons), "is a system column") {
			t.Errorf("%s: %s %s %v columns %v rows %v affected %d, want it refused: it names a system column", sql, res.Outcome, res.Code, res.Reasons, res.Columns, res.Rows, res.RowsAffected)
		}
	}
}

// TestReview4WholeRowBesideAFunction: a bare name the static check could
// not find among the columns at a level where a function in FROM has
// columns it cannot name was counted as perhaps the function's column and
// read nothing; when it names no column at all PostgreSQL reads it as a
// whole-row reference, and a fence view holds every column of its table.
// So SELECT c::text FROM customers c, generate_series(1, 1) g returned
// email and updated_at, which no rule lists; the same through a join's
// alias (j::text, and j.to_jsonb, attribute notation for to_jsonb(j))
// (DESIGN.md invariant 10). Such a name now counts as a read of every
// column of the relation it names.
func TestReview4WholeRowBesideAFunction(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "eu-names", []byte(`sentence: read and fix the names of EU customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
    max_rows: 5
  - op: update
    table: public.customers
    columns: [name]
    fence: region = 'EU'
    max_rows: 1
`))
	for _, sql := range []string{
		"SELECT c::text AS t FROM customers c, generate_series(1, 1) g",
		"SELECT to_jsonb(c) AS t FROM customers c, jsonb_each('{}') j",
		"SELECT (SELECT c::text FROM generate_series(1, 1) g) AS t FROM customers c",
		"SELECT j::text AS t FROM (customers c CROSS JOIN generate_series(1, 1) g) j",
		"SELECT j.to_jsonb AS t FROM (customers c CROSS JOIN generate_series(1, 1) g) j",
		"UPDATE customers SET name = name FROM generate_series(1, 1) g WHERE id = 3 RETURNING customers::text AS t",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "eu-names", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if strings.Contains(fmt.Sprint(res.Rows), "@example.com") || res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck {
			t.Errorf("%s: %s %s %v rows %v, want it refused: it reads email and updated_at, which no rule lists", sql, res.Outcome, res.Code, res.Reasons, res.Rows)
		}
	}
	// The function's own columns, and a known column beside it, still run.
	for _, sql := range []string{
		"SELECT c.id, g FROM customers c, generate_series(1, 1) g",
		"SELECT g.to_jsonb AS t FROM customers c, generate_series(1, 1) g",
		"SELECT s::text AS t FROM (SELECT c.id, g.* FROM customers c, generate_series(1, 1) g) s",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "eu-names", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if res.Outcome != pilot.Executed || len(res.Rows) == 0 {
			t.Errorf("%s: %s %v, want it executed", sql, res.Outcome, res.Reasons)
		}
	}
}

// TestReview4FencedReadsCarryOnlyTheRulesColumns: the fence view holds
// every column of its table, so a whole-row reference the static check
// misread (TestReview4WholeRowBesideAFunction) carried columns no rule
// lists. A fenced table is now read as a subquery of its rule's columns
// over the view, as an unfenced one is over the table: here the guards
// are built for statements the check refers, as if it had let them pass,
// and what they read holds only id, name and region.
func TestReview4FencedReadsCarryOnlyTheRulesColumns(t *testing.T) {
	f := newFixture(t)
	const example = "fix-name-typos.yaml" // select customers (id, name, region) where region = 'EU'
	b, err := bound.ParseCanonical(f.bounds[example])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"SELECT c::text AS t FROM customers c",
		"SELECT to_jsonb(c)::text AS t FROM customers c JOIN customers d ON d.id = c.id",
		"SELECT (SELECT to_jsonb(x)::text FROM customers x WHERE x.id = c.id) AS t FROM customers c",
		"SELECT j::text AS t FROM (customers c CROSS JOIN generate_series(1, 1) g) j",
	} {
		a := sqlcheck.Analyze(sql, f.pilot.Catalog(), sqlcheck.Limits{})
		if a.Facts == nil {
			t.Fatalf("%s: %v", sql, a.Reasons)
		}
		if d := sqlcheck.Check(a, mustRules(t, b)); d.Outcome != sqlcheck.Refer {
			t.Fatalf("%s: %s, want the check to refer it (this test stands in for a check that did not)", sql, d.Outcome)
		}
		forged := sqlcheck.Decision{Outcome: sqlcheck.Conforms, Uses: []sqlcheck.Use{{Table: sqlcheck.TableName{Schema: "public", Name: "customers"}, Op: sqlcheck.OpSelect, Rule: 0}}}
		g, err := pilot.BuildGuards(a, forged, b, f.pilot.Catalog())
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		for _, v := range g.Views {
			if _, err := conn.Exec(t.Context(), v.Create); err != nil && !strings.Contains(err.Error(), "already exists") {
				t.Fatal(err)
			}
		}
		rows, err := conn.Query(t.Context(), g.SQL, pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Fatalf("%s: %v", g.SQL, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", g.SQL, err)
		}
		if len(got) == 0 || strings.Contains(strings.Join(got, "\n"), "@example.com") || strings.Contains(strings.Join(got, "\n"), "updated_at") {
			t.Errorf("%s\nran as %s\nand read %q: want rows of id, name and region only", sql, g.SQL, got)
		}
	}
}

func mustRules(t *testing.T, b *bound.Bound) []sqlcheck.Rule {
	t.Helper()
	rules, err := b.CheckRules()
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestReview4NaturalJoinOnAHiddenColumn: NATURAL JOIN joins on every
// column name its two sides share, and the static check counted only the
// names tables share: beside a subquery, a VALUES list or a function with
// a column alias, a shared column no rule lists was read by nobody's
// account. customers c NATURAL JOIN (SELECT 'ada.lovelace@example.com'
// AS email) s answered which customers have that email (DESIGN.md
// invariant 10). Every name the two sides share now counts as read.
func TestReview4NaturalJoinOnAHiddenColumn(t *testing.T) {
	f := newFixture(t)
	for _, sql := range []string{
		"SELECT c.name FROM customers c NATURAL JOIN (SELECT 'ada.lovelace@example.com'::text AS email) s",
		"SELECT c.name FROM customers c NATURAL JOIN (VALUES ('ada.lovelace@example.com')) AS s (email)",
		"SELECT c.name FROM customers c NATURAL JOIN generate_series(1, 1) AS g (email)",
		"WITH s AS (SELECT 'x'::text AS email) SELECT c.name FROM s NATURAL JOIN customers c",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck || !strings.Contains(fmt.Sprint(res.Reasons), "email") {
			t.Errorf("%s: %s %s %v rows %v, want it refused: it joins on email, which no rule lists", sql, res.Outcome, res.Code, res.Reasons, res.Rows)
		}
	}
	// A shared column the rule lists still joins.
	res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "SELECT c.name FROM customers c NATURAL JOIN (SELECT 3::bigint AS id) s"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) != 1 {
		t.Errorf("a natural join on id: %s %v %v, want the one customer", res.Outcome, res.Reasons, res.Rows)
	}
}
