package pilot_test

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
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
	run := func(sql string) *pilot.Result {
		t.Helper()
		res, err := f.pilot.Execute(t.Context(), f.request(t, "keys", sql))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
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
