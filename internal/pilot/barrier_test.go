package pilot_test

import (
	"context"
	"fmt"
	"regexp"
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
				if len(res.Rows) > 1 || len(res.Rows) == 1 && byName(res)[0]["n"] != nil && byName(res)[0]["n"] != int64(0) {
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

// TestSystemColumnsOfAWriteTarget: a write target the Pilot runs
// as the table itself (no fence narrows what the agent may read of it)
// has PostgreSQL's system columns. The static check knew no column
// named ctid, but beside a function in FROM, whose output columns it
// cannot name, it counted ctid as the function's; PostgreSQL gave it to
// the table. RETURNING ctid (the new row version's place in the heap,
// which depends on how much room the rows around it take, columns no rule
// lists and rows of others included), xmin, xmax, cmin, cmax and tableoid
// then reached the agent, and WHERE ctid = ... probed the layout
// (DESIGN.md invariant 10). A system column's name now refers wherever it
// appears. Found in review 4.
func TestSystemColumnsOfAWriteTarget(t *testing.T) {
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
		f.mustRefuse(t, "orders-rw", sql, pilot.RefusedCheck, "is a system column", "it names a system column")
	}
}

var timeRE = regexp.MustCompile(`\d\d:\d\d:\d\d`)

// TestWholeRowBesideAFunction: a bare name the static check could
// not find among the columns at a level where a function in FROM has
// columns it cannot name was counted as perhaps the function's column and
// read nothing; when it names no column at all PostgreSQL reads it as a
// whole-row reference, and a fence view holds every column of its table.
// So SELECT c::text FROM customers c, generate_series(1, 1) g returned
// email and updated_at, which no rule lists; the same through a join's
// alias (j::text, and j.to_jsonb, attribute notation for to_jsonb(j))
// (DESIGN.md invariant 10). Such a name now counts as a read of every
// column of the relation it names: of the bound's catalog, which holds the
// columns the bound names and no other. Found in review 4.
func TestWholeRowBesideAFunction(t *testing.T) {
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
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "eu-names", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		// The Pilot checks and guards against the bound's catalog, where
		// customers has only id, name and region: the whole row is those
		// three, the same whatever else the table holds (invariant 10).
		rows := fmt.Sprintf("%s", res.Rows)
		if res.Outcome != pilot.Executed || strings.Contains(rows, "@example.com") || timeRE.MatchString(rows) || strings.Contains(rows, "updated_at") {
			t.Errorf("%s: %s %s %v rows %v, want it run with the bound's columns only: no email, no updated_at", sql, res.Outcome, res.Code, res.Reasons, rows)
		}
	}
	// Beside a write's FROM item, a bare name that is no column of the
	// written table in the bound's catalog is refused, the whole-row
	// reference too: on a target whose table had a column of that name,
	// PostgreSQL would read it (found in review i24).
	f.mustRefuse(t, "eu-names", "UPDATE customers SET name = name FROM generate_series(1, 1) g WHERE id = 3 RETURNING customers::text AS t",
		pilot.RefusedCheck, "qualify it", "a bare name beside a FROM item that is no column of the bound's table")
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

// TestFencedReadsCarryOnlyTheRulesColumns: the fence view holds
// every column of its table, so a whole-row reference the static check
// misread (TestWholeRowBesideAFunction) carried columns no rule
// lists. A fenced table is now read as a subquery of its rule's columns
// over the view, as an unfenced one is over the table: here the guards
// are built for statements the check refers, as if it had let them pass,
// and what they read holds only id, name and region. Found in review 4.
func TestFencedReadsCarryOnlyTheRulesColumns(t *testing.T) {
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

// TestNaturalJoinOnAHiddenColumn: NATURAL JOIN joins on every
// column name its two sides share, and the static check counted only the
// names tables share: beside a subquery, a VALUES list or a function with
// a column alias, a shared column no rule lists was read by nobody's
// account. customers c NATURAL JOIN (SELECT 'ada.lovelace@example.com'
// AS email) s answered which customers have that email (DESIGN.md
// invariant 10). Every name the two sides share now counts as read; and
// since the Pilot checks against the bound's catalog and reads customers
// as a subquery of the bound's columns, email is no column of customers at
// all: the join shares no name, and its answer is the same whatever email
// the statement names. Found in review 4.
func TestNaturalJoinOnAHiddenColumn(t *testing.T) {
	f := newFixture(t)
	for _, tmpl := range []string{
		"SELECT c.name FROM customers c NATURAL JOIN (SELECT '%s'::text AS email) s ORDER BY c.name",
		"SELECT c.name FROM customers c NATURAL JOIN (VALUES ('%s')) AS s (email) ORDER BY c.name",
		"WITH s AS (SELECT '%s'::text AS email) SELECT c.name FROM s NATURAL JOIN customers c ORDER BY c.name",
	} {
		sameWhateverHidden(t, f, "fix-name-typos.yaml", tmpl, "ada.lovelace@example.com", "nobody@example.com")
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

// TestNaturalJoinLeak: end to end, the count of a NATURAL JOIN of a
// fenced table with a subquery naming one of its unlisted columns told the
// agent that column's value (sqlcheck TestNaturalJoinReadsSubqueryColumns
// has the cases). The Pilot's check, against the bound's catalog, and its
// guards, which read customers as a subquery of the bound's columns, make
// updated_at no column of customers: the join is on id alone, and its
// answer is the same whatever value the statement names. Found in review 4.
func TestNaturalJoinLeak(t *testing.T) {
	f := newFixture(t)
	var at string
	if err := f.pilotConn(t).QueryRow(t.Context(), "SELECT updated_at::text FROM customers WHERE id = 2").Scan(&at); err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range []string{
		"SELECT count(*) FROM customers NATURAL JOIN (SELECT 2 AS id, '%s'::timestamptz AS updated_at) x",
		"UPDATE customers SET name = name FROM customers c NATURAL JOIN (SELECT 2 AS id, '%s'::timestamptz AS updated_at) x WHERE customers.id = c.id",
	} {
		sameWhateverHidden(t, f, "fix-name-typos.yaml", tmpl, at, "2001-01-01 00:00:00+00")
	}
}

// sameWhateverHidden runs tmpl with the hidden value that is in the target
// and with another, and fails unless the agent is answered the same.
func sameWhateverHidden(t *testing.T, f *fixture, example, tmpl, real, other string) {
	t.Helper()
	var got [2]string
	for i, v := range []string{real, other} {
		sql := fmt.Sprintf(tmpl, v)
		res, err := f.pilot.Execute(t.Context(), f.request(t, example, sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		got[i] = fmt.Sprintf("%s %s %v %v %v %d", res.Outcome, res.Code, res.Reasons, res.Columns, res.Rows, res.RowsAffected)
	}
	if got[0] != got[1] {
		t.Errorf("%s: the answer depends on a column no rule lists:\n  with %q: %s\n  with %q: %s", tmpl, real, got[0], other, got[1])
	}
}

// TestJoinAliasColumnsLeak: end to end, a join's column alias list
// renamed customers.email to region, and the agent of fix-name-typos read
// every EU customer's email (sqlcheck TestJoinAliasColumnList).
// Found in review 4.
func TestJoinAliasColumnsLeak(t *testing.T) {
	f := newFixture(t)
	res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml",
		"SELECT j.region FROM (customers c CROSS JOIN (SELECT 1 AS q) s) AS j (id, name, region, x) WHERE j.id < 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Refused || strings.Contains(fmt.Sprint(res.Rows), "@") {
		t.Errorf("%s %s %v: the agent reads customers.email, which no rule lists", res.Outcome, res.Code, res.Rows)
	}
}
