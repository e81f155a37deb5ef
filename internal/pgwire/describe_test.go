package pgwire_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// described is what a Describe of a prepared statement answered.
type described struct {
	params []uint32
	fields [][2]any // name, type OID; nil: NoData
	noData bool
	err    *pgproto3.ErrorResponse
}

// describeStatement sends Parse (unnamed), Describe S and Sync.
func describeStatement(t *testing.T, fe *pgproto3.Frontend, sql string) described {
	t.Helper()
	fe.Send(&pgproto3.Parse{Query: sql})
	fe.Send(&pgproto3.Describe{ObjectType: 'S'})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var d described
	for _, m := range receive(t, fe) {
		switch x := m.(type) {
		case *pgproto3.ParameterDescription:
			d.params = append([]uint32{}, x.ParameterOIDs...)
		case *pgproto3.RowDescription:
			d.fields = fieldsOf(x)
		case *pgproto3.NoData:
			d.noData = true
		case *pgproto3.ErrorResponse:
			d.err = x
		case nil:
			t.Fatalf("%s: the connection failed", sql)
		}
	}
	return d
}

func fieldsOf(rd *pgproto3.RowDescription) [][2]any {
	out := [][2]any{}
	for _, f := range rd.Fields {
		out = append(out, [2]any{string(f.Name), f.DataTypeOID})
	}
	return out
}

// execute binds the unnamed statement with params (text, or binary where
// a format says so), describes the portal and executes it: the portal's
// row description and the rows' text.
func execute(t *testing.T, fe *pgproto3.Frontend, params [][]byte, formats []int16) ([][2]any, [][]string, *pgproto3.ErrorResponse) {
	t.Helper()
	fe.Send(&pgproto3.Bind{Parameters: params, ParameterFormatCodes: formats})
	fe.Send(&pgproto3.Describe{ObjectType: 'P'})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var fields [][2]any
	var rows [][]string
	for _, m := range receive(t, fe) {
		switch x := m.(type) {
		case *pgproto3.RowDescription:
			fields = fieldsOf(x)
		case *pgproto3.DataRow:
			var r []string
			for _, v := range x.Values {
				r = append(r, string(v))
			}
			rows = append(rows, r)
		case *pgproto3.ErrorResponse:
			return fields, rows, x
		}
	}
	return fields, rows, nil
}

// TestDescribeStatement: a Describe of a prepared statement on the
// statement path answers its parameters' and columns' types without
// running it, the very description Execute then sends; NoData for a
// write without RETURNING; an error, never NoData, for a read no
// delegation covers, and nothing recorded for it.
func TestDescribeStatement(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fe := f.hijack(t).Frontend
	ctx := t.Context()

	type tc struct {
		sql    string
		params []uint32
		fields [][2]any // nil: NoData
	}
	for _, c := range []tc{
		{"SELECT id, status, created_at FROM orders WHERE customer_id = $1 AND id < $2 ORDER BY id",
			[]uint32{20, 20}, [][2]any{{"id", uint32(20)}, {"status", uint32(25)}, {"created_at", uint32(1184)}}},
		// A declared or cast type is the client's.
		{"SELECT id FROM orders WHERE id = $1::int4", []uint32{23}, [][2]any{{"id", uint32(20)}}},
		{"SELECT count(*) AS n, max(status) FROM orders WHERE customer_id = $1", []uint32{20},
			[][2]any{{"n", uint32(20)}, {"max", uint32(25)}}},
		// A write inside the bound: its parameters' types, no rows.
		{"UPDATE orders SET status = $1, updated_at = now() WHERE id = $2", []uint32{25, 20}, nil},
		// Covered only on the surveyed path (a residual clause): described too.
		{"UPDATE customers SET name = $1 WHERE id = $2", []uint32{25, 20}, nil},
		// A write no delegation covers returns no rows either: NoData, and
		// its Execute is referred as any statement's.
		{"UPDATE customers SET email = $1 WHERE id = $2", []uint32{0, 0}, nil},
		{"INSERT INTO kinds (id, txt, doc) VALUES ($1, $2, $3) RETURNING id, txt, doc", []uint32{20, 25, 3802},
			[][2]any{{"id", uint32(20)}, {"txt", uint32(25)}, {"doc", uint32(3802)}}},
		// An enum and its array are text, as their values are sent.
		{"SELECT id, m, ms FROM moods WHERE m = $1", []uint32{25},
			[][2]any{{"id", uint32(20)}, {"m", uint32(25)}, {"ms", uint32(25)}}},
		// Answered at the front once bound: described there.
		{"SELECT $1::int4 AS n", []uint32{23}, [][2]any{{"n", uint32(23)}}},
		// No parameter at all: the statement path's description still.
		{"SELECT id, status FROM orders WHERE id = 5", []uint32{}, [][2]any{{"id", uint32(20)}, {"status", uint32(25)}}},
	} {
		d := describeStatement(t, fe, c.sql)
		if d.err != nil {
			t.Errorf("%s: %s %s (%s)", c.sql, d.err.Code, d.err.Message, d.err.Detail)
			continue
		}
		if !reflect.DeepEqual(d.params, c.params) {
			t.Errorf("%s: parameters %v, want %v", c.sql, d.params, c.params)
		}
		if c.fields == nil {
			if !d.noData || d.fields != nil {
				t.Errorf("%s: rows %v, want NoData", c.sql, d.fields)
			}
		} else if !reflect.DeepEqual(d.fields, c.fields) {
			t.Errorf("%s: columns %v, want %v", c.sql, d.fields, c.fields)
		}
	}

	// Executed, the statement sends the columns it was described with,
	// and a binary parameter is read with the type it was described with.
	sql := "SELECT id, status, created_at FROM orders WHERE customer_id = $1 AND id < $2 ORDER BY id"
	d := describeStatement(t, fe, sql)
	int8b := binary.BigEndian.AppendUint64(nil, 40)
	got, rows, perr := execute(t, fe, [][]byte{[]byte("3"), int8b}, []int16{0, 1})
	if perr != nil {
		t.Fatalf("execute: %s %s", perr.Code, perr.Message)
	}
	if !reflect.DeepEqual(got, d.fields) || len(rows) != 1 || rows[0][0] != "26" || rows[0][1] != "pending" {
		t.Fatalf("executed: columns %v rows %v; described %v", got, rows, d.fields)
	}
	d = describeStatement(t, fe, "SELECT id, m, ms FROM moods WHERE m = $1")
	got, rows, perr = execute(t, fe, [][]byte{[]byte("calm")}, nil)
	if perr != nil || !reflect.DeepEqual(got, d.fields) || !reflect.DeepEqual(rows, [][]string{{"1", "calm", "{calm,cross}"}}) {
		t.Fatalf("enum executed: %v columns %v rows %v; described %v", perr, got, rows, d.fields)
	}

	// Outside the bound: an error that says why and what to do; nothing
	// recorded, nothing queued. (Drain first: the reads above have their
	// execution entries written after their answers.)
	f.sys.Gateway.Drain()
	seq, _, err := f.sys.Logbook.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting, _, err := f.sys.Gateway.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"SELECT code FROM secrets WHERE id = $1", "SELECT id, total_cents FROM orders WHERE id = $1",
		"SELECT id FROM no_such_table WHERE id = $1", "UPDATE customers SET email = $1 WHERE id = $2 RETURNING id"} {
		d := describeStatement(t, fe, sql)
		if d.err == nil || d.noData || d.params != nil || d.fields != nil {
			t.Errorf("%s: %+v, want an error alone", sql, d)
			continue
		}
		if d.err.Code != pgwire.StateNotDescribed || !strings.Contains(d.err.Message, "would be referred") ||
			!strings.Contains(d.err.Hint, "simple query protocol") {
			t.Errorf("%s: %s %q detail %q hint %q", sql, d.err.Code, d.err.Message, d.err.Detail, d.err.Hint)
		}
	}
	// A catalog query is described by the shadow catalog of the bound:
	// its parameter typed as PostgreSQL infers it there (name), its oid
	// column.
	if d := describeStatement(t, fe, "SELECT oid FROM pg_class WHERE relname = $1"); d.err != nil || d.noData ||
		fmt.Sprint(d.params) != "[19]" || fmt.Sprint(d.fields) != "[[oid 26]]" {
		t.Errorf("a catalog query: %+v, want the shadow's description (name parameter, oid column)", d)
	}
	// No human could approve it: refused as a submission would be.
	if d := describeStatement(t, fe, "SELECT id FROM orders WHERE id = $1 FOR UPDATE"); d.err == nil || d.err.Code != "0A000" {
		t.Errorf("FOR UPDATE: %+v, want 0A000", d)
	}
	seq2, _, err := f.sys.Logbook.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting2, _, err := f.sys.Gateway.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq2 != seq || waiting2 != waiting {
		t.Fatalf("Describe recorded or queued: logbook %d -> %d, waiting %d -> %d", seq, seq2, waiting, waiting2)
	}

	// The write no delegation covers, executed after its NoData: referred.
	fe.Send(&pgproto3.Parse{Query: "UPDATE customers SET email = $1 WHERE id = $2"})
	if _, _, perr := execute(t, fe, [][]byte{[]byte("x@example.org"), []byte("3")}, nil); perr == nil || perr.Code != pgwire.StateReferred {
		t.Fatalf("the write outside the bound: %v, want referred", perr)
	}
}

// TestDescribePgx: pgx's modes that describe the statement
// (QueryExecModeCacheStatement, the default, and DescribeExec) read a
// parameterized statement's rows by its description.
func TestDescribePgx(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for i, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		var id int64
		var status string
		if err := c.QueryRow(ctx, "SELECT id, status FROM orders WHERE id = $1", mode, 5).Scan(&id, &status); err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		if id != 5 || status != "pending" {
			t.Fatalf("%v: %d %q", mode, id, status)
		}
		var m string
		var i4 int32
		if err := c.QueryRow(ctx, "SELECT m FROM moods WHERE m = $1", mode, "calm").Scan(&m); err != nil || m != "calm" {
			t.Fatalf("%v: enum %q %v", mode, m, err)
		}
		// pgx sends an int8 parameter in binary, by the described type.
		if err := c.QueryRow(ctx, "SELECT i4 FROM kinds WHERE id = $1", mode, int64(1)).Scan(&i4); err != nil || i4 != 70000 {
			t.Fatalf("%v: %d %v", mode, i4, err)
		}
		tag, err := c.Exec(ctx, "UPDATE orders SET status = $1, updated_at = now() WHERE id = $2", mode, "retrying", 8+i)
		if err != nil || tag.String() != "UPDATE 1" {
			t.Fatalf("%v: write %q %v", mode, tag, err)
		}
		_, err = c.Exec(ctx, "SELECT code FROM secrets WHERE id = $1", mode, 1)
		if pe := pgErr(t, err, pgwire.StateNotDescribed); !strings.Contains(pe.Message, "cannot be described") {
			t.Fatalf("%v: outside the bound: %q", mode, pe.Message)
		}
	}
	sd, err := c.PgConn().Prepare(ctx, "p", "SELECT id, created_at FROM orders WHERE status = $1 AND id > $2", nil)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, fd := range sd.Fields {
		fields = append(fields, fmt.Sprintf("%s:%d", fd.Name, fd.DataTypeOID))
	}
	if !reflect.DeepEqual(sd.ParamOIDs, []uint32{25, 20}) || strings.Join(fields, ",") != "id:20,created_at:1184" {
		t.Fatalf("Prepare: parameters %v, columns %v", sd.ParamOIDs, fields)
	}
	// Exec mode describes the portal only: the read outside the bound is
	// decided, and referred.
	_, err = c.Exec(ctx, "SELECT code FROM secrets WHERE id = $1", pgx.QueryExecModeExec, 1)
	pgErr(t, err, pgwire.StateReferred)
}

// TestDescribeSameOutsideBound: two targets that differ only outside the
// agent's bound (a column no rule lists, a table and a type no rule
// names) answer every Describe alike, byte for byte (DESIGN.md invariant
// 10): a refusal carries no reason of the static check, which names
// what it finds in the target's catalog. (Left out: SELECT * of a table
// that has a column outside the bound on one target only, which the
// static check itself decides differently, for a submission as for a
// Describe.)
func TestDescribeSameOutsideBound(t *testing.T) {
	t.Parallel()
	a, b := newFixture(t), newFixture(t)
	conn, err := pgx.Connect(t.Context(), b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(t.Context(), `ALTER TABLE public.orders ADD COLUMN note text;
		ALTER TABLE public.customers ADD COLUMN status text;
		ALTER TABLE public.secrets ADD COLUMN extra integer;
		CREATE TABLE public.hidden (id bigint PRIMARY KEY, code text);
		CREATE TYPE public.mood2 AS ENUM ('x');
		ALTER TABLE public.moods ADD COLUMN m2 public.mood2;`, pgx.QueryExecModeSimpleProtocol)
	conn.Close(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.sys.Pilot.RefreshCatalog(t.Context()); err != nil {
		t.Fatal(err)
	}
	fa, fb := a.hijack(t).Frontend, b.hijack(t).Frontend
	for _, sql := range []string{
		"SELECT * FROM orders WHERE id = $1",
		"SELECT o.* FROM orders o WHERE o.id = $1",
		"SELECT id, status FROM orders WHERE id = $1",
		"SELECT o.id, status FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = $1",
		"SELECT code FROM secrets WHERE id = $1",
		"SELECT * FROM secrets WHERE id = $1",
		"SELECT id FROM hidden WHERE id = $1",
		"SELECT id, note FROM orders WHERE id = $1",
		"SELECT id, m FROM moods WHERE m = $1",
		"UPDATE orders SET status = $1 WHERE id = $2 RETURNING *",
		"UPDATE hidden SET code = $1 WHERE id = $2",
	} {
		da, db := describeStatement(t, fa, sql), describeStatement(t, fb, sql)
		if !reflect.DeepEqual(da, db) {
			t.Errorf("%s:\n one target   %+v %+v\n the other   %+v %+v", sql, da, da.err, db, db.err)
		}
	}
}

// TestDescribeUnreachable: with its Pilot out of reach, a read is not
// described (HM004, saying so) and a write without RETURNING is NoData,
// its Execute decided as any statement's.
func TestDescribeUnreachable(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(o *gatewaytest.Options) { o.RemotePilot = true })
	fe := f.hijack(t).Frontend
	if d := describeStatement(t, fe, "SELECT id, status FROM orders WHERE id = $1"); d.err != nil || len(d.fields) != 2 {
		t.Fatalf("reachable: %+v %v", d, d.err)
	}
	f.sys.Relay.Close()
	d := describeStatement(t, fe, "SELECT id, status FROM orders WHERE customer_id = $1")
	// Not reached, or (the relay cut a connection the client held) the
	// call failed on its way: either way, not described.
	if d.err == nil || d.err.Code != pgwire.StateNotDescribed || !strings.Contains(d.err.Message, "could not be") || d.noData || d.fields != nil {
		t.Fatalf("unreachable, a read: %+v %+v", d, d.err)
	}
	d = describeStatement(t, fe, "UPDATE orders SET status = $1 WHERE id = $2")
	if d.err != nil || !d.noData || !reflect.DeepEqual(d.params, []uint32{0, 0}) {
		t.Fatalf("unreachable, a write: %+v %v", d, d.err)
	}
}
