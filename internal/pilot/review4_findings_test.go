package pilot_test

import (
	"context"
	"fmt"
	"regexp"
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
		f.mustRefuse(t, "orders-rw", sql, pilot.RefusedCheck, "is a system column", "it names a system column")
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
// column of the relation it names: of the bound's catalog, which holds the
// columns the bound names and no other.
var timeRE = regexp.MustCompile(`\d\d:\d\d:\d\d`)

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
		// The Pilot checks and guards against the bound's catalog, where
		// customers has only id, name and region: the whole row is those
		// three, the same whatever else the table holds (invariant 10).
		rows := fmt.Sprintf("%s", res.Rows)
		if res.Outcome != pilot.Executed || strings.Contains(rows, "@example.com") || timeRE.MatchString(rows) || strings.Contains(rows, "updated_at") {
			t.Errorf("%s: %s %s %v rows %v, want it run with the bound's columns only: no email, no updated_at", sql, res.Outcome, res.Code, res.Reasons, rows)
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
// invariant 10). Every name the two sides share now counts as read; and
// since the Pilot checks against the bound's catalog and reads customers
// as a subquery of the bound's columns, email is no column of customers at
// all: the join shares no name, and its answer is the same whatever email
// the statement names.
func TestReview4NaturalJoinOnAHiddenColumn(t *testing.T) {
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

// withSchema runs ddl on the fixture's target and gives the fixture a
// Pilot that read its catalog afterwards.
func (f *fixture) withSchema(t *testing.T, ddl string) {
	t.Helper()
	if _, err := f.pilotConn(t).Exec(t.Context(), ddl, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	f.pilot = p
}

func (f *fixture) count(t *testing.T, query string) int64 {
	t.Helper()
	var n int64
	if err := f.pilotConn(t).QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReview4CascadesAreRowsTheWriteReaches: a foreign key with ON DELETE
// CASCADE (or SET NULL, SET DEFAULT, and the same ON UPDATE) makes a
// DELETE or a key UPDATE of one row change rows of another table. Those
// rows are in no rule's fence, are not counted against max_rows (the
// command tag and RETURNING count the target's rows only) and may be in
// a table the bound never names: an agent allowed to delete one account
// deleted its 100 ledger rows and cleared 10 notes, on the compiled path,
// as "1 row affected" (DESIGN.md invariant 5). The Pilot now refers such
// a write: it cannot count or fence what the cascade reaches.
func TestReview4CascadesAreRowsTheWriteReaches(t *testing.T) {
	f := newFixture(t)
	f.withSchema(t, `
CREATE TABLE accounts (id int PRIMARY KEY, region text, label text);
CREATE TABLE ledger (id int PRIMARY KEY, account_id int REFERENCES accounts (id) ON DELETE CASCADE ON UPDATE CASCADE, amount int);
CREATE TABLE notes (id int PRIMARY KEY, account_id int REFERENCES accounts (id) ON DELETE SET NULL ON UPDATE SET NULL, body text);
CREATE TABLE plain (id int PRIMARY KEY, region text);
CREATE TABLE plain_ref (id int PRIMARY KEY, plain_id int REFERENCES plain (id));
CREATE TABLE accounts_kid () INHERITS (accounts);
CREATE TABLE kid_ref (id int PRIMARY KEY, kid_id int);
ALTER TABLE accounts_kid ADD PRIMARY KEY (id);
ALTER TABLE kid_ref ADD FOREIGN KEY (kid_id) REFERENCES accounts_kid (id) ON DELETE CASCADE;
INSERT INTO accounts VALUES (1, 'EU', 'a'), (2, 'EU', 'b'), (3, 'US', 'c'), (4, 'EU', 'd');
INSERT INTO ledger SELECT g, 1 + g % 3, g FROM generate_series(1, 300) g;
INSERT INTO notes SELECT g, 1 + g % 3, 'n' FROM generate_series(1, 30) g;
INSERT INTO plain VALUES (1, 'EU'), (2, 'EU');
INSERT INTO accounts_kid VALUES (50, 'EU', 'k');
INSERT INTO kid_ref VALUES (1, 50);
CREATE TABLE parts (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parts_eu PARTITION OF parts FOR VALUES IN ('EU');
CREATE TABLE parts_us PARTITION OF parts FOR VALUES IN ('US');
CREATE TABLE leaf_ref (id int PRIMARY KEY, pid int, preg text, FOREIGN KEY (pid, preg) REFERENCES parts_eu (id, region) ON DELETE CASCADE);
CREATE TABLE roots (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE roots_eu PARTITION OF roots FOR VALUES IN ('EU');
CREATE TABLE root_ref (id int PRIMARY KEY, rid int, rreg text, FOREIGN KEY (rid, rreg) REFERENCES roots (id, region) ON DELETE CASCADE);
INSERT INTO parts VALUES (1, 'EU', 'a');
INSERT INTO leaf_ref VALUES (1, 1, 'EU');
INSERT INTO roots VALUES (1, 'EU', 'a');
INSERT INTO root_ref VALUES (1, 1, 'EU');`)
	f.addBound(t, "accounts", []byte(`sentence: tidy EU accounts
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.accounts
    columns: [id, region, label]
    fence: region = 'EU'
    max_rows: 10
  - op: delete
    table: public.accounts
    fence: region = 'EU'
    max_rows: 1
  - op: update
    table: public.accounts
    columns: [id, label]
    fence: region = 'EU'
    max_rows: 1
  - op: select
    table: public.plain
    columns: [id, region]
    max_rows: 10
  - op: delete
    table: public.plain
    max_rows: 1
  - op: select
    table: public.parts
    columns: [id, region, v]
    max_rows: 10
  - op: update
    table: public.parts
    columns: [region, v]
    max_rows: 1
  - op: select
    table: public.roots
    columns: [id, region, v]
    max_rows: 10
  - op: update
    table: public.roots
    columns: [v]
    max_rows: 1
  - op: delete
    table: public.roots
    max_rows: 1
`))
	ledger, notes := f.count(t, "SELECT count(*) FROM ledger"), f.count(t, "SELECT count(*) FROM notes WHERE account_id IS NOT NULL")
	for _, sql := range []string{
		"DELETE FROM accounts WHERE id = 1",
		"DELETE FROM accounts WHERE id = 2 RETURNING id",
		"UPDATE accounts SET id = 100 WHERE id = 2",
		// A row of a child table goes with a DELETE of the parent.
		"DELETE FROM accounts WHERE id = 50",
		// A row moved to another partition is deleted from its own, whose
		// foreign key cascades.
		"UPDATE parts SET region = 'US' WHERE id = 1",
		"DELETE FROM roots WHERE id = 1",
	} {
		f.mustRefuse(t, "accounts", sql, "", "foreign key", "a foreign key's action changes rows no rule counts")
	}
	if n := f.count(t, "SELECT count(*) FROM ledger"); n != ledger {
		t.Errorf("the cascade deleted %d ledger rows, which no rule names", ledger-n)
	}
	if n := f.count(t, "SELECT count(*) FROM notes WHERE account_id IS NOT NULL"); n != notes {
		t.Errorf("the cascade cleared %d notes, which no rule names", notes-n)
	}
	if n := f.count(t, "SELECT count(*) FROM kid_ref"); n != 1 {
		t.Errorf("the cascade from a child table deleted kid_ref rows: %d left", n)
	}
	if n := f.count(t, "SELECT count(*) FROM leaf_ref") + f.count(t, "SELECT count(*) FROM root_ref"); n != 2 {
		t.Errorf("a cascade from a partition deleted rows: %d of 2 left", n)
	}
	// What no action reaches beyond the target still runs: a column no
	// foreign key references, and a table referenced without an action.
	for _, sql := range []string{
		"UPDATE accounts SET label = 'x' WHERE id = 4",
		"DELETE FROM ONLY plain WHERE id = 2",
		// A partitioned table referenced as a whole: an UPDATE is one.
		"UPDATE roots SET v = 'b' WHERE id = 1",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "accounts", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Executed || res.RowsAffected != 1 {
			t.Errorf("%s: %s %s %v rows=%d, want it executed", sql, res.Outcome, res.Code, res.Reasons, res.RowsAffected)
		}
	}
}

// TestReview4NaturalJoinLeak: end to end, the count of a NATURAL JOIN of a
// fenced table with a subquery naming one of its unlisted columns told the
// agent that column's value (sqlcheck TestReview4NaturalJoinReadsSubqueryColumns
// has the cases). The Pilot's check, against the bound's catalog, and its
// guards, which read customers as a subquery of the bound's columns, make
// updated_at no column of customers: the join is on id alone, and its
// answer is the same whatever value the statement names.
func TestReview4NaturalJoinLeak(t *testing.T) {
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

// TestReview4JoinAliasColumnsLeak: end to end, a join's column alias list
// renamed customers.email to region, and the agent of fix-name-typos read
// every EU customer's email (sqlcheck TestReview4JoinAliasColumnList).
func TestReview4JoinAliasColumnsLeak(t *testing.T) {
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

// TestReview4TemplateMinInt4: -2147483648 is an int4 constant to
// PostgreSQL; the template bound it as bigint, so the template ran a
// statement the literal one is not (sqlcheck TestReview4MinInt4IsAnInteger).
// The template and the literal statement now answer alike: both refuse.
func TestReview4TemplateMinInt4(t *testing.T) {
	f := newFixture(t)
	res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", "SELECT id, -2147483648 - 1 AS v FROM orders WHERE id = 1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedDatabase {
		t.Errorf("%s %s %v (ran %s %v), want the target's integer out of range, as for the literal statement", res.Outcome, res.Code, res.Rows, res.ExecutedSQL, res.ExecutedArgs)
	}
}
