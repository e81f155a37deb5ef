package pilot_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// rowCapSchema is a table with a serial key, for the sequence a write
// draws from, and a table whose BEFORE ROW trigger draws from a sequence
// of its own for every row an UPDATE or DELETE writes: a rollback returns
// neither sequence's draws, so each counts what a refused statement did.
const rowCapSchema = `
CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);
CREATE SEQUENCE written;
CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL);
INSERT INTO items SELECT g, 0 FROM generate_series(1, 2000) g;
CREATE FUNCTION count_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('written');
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER count_written BEFORE UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION count_written();`

const rowCapBound = `sentence: add one note, bump or drop five items
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.notes
    columns: [id, body]
    max_rows: 100
  - op: insert
    table: public.notes
    columns: [body]
    max_rows: 1
  - op: select
    table: public.items
    columns: [id, n]
    max_rows: 5000
  - op: update
    table: public.items
    columns: [n]
    max_rows: 5
  - op: delete
    table: public.items
    max_rows: 5
`

// rowCapSurveyed is the same writes of items under residual clauses: the
// surveyed path, which runs the literal statement.
const rowCapSurveyed = `sentence: bump or drop five items, only obvious ones
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.items
    columns: [id, n]
    max_rows: 5000
  - op: update
    table: public.items
    columns: [n]
    fence: id > 0
    max_rows: 5
    residual: only obvious ones
  - op: delete
    table: public.items
    fence: id > 0
    max_rows: 5
    residual: only obvious ones
`

// TestRowCapStopsTheWrite: max_rows was compared with the row count after
// the statement completed, so a write past it ran to its end before it
// rolled back: an INSERT ... SELECT under max_rows: 1 drew a sequence
// value for every row of its source (367,223 in the report), an UPDATE
// under max_rows: 5 wrote every row it reached and fired their triggers.
// A write now raises as its (max_rows+1)-th row is written, on the
// compiled path (a template), the literal path, a rehearsal and the
// surveyed path alike: the statement draws at most max_rows+1 sequence
// values and writes at most max_rows+1 rows, and the agent sees the same
// refusal as before.
func TestRowCapStopsTheWrite(t *testing.T) {
	f := newFixture(t)
	f.withSchema(t, rowCapSchema)
	f.addBound(t, "capped", []byte(rowCapBound))
	f.addBound(t, "capped-surveyed", []byte(rowCapSurveyed))
	conn := f.pilotConn(t)
	seq := func(name string) int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRow(t.Context(), "SELECT nextval($1)", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	type run struct {
		name string
		exec func(req pilot.Request, bound string) (*pilot.Result, error)
	}
	runs := []run{
		{"execute", func(req pilot.Request, _ string) (*pilot.Result, error) { return f.pilot.Execute(t.Context(), req) }},
		{"literal", func(req pilot.Request, _ string) (*pilot.Result, error) {
			txn, err := f.pilot.BeginTxn(t.Context())
			if err != nil {
				return nil, err
			}
			defer txn.Close()
			return f.pilot.ExecuteIn(t.Context(), req, txn)
		}},
		{"rehearsal", func(req pilot.Request, bound string) (*pilot.Result, error) {
			path := marque.PathCompiled
			if bound == "capped-surveyed" {
				path = marque.PathSurveyed
			}
			return f.pilot.Rehearse(t.Context(), req.SQL, f.bounds[bound], f.auth(bound), "agent:demo", path)
		}},
	}
	cases := []struct {
		bound, sql, seq string
		max             int64
	}{
		{"capped", "INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, 100000)", "notes_id_seq", 1},
		{"capped", "INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, 100000) ON CONFLICT (id) DO NOTHING", "notes_id_seq", 1},
		{"capped", "INSERT INTO notes (body) VALUES ('a'), ('b'), ('c') RETURNING id", "notes_id_seq", 1},
		{"capped", "UPDATE items SET n = n + 1", "written", 5},
		{"capped", "UPDATE items SET n = n + 1 WHERE id > 10 RETURNING id, n", "written", 5},
		{"capped", "DELETE FROM items WHERE id > 10", "written", 5},
		{"capped-surveyed", "UPDATE items SET n = n + 1 WHERE id > 10", "written", 5},
		{"capped-surveyed", "DELETE FROM items WHERE id > 10 RETURNING id", "written", 5},
	}
	before, receipts := f.snapshot(t, "items"), f.receipts(t)
	for _, c := range cases {
		for _, r := range runs {
			req := f.request(t, c.bound, c.sql)
			drawn := seq(c.seq)
			res, err := r.exec(req, c.bound)
			if err != nil {
				t.Fatalf("%s (%s): %v", c.sql, r.name, err)
			}
			wrote := seq(c.seq) - drawn - 1
			if res.Outcome != pilot.Refused || res.Code != pilot.RefusedMaxRows || res.Reasons[0] != pilot.MessageMaxRows {
				t.Errorf("%s (%s): %s %s %v, want it refused for max_rows", c.sql, r.name, res.Outcome, res.Code, res.Reasons)
			}
			if wrote > c.max+1 {
				t.Errorf("%s (%s): it wrote %d rows (%s) before it rolled back, want at most max_rows+1 = %d", c.sql, r.name, wrote, c.seq, c.max+1)
			}
		}
	}
	if f.snapshot(t, "items") != before || f.receipts(t) != receipts || f.count(t, "SELECT count(*) FROM notes") != 0 {
		t.Error("a refused write changed a table or left a receipt")
	}
	// Up to the cap, the same writes run, and return what they return.
	res, err := f.pilot.Execute(t.Context(), f.request(t, "capped", "UPDATE items SET n = n + 1 WHERE id <= 5 RETURNING id, n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 5 || len(res.Rows) != 5 || len(res.Columns) != 2 {
		t.Errorf("five rows under max_rows 5: %s %v %d rows %v columns %v", res.Outcome, res.Reasons, res.RowsAffected, res.Rows, res.Columns)
	}
	res, err = f.pilot.Execute(t.Context(), f.request(t, "capped", "INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, 1)"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 1 || res.Columns != nil {
		t.Errorf("one row under max_rows 1: %s %v %d rows, columns %v", res.Outcome, res.Reasons, res.RowsAffected, res.Columns)
	}
}

// TestCapReturning: the row cap the approved path appends as text counts
// each statement's rows on its own inside one transaction, stops an
// INSERT ... ON CONFLICT DO UPDATE (which the compiled path refuses, and
// a human may approve) as it writes its (max_rows+1)-th row, and raises
// the SQLSTATE that the Pilot maps to max_rows_exceeded.
func TestCapReturning(t *testing.T) {
	f := newFixture(t)
	f.withSchema(t, rowCapSchema)
	conn := f.pilotConn(t)
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for i := 0; i < 3; i++ {
		tag, err := tx.Exec(ctx, "UPDATE items SET n = n + 1 WHERE id <= 3 RETURNING "+pilot.CapReturning(3))
		if err != nil || tag.RowsAffected() != 3 {
			t.Fatalf("statement %d of one transaction, 3 rows under a cap of 3: %v %v", i+1, tag, err)
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE items SET n = n + 1 WHERE id <= 4 RETURNING id, "+pilot.CapReturning(3)); !isRowCap(err) {
		t.Fatalf("4 rows under a cap of 3: %v, want SQLSTATE %s", err, pilot.MaxRowsSQLState)
	}
	_ = tx.Rollback(ctx)

	var drawn int64
	if err := conn.QueryRow(ctx, "SELECT nextval('notes_id_seq')").Scan(&drawn); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO notes (id, body) SELECT g, 'x' FROM generate_series(1, 50000) g
ON CONFLICT (id) DO UPDATE SET body = 'y' RETURNING `+pilot.CapReturning(2), pgx.QueryExecModeSimpleProtocol)
	if !isRowCap(err) {
		t.Fatalf("ON CONFLICT DO UPDATE over 50000 rows under a cap of 2: %v, want SQLSTATE %s", err, pilot.MaxRowsSQLState)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, 50000)
ON CONFLICT (id) DO UPDATE SET body = 'y' RETURNING `+pilot.CapReturning(2)); !isRowCap(err) {
		t.Fatalf("ON CONFLICT DO UPDATE drawing a serial under a cap of 2: %v, want SQLSTATE %s", err, pilot.MaxRowsSQLState)
	}
	var next int64
	if err := conn.QueryRow(ctx, "SELECT nextval('notes_id_seq')").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next-drawn-1 > 3 {
		t.Errorf("the capped insert drew %d values of notes_id_seq, want at most 3", next-drawn-1)
	}
}

// TestReturningIsCappedLikeARead: the rows a write returns are a
// read of the columns its RETURNING names (they need a select rule), so
// the select rule's max_rows caps them too. Found in review 1: under a
// select rule capped at 3 rows and an update rule capped at 10, a no-op
// UPDATE ... SET name = name ... RETURNING id, name handed the agent 8
// rows of names, untruncated, where SELECT id, name gets 3 and truncated.
// Past the smaller cap the write now rolls back (max_rows_exceeded).
func TestReturningIsCappedLikeARead(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "returning", []byte(`sentence: returning
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
    max_rows: 3
  - op: update
    table: public.customers
    columns: [name]
    fence: region = 'EU'
    max_rows: 10
`))
	read, err := f.pilot.Execute(t.Context(), f.request(t, "returning", "SELECT id, name FROM customers WHERE id < 9 ORDER BY id"))
	if err != nil || read.Outcome != pilot.Executed || len(read.Rows) != 3 || !read.Truncated {
		t.Fatalf("the read: %+v %v", read, err)
	}
	res, err := f.pilot.Execute(t.Context(), f.request(t, "returning", "UPDATE customers SET name = name WHERE id < 9 RETURNING id, name"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == pilot.Executed && len(res.Rows) > 3 {
		t.Fatalf("the write returned %d rows of names (truncated %v); the select rule caps a read at 3", len(res.Rows), res.Truncated)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedMaxRows {
		t.Fatalf("the write past the read's cap: %s %s, want refused %s", res.Outcome, res.Code, pilot.RefusedMaxRows)
	}
	// Within both caps it runs and returns its rows.
	res, err = f.pilot.Execute(t.Context(), f.request(t, "returning", "UPDATE customers SET name = name WHERE id < 4 RETURNING id, name"))
	if err != nil || res.Outcome != pilot.Executed || len(res.Rows) != 3 {
		t.Fatalf("the write within both caps: %+v %v", res, err)
	}
}

func isRowCap(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pilot.MaxRowsSQLState
}
