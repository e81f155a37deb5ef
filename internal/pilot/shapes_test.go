package pilot_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// marqueID is the id of the marque a fixture request carries.
func (f *fixture) marqueID(t *testing.T, req pilot.Request) string {
	t.Helper()
	c, err := f.pilotVerifier.Verify(req.Marque, marque.Expect{Target: "shop", StatementHash: marque.StatementHash(req.SQL)})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func (f *fixture) receiptRows(t *testing.T, id string) (bool, int64) {
	t.Helper()
	found, n, err := f.pilot.Receipt(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return found, n
}

// TestTemplatedWrites: compiled writes with a new literal each time run
// through one template in one round trip, bind exactly their own
// constants, and leave a receipt with their count.
func TestTemplatedWrites(t *testing.T) {
	f := newFixture(t)
	before := f.pilot.Stats()
	for id := 11; id <= 15; id++ {
		req := f.request(t, "unstick-orders.yaml", fmt.Sprintf("UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = %d", id))
		res, err := f.pilot.Execute(t.Context(), req)
		if err != nil || res.Outcome != pilot.Executed || res.RowsAffected != 1 {
			t.Fatalf("id %d: %+v %v", id, res, err)
		}
		if want := []any{"retrying", fmt.Sprint(id)}; !reflect.DeepEqual(res.ExecutedArgs, want) {
			t.Fatalf("id %d: bound %v, want %v", id, res.ExecutedArgs, want)
		}
		if !strings.Contains(res.ExecutedSQL, "$2::int") || strings.Contains(res.ExecutedSQL, fmt.Sprintf("= %d", id)) {
			t.Fatalf("id %d: ran %s", id, res.ExecutedSQL)
		}
		if found, n := f.receiptRows(t, f.marqueID(t, req)); !found || n != 1 {
			t.Fatalf("id %d: receipt %v %d", id, found, n)
		}
	}
	after := f.pilot.Stats()
	if after.Templated-before.Templated != 5 || after.Literal != before.Literal {
		t.Fatalf("stats %+v -> %+v: every write should have run through its template", before, after)
	}
}

// TestTemplatedRefusals: a guard, the check and max_rows raise inside the
// one statement; everything rolls back and no receipt is left.
func TestTemplatedRefusals(t *testing.T) {
	f := newFixture(t)
	before, receipts := f.snapshot(t, "orders"), f.receipts(t)
	stats := f.pilot.Stats()
	for _, c := range []struct{ sql, code, detail string }{
		{"UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40", pilot.RefusedMaxRows, "it affects more than 20 rows; max_rows is 20"},
		{"UPDATE orders SET status = 'retrying' WHERE id BETWEEN 12 AND 39", pilot.RefusedMaxRows, "it affects more than 20 rows; max_rows is 20"},
		{"UPDATE orders SET status = 'failed' WHERE id = 45", pilot.RefusedFence, "SQLSTATE HM001"},
		{"UPDATE orders SET status = 'shipped' WHERE id = 5", pilot.RefusedCheckRow, "SQLSTATE HM001"},
		{"UPDATE orders SET status = 'failed' WHERE id = 46 OR id = 6", pilot.RefusedFence, "SQLSTATE HM001"},
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", c.sql))
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if res.Outcome != pilot.Refused || res.Code != c.code || !strings.Contains(res.Detail, c.detail) {
			t.Fatalf("%s: %s %s %q", c.sql, res.Outcome, res.Code, res.Detail)
		}
	}
	if f.snapshot(t, "orders") != before || f.receipts(t) != receipts {
		t.Fatal("a refused statement changed the table or left a receipt")
	}
	if got := f.pilot.Stats(); got.Templated-stats.Templated != 5 {
		t.Fatalf("stats %+v -> %+v", stats, got)
	}
}

// TestTemplateUniqueViolationIsNotAReplay: the agent's own duplicate key
// is the target's refusal; only the receipts' key means a replay.
func TestTemplateUniqueViolationIsNotAReplay(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "insert-orders.yaml", []byte(`sentence: Record new orders.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: insert
    table: public.orders
    columns: [id, customer_id, status, total_cents, created_at]
    max_rows: 1
`))
	ins := func(id int) *pilot.Result {
		t.Helper()
		res, err := f.pilot.Execute(t.Context(), f.request(t, "insert-orders.yaml",
			fmt.Sprintf("INSERT INTO orders (id, customer_id, status, total_cents, created_at) VALUES (%d, 1, 'pending', 100, now())", id)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := ins(90001); res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("first insert: %+v", res)
	}
	if res := ins(90001); res.Outcome != pilot.Refused || res.Code != pilot.RefusedDatabase || !strings.Contains(res.Detail, "orders_pkey") {
		t.Fatalf("duplicate id: %s %s %s", res.Outcome, res.Code, res.Detail)
	}
	if f.pilot.Stats().Literal != 0 {
		t.Fatalf("stats %+v", f.pilot.Stats())
	}
}

// TestTemplatedReadsMatchTheLiteralStatement: a read through its template
// returns exactly what the canonical statement returns run as literal
// text: the same columns, names and values.
func TestTemplatedReadsMatchTheLiteralStatement(t *testing.T) {
	f := newFixture(t)
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"SELECT id, status FROM orders WHERE status = 'pending' AND created_at < now() - interval '1 day' AND id > 3 ORDER BY id LIMIT 5",
		"SELECT id FROM orders WHERE id IN (1, 2, 3) ORDER BY 1",
		"SELECT id, customer_id * 2.5 AS x FROM orders WHERE customer_id > 1 ORDER BY id LIMIT 3",
		"SELECT status, count(*) FROM orders WHERE id < 50 GROUP BY status ORDER BY 1",
		"SELECT id, 'x' AS tag, 5 AS n, 7, true AS b, 3000000000 AS big, -2 AS neg FROM orders WHERE id = 3",
		"SELECT coalesce(status, 'none') || '!' FROM orders WHERE id = -(-3)",
		"SELECT id FROM orders WHERE created_at > now() - interval '30' day AND id < 0x10 ORDER BY id",
		"SELECT id FROM orders WHERE status LIKE 'pend%' AND id BETWEEN 1 AND 9 ORDER BY id OFFSET 1",
	} {
		req := f.request(t, "unstick-orders.yaml", sql)
		before := f.pilot.Stats()
		res, err := f.pilot.Execute(t.Context(), req)
		if err != nil || res.Outcome != pilot.Executed {
			t.Fatalf("%s: %+v %v", sql, res, err)
		}
		if got := f.pilot.Stats(); got.Templated != before.Templated+1 {
			t.Fatalf("%s: not through its template (%+v)", sql, got)
		}
		rows, err := conn.Query(t.Context(), req.SQL)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for _, fd := range rows.FieldDescriptions() {
			cols = append(cols, fd.Name)
		}
		var want []string
		for rows.Next() {
			vals, _ := rows.Values()
			want = append(want, fmt.Sprint(vals))
		}
		rows.Close()
		var got []string
		for _, r := range res.Rows {
			vals := make([]any, len(res.Columns))
			for i := range res.Columns {
				vals[i] = r[i]
			}
			got = append(got, fmt.Sprint(vals))
		}
		if !reflect.DeepEqual(cols, pilot.ColumnNames(res.Columns)) {
			t.Fatalf("%s: columns %v, literal %v", sql, res.Columns, cols)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") && !strings.Contains(sql, "2.5") {
			t.Fatalf("%s: rows\n%s\nliteral\n%s", sql, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, literal %d", sql, len(got), len(want))
		}
	}
}

// TestTemplateTheTargetRefusesTakesTheLiteralPath: a shape whose template
// the target will not prepare (the HAVING repeats a GROUP BY expression
// whose constant becomes another parameter) runs as literal text, now and
// from then on.
func TestTemplateTheTargetRefusesTakesTheLiteralPath(t *testing.T) {
	f := newFixture(t)
	for i, sql := range []string{
		"SELECT count(*) FROM orders GROUP BY customer_id + 1 HAVING customer_id + 1 > 2",
		"SELECT count(*) FROM orders GROUP BY customer_id + 2 HAVING customer_id + 2 > 3",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", sql))
		if err != nil || res.Outcome != pilot.Executed {
			t.Fatalf("%s: %+v %v", sql, res, err)
		}
		if st := f.pilot.Stats(); st.Literal != int64(i+1) || st.Templated != 0 {
			t.Fatalf("%s: stats %+v", sql, st)
		}
	}
}

// TestVoidReceipt: reconciliation's rule. A marque that never ran is
// burned and can then never run; one that committed is found; one whose
// transaction still holds the key is waited for.
func TestVoidReceipt(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	const sql = "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = %d"

	never := f.request(t, "unstick-orders.yaml", fmt.Sprintf(sql, 21))
	executed, _, err := f.pilot.VoidReceipt(ctx, f.marqueID(t, never), "req_never", "agent:demo")
	if err != nil || executed {
		t.Fatalf("never ran: %v %v", executed, err)
	}
	res, err := f.pilot.Execute(ctx, never)
	if err != nil || res.Code != pilot.RefusedReplay {
		t.Fatalf("a voided marque ran: %+v %v", res, err)
	}
	if found, _ := f.receiptRows(t, f.marqueID(t, never)); found {
		t.Fatal("a void receipt reads as executed")
	}
	again, _, err := f.pilot.VoidReceipt(ctx, f.marqueID(t, never), "req_never", "agent:demo")
	if err != nil || again {
		t.Fatalf("voided twice: %v %v", again, err)
	}

	ran := f.request(t, "unstick-orders.yaml", fmt.Sprintf(sql, 22))
	if res, err := f.pilot.Execute(ctx, ran); err != nil || res.Outcome != pilot.Executed {
		t.Fatalf("%+v %v", res, err)
	}
	executed, rows, err := f.pilot.VoidReceipt(ctx, f.marqueID(t, ran), "req_ran", "agent:demo")
	if err != nil || !executed || rows != 1 {
		t.Fatalf("committed: %v %d %v", executed, rows, err)
	}

	// A transaction still holding the key: the void waits for its end.
	for _, commit := range []bool{true, false} {
		id := fmt.Sprintf("mq_inflight_%v", commit)
		tx, err := f.pilotConn(t).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path, rows_affected)
			VALUES ($1, 'req', 'agent:demo', 'shop', '', 'compiled', 3)`, id); err != nil {
			t.Fatal(err)
		}
		type answer struct {
			executed bool
			rows     int64
			err      error
		}
		done := make(chan answer, 1)
		go func() {
			e, n, err := f.pilot.VoidReceipt(ctx, id, "req", "agent:demo")
			done <- answer{e, n, err}
		}()
		select {
		case a := <-done:
			t.Fatalf("the void did not wait for the open transaction: %+v", a)
		case <-time.After(300 * time.Millisecond):
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil || a.executed != commit || commit && a.rows != 3 {
			t.Fatalf("commit=%v: %+v", commit, a)
		}
	}
}

func (f *fixture) pilotConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestRememberedTemplateEqualsFresh: over random statements with new
// literals, what a warm Pilot runs (a template it built for an earlier
// statement of the shape, with this statement's constants bound) is
// exactly what a fresh Pilot builds from this statement's own parse: the
// same text, the same values.
func TestRememberedTemplateEqualsFresh(t *testing.T) {
	f := newFixture(t)
	rng := newRand(t)
	shapes := []func() string{
		func() string {
			return fmt.Sprintf("SELECT id, status FROM orders WHERE id = %d AND status <> '%s'", rng.IntN(300), []string{"x", "it''s", `a\b`, ""}[rng.IntN(4)])
		},
		func() string {
			return fmt.Sprintf("SELECT id FROM orders WHERE customer_id IN (%d, %d) AND created_at < now() - interval '%d days' ORDER BY id LIMIT %d", rng.IntN(30), rng.IntN(30), rng.IntN(9), 1+rng.IntN(50))
		},
		func() string {
			return fmt.Sprintf("UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = %d AND id < %d", 1+rng.IntN(60), 100+rng.IntN(1<<30))
		},
		func() string {
			return fmt.Sprintf("UPDATE orders SET status = '%s' WHERE id = %d RETURNING id, status", []string{"retrying", "failed"}[rng.IntN(2)], 1+rng.IntN(60))
		},
	}
	canon := f.bounds["unstick-orders.yaml"]
	ran := 0
	for i := 0; i < 40; i++ {
		req := f.request(t, "unstick-orders.yaml", shapes[i%len(shapes)]())
		res, err := f.pilot.Execute(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn, MaxConns: 1}, f.pilotVerifier, f.signers)
		if err != nil {
			t.Fatal(err)
		}
		text, args, ok := fresh.TemplateOf(req.SQL, canon)
		fresh.Close()
		if !ok {
			t.Fatalf("%s: no template from a fresh parse", req.SQL)
		}
		if res.Outcome != pilot.Executed {
			continue
		}
		ran++
		if res.ExecutedSQL != text || !reflect.DeepEqual(res.ExecutedArgs, args) {
			t.Fatalf("%s:\nran   %s %v\nfresh %s %v", req.SQL, res.ExecutedSQL, res.ExecutedArgs, text, args)
		}
	}
	if ran < 20 || f.pilot.Stats().Literal != 0 {
		t.Fatalf("%d executed, stats %+v", ran, f.pilot.Stats())
	}
}

func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 10))
}

// TestTemplatesUnderARole: with a least-privilege role configured, a read
// runs through its template as that role (a table the role may not read
// is the target's refusal), and a write takes the literal path (its
// receipt is not the role's to write) under the same role.
func TestTemplatesUnderARole(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	admin := f.pilotConn(t)
	if _, err := admin.Exec(ctx, `CREATE ROLE hm_agent NOLOGIN;
		GRANT USAGE ON SCHEMA public TO hm_agent;
		GRANT SELECT, UPDATE ON public.orders TO hm_agent;
		GRANT USAGE ON SCHEMA harbormaster TO hm_agent;
		GRANT SELECT ON ALL TABLES IN SCHEMA harbormaster TO hm_agent`, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(ctx, pilot.Config{Target: "shop", DSN: f.dsn, Role: "hm_agent"}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	run := func(example, sql string) *pilot.Result {
		t.Helper()
		res, err := p.Execute(ctx, f.request(t, example, sql))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("unstick-orders.yaml", "SELECT id, status FROM orders WHERE id = 3"); res.Outcome != pilot.Executed || len(res.Rows) != 1 {
		t.Fatalf("read as the role: %+v", res)
	}
	if st := p.Stats(); st.Templated != 1 || st.Literal != 0 {
		t.Fatalf("the read did not run through its template: %+v", st)
	}
	// customers: the role has no privilege on it.
	if res := run("fix-name-typos.yaml", "SELECT id, name FROM customers WHERE id = 1"); res.Code != pilot.RefusedDatabase || !strings.Contains(res.Detail, "permission denied") {
		t.Fatalf("a read the role may not make: %s %s", res.Code, res.Detail)
	}
	if res := run("unstick-orders.yaml", "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 24"); res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("write as the role: %+v", res)
	}
	if st := p.Stats(); st.Literal != 1 {
		t.Fatalf("a write under a role took the template: %+v", st)
	}
}

// TestTemplateAfterASchemaChange: a column's type changes under a
// prepared template; the statement that meets the stale plan takes the
// literal path (nothing ran twice), and the next one prepares it again.
func TestTemplateAfterASchemaChange(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	const read = "SELECT id, customer_id FROM orders WHERE id = %d"
	for id := 1; id <= 2; id++ {
		if res, err := f.pilot.Execute(ctx, f.request(t, "unstick-orders.yaml", fmt.Sprintf(read, id))); err != nil || res.Outcome != pilot.Executed {
			t.Fatalf("%+v %v", res, err)
		}
	}
	if _, err := f.pilotConn(t).Exec(ctx, "ALTER TABLE orders ALTER COLUMN customer_id TYPE integer"); err != nil {
		t.Fatal(err)
	}
	before := f.pilot.Stats()
	for id := 3; id <= 6; id++ {
		res, err := f.pilot.Execute(ctx, f.request(t, "unstick-orders.yaml", fmt.Sprintf(read, id)))
		if err != nil || res.Outcome != pilot.Executed || len(res.Rows) != 1 {
			t.Fatalf("after the change: %+v %v", res, err)
		}
	}
	after := f.pilot.Stats()
	t.Logf("stats %+v -> %+v", before, after)
	if after.Templated-before.Templated < 2 || after.Literal-before.Literal != 1 {
		t.Fatalf("want the stale plan met once (literal path), then the template prepared again: %+v -> %+v", before, after)
	}
}

// TestTemplateMinInt4: -2147483648 is an int4 constant to
// PostgreSQL; the template bound it as bigint, so the template ran a
// statement the literal one is not (sqlcheck TestMinInt4IsAnInteger).
// The template and the literal statement now answer alike: both refuse.
// Found in review 4.
func TestTemplateMinInt4(t *testing.T) {
	f := newFixture(t)
	res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", "SELECT id, -2147483648 - 1 AS v FROM orders WHERE id = 1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedDatabase {
		t.Errorf("%s %s %v (ran %s %v), want the target's integer out of range, as for the literal statement", res.Outcome, res.Code, res.Rows, res.ExecutedSQL, res.ExecutedArgs)
	}
}

// TestGroupingSetPositions: a positional GROUP BY inside ROLLUP,
// CUBE, GROUPING SETS or an implicit row runs through the Pilot's
// template with the meaning of the checked text (found in review 1: as a
// parameter the position became a value, so GROUP BY CUBE (1) over
// count(*) ran and returned rows where the statement is an error).
func TestGroupingSetPositions(t *testing.T) {
	f := newFixture(t)
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"SELECT count(*) FROM orders GROUP BY CUBE (1)",
		"SELECT count(*) FROM orders GROUP BY GROUPING SETS ((1), ())",
		"SELECT count(*) FROM orders GROUP BY (1, 1)",
		"SELECT customer_id % 3 AS k, count(*) FROM orders GROUP BY ROLLUP (1) ORDER BY 1, 2",
		"SELECT customer_id % 4 AS k, count(*) FROM orders GROUP BY GROUPING SETS ((1), ()) ORDER BY 1, 2",
	} {
		// orders has no read fence in this bound: the literal statement on
		// the table is what the Pilot must run.
		var want []string
		rows, lerr := conn.Query(t.Context(), sql, pgx.QueryExecModeSimpleProtocol)
		if lerr == nil {
			for rows.Next() {
				v, _ := rows.Values()
				want = append(want, fmt.Sprint(v...))
			}
			rows.Close()
			lerr = rows.Err()
		}
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", sql))
		if err != nil {
			t.Fatal(err)
		}
		if lerr != nil {
			if res.Outcome != pilot.Refused || res.Code != pilot.RefusedDatabase {
				t.Errorf("%s: the statement is an error (%v), the Pilot answered %s %s with %d rows (%s %v)",
					sql, lerr, res.Outcome, res.Code, len(res.Rows), res.ExecutedSQL, res.ExecutedArgs)
			}
			continue
		}
		var got []string
		for _, r := range res.Rows {
			var vals []any
			for i := range res.Columns {
				vals = append(vals, r[i])
			}
			got = append(got, fmt.Sprint(vals...))
		}
		if res.Outcome != pilot.Executed || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the Pilot answered %s with\n%s\nthe statement gives\n%s", sql, res.Outcome, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestTemplatesAreTheBounds: a shape templated under one bound is never
// another bound's: under a bound that does not cover it, the same
// statement, and one of its shape with new literals, have no template
// and are refused, with the first bound's template remembered.
func TestTemplatesAreTheBounds(t *testing.T) {
	f := newFixture(t)
	const covered, other = "fix-name-typos.yaml", "unstick-orders.yaml"
	for _, sql := range []string{"SELECT id, name FROM customers WHERE id = 3", "SELECT id, name FROM customers WHERE id = 4"} {
		if _, _, ok := f.pilot.TemplateOf(sql, f.bounds[covered]); !ok {
			t.Fatalf("%s: no template under %s", sql, covered)
		}
		if text, _, ok := f.pilot.TemplateOf(sql, f.bounds[other]); ok {
			t.Fatalf("%s: %s's template under %s: %s", sql, covered, other, text)
		}
		res, err := f.pilot.Execute(t.Context(), f.request(t, other, sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck {
			t.Fatalf("%s under %s: %s %s %v", sql, other, res.Outcome, res.Code, res.Reasons)
		}
	}
}
