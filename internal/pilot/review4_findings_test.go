package pilot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

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
		res, err := f.pilot.Execute(t.Context(), f.request(t, "accounts", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Refused || !strings.Contains(fmt.Sprint(res.Reasons), "foreign key") {
			t.Errorf("%s: %s %s %v rows=%d, want it referred: a foreign key's action changes rows no rule counts", sql, res.Outcome, res.Code, res.Reasons, res.RowsAffected)
		}
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
// has the cases); the Pilot's own check now refers it.
func TestReview4NaturalJoinLeak(t *testing.T) {
	f := newFixture(t)
	var at string
	if err := f.pilotConn(t).QueryRow(t.Context(), "SELECT updated_at::text FROM customers WHERE id = 2").Scan(&at); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		fmt.Sprintf("SELECT count(*) FROM customers NATURAL JOIN (SELECT 2 AS id, '%s'::timestamptz AS updated_at) x", at),
		fmt.Sprintf("UPDATE customers SET name = name FROM customers c NATURAL JOIN (SELECT 2 AS id, '%s'::timestamptz AS updated_at) x WHERE customers.id = c.id", at),
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck {
			t.Errorf("%s: %s %s rows=%v, want it referred: customers.updated_at is in no rule", sql, res.Outcome, res.Code, res.Rows)
		}
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

// TestReview4ReadViewsHoldTheRulesColumns: the two findings above were
// flaws in the static check's column attribution, and each read a column
// no rule lists through a fence view, which held every column of the
// table. An unfenced table was already read as a subquery of its rule's
// columns; a fenced table read through its view now is too, so such a
// flaw finds nothing to read. The target of an UPDATE or DELETE keeps
// every column: its fence, check and SET may name columns the select rule
// does not list.
func TestReview4ReadViewsHoldTheRulesColumns(t *testing.T) {
	f := newFixture(t)
	view := func(g *pilot.Guarded, alias string) string {
		for _, v := range g.Views {
			if strings.Contains(g.SQL, v.Name+" "+alias) {
				return v.Create
			}
		}
		t.Fatalf("no view for %s in %s", alias, g.SQL)
		return ""
	}
	g := guarded(t, f, "fix-name-typos.yaml", "SELECT c.name FROM customers c WHERE c.id = 3")
	if v := view(g, "c"); strings.Contains(v, "email") || strings.Contains(v, "updated_at") || !strings.Contains(v, "region") {
		t.Errorf("the read view holds columns the rule does not list: %s", v)
	}
	g = guarded(t, f, "fix-name-typos.yaml", "UPDATE customers SET name = 'x' FROM customers c WHERE customers.id = c.id AND c.id = 3")
	if v := view(g, "customers"); !strings.Contains(v, "email") || !strings.Contains(v, "updated_at") {
		t.Errorf("the write target's view lacks the table's columns: %s", v)
	}
	if v := view(g, "c"); strings.Contains(v, "email") {
		t.Errorf("the view of a read beside a write holds columns the rule does not list: %s", v)
	}
	// And it still runs: the join alias of TestReview4JoinAliasColumnsLeak,
	// without its column list, reads what the rule lists.
	res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml",
		"SELECT j.region, j.name FROM (customers c CROSS JOIN (SELECT 1 AS q) s) AS j WHERE j.id < 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) != 2 {
		t.Errorf("%s %s %v", res.Outcome, res.Code, res.Reasons)
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
