package pilot_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestCascadeThroughGeneratedKey: the run-time foreign key question
// compared a key's referenced columns with the columns an UPDATE sets, by
// name. A key on a stored generated column computed from a set column
// changes all the same, so its ON UPDATE CASCADE ran: a compiled UPDATE
// of one account under max_rows: 1 rewrote 500 rows of a table no rule
// names (invariant 5). A key that depends on a written column, through a
// generated column or a BEFORE UPDATE trigger that may rewrite the row,
// now refers before anything is written: on a table, on a partitioned
// table whose partitions number their columns each their own way, and
// for keys, generated columns and triggers added after the Pilot read its
// catalog. An update of a column no key depends on still runs.
func TestCascadeThroughGeneratedKey(t *testing.T) {
	f := newFixture(t)
	f.withSchema(t, `
CREATE TABLE accounts (id int PRIMARY KEY, code text NOT NULL, note text,
    key text GENERATED ALWAYS AS (upper(code)) STORED UNIQUE);
INSERT INTO accounts (id, code) VALUES (1, 'a'), (2, 'b');
CREATE TABLE parts (id int NOT NULL, region text NOT NULL, code text NOT NULL, note text,
    key text GENERATED ALWAYS AS (region || ':' || code) STORED,
    PRIMARY KEY (region, id), UNIQUE (region, key)) PARTITION BY LIST (region);
CREATE TABLE parts_eu PARTITION OF parts FOR VALUES IN ('EU');
CREATE TABLE parts_us (note text, code text NOT NULL, region text NOT NULL, id int NOT NULL,
    key text GENERATED ALWAYS AS (region || ':' || code) STORED);
ALTER TABLE parts ATTACH PARTITION parts_us FOR VALUES IN ('US');
INSERT INTO parts (id, region, code) VALUES (1, 'EU', 'a'), (2, 'US', 'b');
CREATE TABLE handles (id int PRIMARY KEY, name text NOT NULL, handle text NOT NULL UNIQUE);
INSERT INTO handles VALUES (1, 'Ann', 'ann');`)
	f.addBound(t, "keys", []byte(`sentence: fix the codes and notes of accounts, parts and handles, one at a time
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.accounts
    columns: [id, code, note, key]
    max_rows: 100
  - op: update
    table: public.accounts
    columns: [code, note]
    max_rows: 1
  - op: select
    table: public.parts
    columns: [id, region, code, note, key]
    max_rows: 100
  - op: update
    table: public.parts
    columns: [code, note]
    max_rows: 1
  - op: select
    table: public.handles
    columns: [id, name, handle]
    max_rows: 100
  - op: update
    table: public.handles
    columns: [name]
    max_rows: 1
`))
	run := func(sql string) *pilot.Result { t.Helper(); return f.execute(t, "keys", sql) }
	// Before any key references them, every write runs (and the compiled
	// path remembers its template).
	for _, sql := range []string{
		"UPDATE accounts SET code = 'c' WHERE id = 2",
		"UPDATE parts SET code = 'c' WHERE id = 2",
		"UPDATE parts SET code = 'd' WHERE id = 1",
		"UPDATE handles SET name = 'Anne' WHERE id = 1",
	} {
		if res := run(sql); res.Outcome != pilot.Executed || res.RowsAffected != 1 {
			t.Fatalf("%s: %s %v, want it executed: no key references the table yet", sql, res.Outcome, res.Reasons)
		}
	}
	// A migration after the Pilot read its catalog: keys onto the
	// generated columns, 500 rows referencing one account and one part,
	// and a trigger that derives a key from a written column.
	if _, err := f.pilotConn(t).Exec(t.Context(), `
CREATE TABLE links (id int PRIMARY KEY, account_key text REFERENCES accounts (key) ON UPDATE CASCADE);
INSERT INTO links SELECT g, 'A' FROM generate_series(1, 500) g;
CREATE TABLE part_links (id int PRIMARY KEY, region text, part_key text,
    FOREIGN KEY (region, part_key) REFERENCES parts (region, key) ON UPDATE SET NULL);
INSERT INTO part_links SELECT g, CASE WHEN g % 2 = 0 THEN 'EU' ELSE 'US' END, CASE WHEN g % 2 = 0 THEN 'EU:d' ELSE 'US:c' END
    FROM generate_series(1, 500) g;
CREATE FUNCTION handle_from_name() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.handle := lower(NEW.name); RETURN NEW; END $$;
CREATE TRIGGER handle_from_name BEFORE UPDATE ON handles FOR EACH ROW EXECUTE FUNCTION handle_from_name();
CREATE TABLE mentions (id int PRIMARY KEY, handle text REFERENCES handles (handle) ON UPDATE CASCADE);
INSERT INTO mentions SELECT g, 'ann' FROM generate_series(1, 500) g;`); err != nil {
		t.Fatal(err)
	}
	const wants = "a foreign key's ON UPDATE action answers a key computed from the written column"
	for _, sql := range []string{
		"UPDATE accounts SET code = 'z' WHERE id = 1",
		"UPDATE parts SET code = 'z' WHERE id = 1",
		"UPDATE parts SET code = 'z' WHERE id = 2",
		"UPDATE handles SET name = 'Bob' WHERE id = 1",
		// A trigger may rewrite the key whatever the update writes.
		"UPDATE handles SET name = name WHERE id = 1",
	} {
		f.mustRefuse(t, "keys", sql, pilot.RefusedCheck, "foreign key", wants)
		reh, err := f.pilot.Rehearse(t.Context(), f.request(t, "keys", sql).SQL, f.bounds["keys"], f.auth("keys"), "agent:demo", marque.PathCompiled)
		if err != nil {
			t.Fatal(err)
		}
		if reh.Outcome != pilot.Refused || reh.Code != pilot.RefusedCheck || reh.Reasons[0] != pilot.MessageCascade {
			t.Errorf("%s, rehearsed (the literal path): %s %s %v, want it refused for the foreign key", sql, reh.Outcome, reh.Code, reh.Reasons)
		}
	}
	for q, want := range map[string]int64{
		"SELECT count(*) FROM links WHERE account_key = 'A'":                            500,
		"SELECT count(*) FROM part_links WHERE part_key IS NOT NULL":                    500,
		"SELECT count(*) FROM mentions WHERE handle = 'ann'":                            500,
		"SELECT count(*) FROM accounts WHERE code = 'a'":                                1,
		"SELECT count(*) FROM parts WHERE (region, code) IN (('EU', 'd'), ('US', 'c'))": 2,
	} {
		if n := f.count(t, q); n != want {
			t.Errorf("%s: %d, want %d: a write the key depends on ran", q, n, want)
		}
	}
	// A column no key depends on.
	for _, sql := range []string{
		"UPDATE accounts SET note = 'x' WHERE id = 1",
		"UPDATE parts SET note = 'x' WHERE id = 1",
		"UPDATE parts SET note = 'x' WHERE id = 2",
	} {
		if res := run(sql); res.Outcome != pilot.Executed || res.RowsAffected != 1 {
			t.Errorf("%s: %s %v, want it executed: no key depends on note", sql, res.Outcome, res.Reasons)
		}
	}
}

// TestCascadesAreRowsTheWriteReaches: a foreign key with ON DELETE
// CASCADE (or SET NULL, SET DEFAULT, and the same ON UPDATE) makes a
// DELETE or a key UPDATE of one row change rows of another table. Those
// rows are in no rule's fence, are not counted against max_rows (the
// command tag and RETURNING count the target's rows only) and may be in
// a table the bound never names: an agent allowed to delete one account
// deleted its 100 ledger rows and cleared 10 notes, on the compiled path,
// as "1 row affected" (DESIGN.md invariant 5). The Pilot now refers such
// a write: it cannot count or fence what the cascade reaches.
// Found in review 4.
func TestCascadesAreRowsTheWriteReaches(t *testing.T) {
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

// TestCascadeAddedAfterTheCatalog: the Pilot refers a DELETE or a
// key UPDATE that a foreign key's CASCADE, SET NULL or SET DEFAULT
// answers, but it read those actions with its catalog, once. A foreign
// key added by a migration after that (ON DELETE CASCADE from a new
// table) was unknown to it: DELETE FROM orders WHERE id = 1 ran on the
// compiled path as "1 row affected" and deleted the new table's rows with
// it, in no fence and uncounted (DESIGN.md invariant 5). The guarded
// statement now asks the target's catalog as it runs, on the literal path
// and through a remembered template alike, and such a write refers.
// Found in review 6.
func TestCascadeAddedAfterTheCatalog(t *testing.T) {
	for _, counter := range []bool{true, false} {
		t.Run(map[bool]string{true: "catalog generation", false: "no catalog generation"}[counter], func(t *testing.T) {
			cascadeAddedAfterTheCatalog(t, counter)
		})
	}
}

// cascadeAddedAfterTheCatalog is TestCascadeAddedAfterTheCatalog on a
// target with the catalog generation (a remembered write asks the counter,
// finds it moved, and the literal path refuses) or one initialized before
// it had one (the folded write asks the question itself).
func cascadeAddedAfterTheCatalog(t *testing.T, counter bool) {
	f := newFixture(t)
	if counter {
		// target init --catalog-generation
		if _, err := f.pilotConn(t).Exec(t.Context(), pilot.GenerationTriggerSQL); err != nil {
			t.Fatal(err)
		}
	} else {
		f.withSchema(t, `DROP TABLE harbormaster.catalog_generation`)
	}
	f.addBound(t, "orders-w", []byte(`sentence: fix and delete orders
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, customer_id, status, total_cents, created_at, updated_at]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [id, status]
    max_rows: 5
  - op: delete
    table: public.orders
    max_rows: 5
`))
	// Before the migration: both run, and a template is remembered.
	for _, sql := range []string{
		"DELETE FROM orders WHERE id = 100000",
		"UPDATE orders SET status = status WHERE id = 2",
		"UPDATE orders SET id = id WHERE id = 100000",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-w", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Executed {
			t.Fatalf("%s: %s %v, want it executed: no foreign key action reaches orders yet", sql, res.Outcome, res.Reasons)
		}
	}
	if _, err := f.pilotConn(t).Exec(t.Context(), `
CREATE TABLE order_notes (id int PRIMARY KEY, order_id bigint REFERENCES orders (id) ON DELETE CASCADE ON UPDATE CASCADE);
INSERT INTO order_notes VALUES (1, 1), (2, 1), (3, 2)`); err != nil {
		t.Fatal(err)
	}
	before := f.pilot.Stats()
	for _, sql := range []string{
		"DELETE FROM orders WHERE id = 1",
		"DELETE FROM orders WHERE id = 2",
		"UPDATE orders SET id = 9001 WHERE id = 3",
	} {
		f.mustRefuse(t, "orders-w", sql, pilot.RefusedCheck, "foreign key", "a foreign key added since the Pilot read its catalog cascades")
	}
	st := f.pilot.Stats()
	switch {
	case !counter && st.Templated-before.Templated != 3:
		t.Errorf("%d of the 3 refused writes ran through their remembered template, want all: the folded statement carries the guard too", st.Templated-before.Templated)
	case counter && (st.Literal-before.Literal != 1 || st.Templated-before.Templated != 2):
		// The delete remembered before the migration finds the counter
		// moved and takes the literal path, which asks; its template
		// learns "yes", and the second delete's folded write asks the
		// question itself, as does the update (a shape first seen after
		// the migration, which learns "yes" first).
		t.Errorf("%d of the 3 refused writes took the literal path and %d their template, want 1 and 2", st.Literal-before.Literal, st.Templated-before.Templated)
	}
	// The literal path (a rehearsal takes it) carries it as well.
	reh, err := f.pilot.Rehearse(t.Context(), "DELETE FROM orders WHERE id = 1", f.bounds["orders-w"], f.auth("orders-w"), "agent:demo", marque.PathCompiled)
	if err != nil {
		t.Fatal(err)
	}
	if reh.Outcome != pilot.Refused || reh.Code != pilot.RefusedCheck || reh.Reasons[0] != pilot.MessageCascade {
		t.Errorf("a rehearsal of the delete: %s %s %v, want it refused for the foreign key", reh.Outcome, reh.Code, reh.Reasons)
	}
	if n := f.count(t, "SELECT count(*) FROM order_notes"); n != 3 {
		t.Errorf("order_notes holds %d rows, want 3: a cascade the Pilot did not know of ran", n)
	}
	// A write the new key does not answer still runs: a column it does
	// not reference.
	res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-w", "UPDATE orders SET status = 'failed' WHERE id = 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Errorf("an update of status: %s %v %d, want it executed", res.Outcome, res.Reasons, res.RowsAffected)
	}
}

// TestCascadeOnAPartitionAddedAfterTheCatalog: the run-time question also
// covers the tables under the target. A partition that gains a foreign key
// of its own with ON DELETE CASCADE after the Pilot read its catalog makes
// an UPDATE that moves a row out of it a delete there, with the cascade;
// the same statement ran before the key was added. Found in review 6.
func TestCascadeOnAPartitionAddedAfterTheCatalog(t *testing.T) {
	f := newFixture(t)
	f.withSchema(t, `
CREATE TABLE parts (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parts_eu PARTITION OF parts FOR VALUES IN ('EU');
CREATE TABLE parts_us PARTITION OF parts FOR VALUES IN ('US');
CREATE TABLE leaf_ref (id int PRIMARY KEY, pid int, preg text);
INSERT INTO parts VALUES (1, 'EU', 'a'), (2, 'EU', 'b');
INSERT INTO leaf_ref VALUES (1, 2, 'EU');`)
	f.addBound(t, "parts", []byte(`sentence: move parts
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.parts
    columns: [id, region, v]
    max_rows: 10
  - op: update
    table: public.parts
    columns: [region, v]
    max_rows: 1
`))
	res, err := f.pilot.Execute(t.Context(), f.request(t, "parts", "UPDATE parts SET region = 'US' WHERE id = 1"))
	if err != nil || res.Outcome != pilot.Executed {
		t.Fatalf("before the key: %+v %v, want it executed", res, err)
	}
	if _, err := f.pilotConn(t).Exec(t.Context(), `ALTER TABLE leaf_ref ADD FOREIGN KEY (pid, preg) REFERENCES parts_eu (id, region) ON DELETE CASCADE`); err != nil {
		t.Fatal(err)
	}
	f.mustRefuse(t, "parts", "UPDATE parts SET region = 'US' WHERE id = 2", pilot.RefusedCheck, "foreign key",
		"moving the row deletes it from a partition whose new foreign key cascades")
	if n := f.count(t, "SELECT count(*) FROM leaf_ref"); n != 1 {
		t.Errorf("the cascade from the partition deleted leaf_ref rows: %d of 1 left", n)
	}
	// Like the catalog's check, the question does not look at which
	// columns the update writes: any UPDATE of the partitioned table
	// refers while such a key exists (docs/security.md, Guards).
	f.mustRefuse(t, "parts", "UPDATE parts SET v = 'c' WHERE id = 2", pilot.RefusedCheck, "foreign key",
		"an update of a partitioned table with a partition whose foreign key cascades refers")
}

// TestCascadeQuestionSkippedWhileTheCatalogStandsStill: a remembered
// write passes the catalog generation at which its foreign key question
// was last answered "no" and does not ask it while the target's generation
// still reads that (cascade.go). A forged counter shows the question
// really is not asked; DDL moves the counter (temporary objects, views and
// grants do not); a disarmed trigger, one disabled and enabled again
// around a migration, one enabled only for origin, a replaced function and
// a dropped trigger each change the generation, and send the write down
// the literal path, which asks.
func TestCascadeQuestionSkippedWhileTheCatalogStandsStill(t *testing.T) {
	pilot.SetGenerationTTL(t, time.Hour) // what was learned first stays
	f := newFixture(t)
	f.addBound(t, "orders-d", []byte(`sentence: delete orders
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, status]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [status]
    max_rows: 5
  - op: delete
    table: public.orders
    max_rows: 5
`))
	conn := f.pilotConn(t)
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	counter := func() int64 { t.Helper(); return f.count(t, "SELECT n FROM harbormaster.catalog_generation") }
	run := func(sql string) *pilot.Result { t.Helper(); return f.execute(t, "orders-d", sql) }
	arm := func() { t.Helper(); exec(pilot.InitSQL + pilot.GenerationTriggerSQL) }
	arm() // target init --catalog-generation
	before := f.pilot.Stats()
	for range 2 {
		if res := run("DELETE FROM orders WHERE id = 100000"); res.Outcome != pilot.Executed {
			t.Fatalf("before any key: %s %v", res.Outcome, res.Reasons)
		}
	}
	if st := f.pilot.Stats(); st.Templated == before.Templated {
		t.Fatal("no write ran through its template")
	}
	learned := counter()

	// Temporary objects, views and grants leave the counter; other DDL
	// moves it.
	exec("CREATE TEMP TABLE scratch (id int)")
	exec("CREATE VIEW order_ids AS SELECT id FROM orders")
	exec("GRANT SELECT ON order_ids TO PUBLIC")
	if n := counter(); n != learned {
		t.Fatalf("a temporary table, a view or a grant moved the counter from %d to %d", learned, n)
	}
	exec("CREATE INDEX orders_status_probe ON orders (status)")
	if n := counter(); n == learned {
		t.Fatal("CREATE INDEX left the counter")
	}
	exec(`CREATE TABLE order_notes (id int PRIMARY KEY, order_id bigint REFERENCES orders (id) ON DELETE CASCADE);
INSERT INTO order_notes VALUES (1, 1), (2, 2), (3, 3)`)
	moved := counter()

	// Forged back to what the delete's template learned first (no write of
	// it has reached a row since), the counter lets the write go without
	// the question: the cascade runs. (Only the counter's owner can write
	// it; this is the test standing in for a move that did not happen.)
	exec(fmt.Sprintf("UPDATE harbormaster.catalog_generation SET n = %d", learned))
	if res := run("DELETE FROM orders WHERE id = 1"); res.Outcome != pilot.Executed {
		t.Fatalf("with the counter where it was learned: %s %v, want the question unasked", res.Outcome, res.Reasons)
	}
	if n := f.count(t, "SELECT count(*) FROM order_notes"); n != 2 {
		t.Fatalf("order_notes holds %d rows: the forged counter did not let the write go unasked", n)
	}

	// The counter as the DDL left it stops the remembered write, and the
	// literal path asks the question and refuses; the template learns
	// the answer ("yes"), and its next write asks the question itself.
	exec(fmt.Sprintf("UPDATE harbormaster.catalog_generation SET n = %d", moved))
	st := f.pilot.Stats()
	f.mustRefuse(t, "orders-d", "DELETE FROM orders WHERE id = 3", pilot.RefusedCheck, "foreign key", "the counter moved: the question is asked")
	if f.pilot.Stats().Literal != st.Literal+1 {
		t.Fatal("the write the counter stopped did not take the literal path")
	}
	st = f.pilot.Stats()
	f.mustRefuse(t, "orders-d", "DELETE FROM orders WHERE id = 3", pilot.RefusedCheck, "foreign key", "the question, asked by the folded write")
	if f.pilot.Stats().Templated != st.Templated+1 {
		t.Fatal("with the question's answer yes, the write did not ask it through its template")
	}
	if n := f.count(t, "SELECT count(*) FROM order_notes"); n != 2 {
		t.Fatalf("order_notes holds %d rows, want 2", n)
	}

	// What moves no counter still changes the generation: a remembered
	// write that learned it while the trigger was armed takes the literal
	// path after each. (The update's question, about keys on status, is
	// "no".)
	const touch = "UPDATE orders SET status = status WHERE id = 2"
	for _, change := range []string{
		"ALTER EVENT TRIGGER harbormaster_catalog_generation DISABLE",
		"ALTER EVENT TRIGGER harbormaster_catalog_generation DISABLE; ALTER EVENT TRIGGER harbormaster_catalog_generation ENABLE ALWAYS",
		"ALTER EVENT TRIGGER harbormaster_catalog_generation ENABLE",
		"CREATE OR REPLACE FUNCTION harbormaster.bump_catalog_generation() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$",
		"DROP EVENT TRIGGER harbormaster_catalog_generation",
	} {
		arm()
		st := f.pilot.Stats()
		if res := run(touch); res.Outcome != pilot.Executed || f.pilot.Stats().Templated != st.Templated+1 {
			t.Fatalf("armed: %s %v, %+v; want it run through its template", res.Outcome, res.Reasons, f.pilot.Stats())
		}
		exec(change)
		st = f.pilot.Stats()
		if res := run(touch); res.Outcome != pilot.Executed || f.pilot.Stats().Literal != st.Literal+1 {
			t.Fatalf("after %s: %s %v, %+v; want it run on the literal path", change, res.Outcome, res.Reasons, f.pilot.Stats())
		}
	}
}

// TestInitTargetArmed: target init arms the catalog generation only when
// asked, again as often as asked, and only as a superuser; a role that is
// not one is told so before anything is created.
func TestInitTargetArmed(t *testing.T) {
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	for i, arm := range []bool{false, true, true, false} {
		armed, err := pilot.InitTargetArmed(ctx, dsn, arm)
		if err != nil {
			t.Fatal(err)
		}
		// Once armed it stays armed: init without the flag leaves it.
		if want := arm || i == 3; armed != want {
			t.Errorf("init %d (arm %v): armed %v, want %v", i, arm, armed, want)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	role := "hm_plain_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+role+"; CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	if _, err := pilot.InitTargetArmed(ctx, u.String(), true); !errors.Is(err, pilot.ErrNotSuperuser) {
		t.Fatalf("armed by a role that is not a superuser: %v, want ErrNotSuperuser", err)
	}
}
