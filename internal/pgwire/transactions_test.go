package pgwire_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// kindsIDs are the ids of kinds rows from lo on, as the target has them.
func kindsIDs(t *testing.T, dsn string, lo int) []int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), "SELECT id FROM public.kinds WHERE id >= $1 ORDER BY id", lo)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func wantIDs(t *testing.T, dsn string, lo int, want ...int64) {
	t.Helper()
	got := kindsIDs(t, dsn, lo)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kinds ids from %d on the target: %v, want %v", lo, got, want)
	}
}

// requestsOf are the agent's requests whose statement contains text.
func requestsOf(t *testing.T, f *fixture, text string) []*gateway.RequestView {
	t.Helper()
	st := f.sys.Store
	rows, err := st.ReadDB().QueryContext(t.Context(), st.SQL(`SELECT id FROM requests WHERE principal = ? AND sql LIKE ? ORDER BY id`),
		gatewaytest.Agent, "%"+text+"%")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	var out []*gateway.RequestView
	for _, id := range ids {
		v, err := f.sys.Gateway.Request(t.Context(), id, gatewaytest.Agent)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func wantStatus(t *testing.T, f *fixture, text string, want gateway.Status) *gateway.RequestView {
	t.Helper()
	var vs []*gateway.RequestView
	for range 100 {
		if vs = requestsOf(t, f, text); len(vs) == 1 && vs[0].Status == want {
			return vs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(vs) != 1 {
		t.Fatalf("%d requests for %q, want 1", len(vs), text)
	}
	t.Fatalf("request for %q is %s (%v), want %s", text, vs[0].Status, vs[0].Reasons, want)
	return nil
}

func txStatus(c *pgx.Conn) byte { return c.PgConn().TxStatus() }

// TestTransactions: BEGIN ... COMMIT over the wire front runs its
// statements in one target transaction: nothing is seen outside before
// COMMIT, all of it after; ROLLBACK leaves nothing; a referral fails the
// transaction as any error does; savepoints undo what follows them; each
// statement's request says what became of it.
func TestTransactions(t *testing.T) {
	t.Parallel()
	t.Run("in process", func(t *testing.T) { testTransactions(t, newFixture(t)) })
	// The Pilot in a server of its own: it holds the transaction on its
	// side of the mutual-TLS connection (pilot/remote sessions.go).
	t.Run("remote Pilot", func(t *testing.T) {
		testTransactions(t, newFixtureWith(t, func(o *gatewaytest.Options) { o.RemotePilot = true }))
	})
}

func testTransactions(t *testing.T, f *fixture) {
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	insert := func(id int) error {
		_, err := c.Exec(ctx, "INSERT INTO kinds (id, txt) VALUES ($1, $2)", id, fmt.Sprintf("tx row %d", id))
		return err
	}

	t.Run("commit", func(t *testing.T) {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if txStatus(c) != 'T' {
			t.Fatalf("status %c after BEGIN, want T", txStatus(c))
		}
		for _, id := range []int{100, 101} {
			if _, err := tx.Exec(ctx, "INSERT INTO kinds (id, txt) VALUES ($1, $2)", id, fmt.Sprintf("tx row %d", id)); err != nil {
				t.Fatal(err)
			}
		}
		// The transaction reads its own writes; the target shows none yet.
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM kinds WHERE id >= 100 AND id < 200").Scan(&n); err != nil || n != 2 {
			t.Fatalf("count inside: %d, %v; want 2", n, err)
		}
		wantIDs(t, f.dsn, 100)
		wantStatus(t, f, "tx row 100", gateway.StatusRunning)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if txStatus(c) != 'I' {
			t.Fatalf("status %c after COMMIT, want I", txStatus(c))
		}
		wantIDs(t, f.dsn, 100, 100, 101)
		v := wantStatus(t, f, "tx row 101", gateway.StatusExecuted)
		if v.RowsAffected != 1 {
			t.Fatalf("request %+v, want 1 row", v)
		}
	})

	t.Run("rollback", func(t *testing.T) {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if err := insert(200); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		wantIDs(t, f.dsn, 200)
		v := wantStatus(t, f, "tx row 200", gateway.StatusRolledBack)
		if v.Outcome != gateway.OutcomeRolledBack {
			t.Fatalf("request %+v, want outcome rolled_back", v)
		}
	})

	t.Run("referral fails the transaction", func(t *testing.T) {
		before := gatewaytest.Snapshot(t, f.dsn, "orders")
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if err := insert(300); err != nil {
			t.Fatal(err)
		}
		_, err := c.Exec(ctx, "UPDATE orders SET status = $1 WHERE id = $2", "shipped", 4)
		pe := pgErr(t, err, pgwire.StateReferred)
		if txStatus(c) != 'E' {
			t.Fatalf("status %c after a referral, want E", txStatus(c))
		}
		_, err = c.Exec(ctx, "SELECT id FROM kinds WHERE id = 1")
		pgErr(t, err, "25P02")
		_, err = c.Exec(ctx, "SELECT 1")
		pgErr(t, err, "25P02")
		// COMMIT of a failed transaction rolls back.
		tag, err := c.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Fatalf("COMMIT of a failed transaction: %q, %v; want ROLLBACK", tag, err)
		}
		wantIDs(t, f.dsn, 300)
		if gatewaytest.Snapshot(t, f.dsn, "orders") != before {
			t.Fatal("a referred statement changed the target")
		}
		v, err := f.sys.Gateway.Request(ctx, pe.Where, gatewaytest.Agent)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status != gateway.StatusWaiting || !strings.Contains(strings.Join(v.Reasons, "; "), "runs on its own, outside that transaction") {
			t.Fatalf("referred request %+v: want waiting, saying an approval runs it on its own", v)
		}
		wantStatus(t, f, "tx row 300", gateway.StatusRolledBack)
	})

	t.Run("savepoints", func(t *testing.T) {
		for _, q := range []string{"BEGIN", "INSERT INTO kinds (id, txt) VALUES (400, 'tx row 400')", "SAVEPOINT s1",
			"INSERT INTO kinds (id, txt) VALUES (401, 'tx row 401')", "ROLLBACK TO SAVEPOINT s1",
			// A referral after a savepoint: ROLLBACK TO repairs the transaction.
			"SAVEPOINT s2"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		_, err := c.Exec(ctx, "UPDATE orders SET status = 'shipped' WHERE id = 4")
		pgErr(t, err, pgwire.StateReferred)
		// The Pilot's own refusal (six rows past max_rows 5) fails the
		// target transaction; ROLLBACK TO repairs that too.
		if _, err := c.Exec(ctx, "ROLLBACK TO s2"); err != nil {
			t.Fatal(err)
		}
		_, err = c.Exec(ctx, "INSERT INTO kinds (id, txt) SELECT g, 'tx row many' FROM generate_series(410, 415) AS g")
		pgErr(t, err, pgwire.StateReferred)
		if txStatus(c) != 'E' {
			t.Fatalf("status %c after a Pilot refusal, want E", txStatus(c))
		}
		for _, q := range []string{"ROLLBACK TO SAVEPOINT s2", "INSERT INTO kinds (id, txt) VALUES (402, 'tx row 402')", "RELEASE SAVEPOINT s2"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		_, err = c.Exec(ctx, "ROLLBACK TO SAVEPOINT nope")
		pgErr(t, err, "3B001")
		// That error failed the transaction: COMMIT rolls it back.
		tag, err := c.Exec(ctx, "COMMIT")
		if err != nil || tag.String() != "ROLLBACK" {
			t.Fatalf("COMMIT: %q, %v; want ROLLBACK", tag, err)
		}
		wantIDs(t, f.dsn, 400)
		for _, q := range []string{"BEGIN", "INSERT INTO kinds (id, txt) VALUES (400, 'tx row 400b')", "SAVEPOINT s1",
			"INSERT INTO kinds (id, txt) VALUES (401, 'tx row 401b')", "ROLLBACK TO SAVEPOINT s1",
			"INSERT INTO kinds (id, txt) VALUES (402, 'tx row 402b')", "COMMIT"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		wantIDs(t, f.dsn, 400, 400, 402)
		wantStatus(t, f, "tx row 401b", gateway.StatusRolledBack)
		wantStatus(t, f, "tx row 402b", gateway.StatusExecuted)
	})

	t.Run("read only and settings", func(t *testing.T) {
		if _, err := c.Exec(ctx, "BEGIN READ ONLY"); err != nil {
			t.Fatal(err)
		}
		var ro, iso string
		if err := c.QueryRow(ctx, "SHOW transaction_read_only").Scan(&ro); err != nil || ro != "on" {
			t.Fatalf("transaction_read_only %q, %v", ro, err)
		}
		_, err := c.Exec(ctx, "INSERT INTO kinds (id, txt) VALUES (500, 'tx row 500')")
		pgErr(t, err, "25006")
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if len(requestsOf(t, f, "tx row 500")) != 0 {
			t.Fatal("a write refused by a read-only transaction was sent on")
		}
		// SET LOCAL lasts until the transaction ends; a SET inside a
		// rolled-back transaction is undone.
		for _, q := range []string{"BEGIN ISOLATION LEVEL REPEATABLE READ", "SET LOCAL application_name = 'inside'"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := c.QueryRow(ctx, "SHOW transaction_isolation").Scan(&iso); err != nil || iso != "repeatable read" {
			t.Fatalf("transaction_isolation %q, %v", iso, err)
		}
		if _, err := c.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		var app string
		if err := c.QueryRow(ctx, "SHOW application_name").Scan(&app); err != nil || app == "inside" {
			t.Fatalf("application_name %q after COMMIT, %v: SET LOCAL outlived its transaction", app, err)
		}
	})

	t.Run("a session that ends rolls back", func(t *testing.T) {
		c2 := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
		if _, err := c2.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := c2.Exec(ctx, "INSERT INTO kinds (id, txt) VALUES (600, 'tx row 600')"); err != nil {
			t.Fatal(err)
		}
		c2.Close(ctx)
		wantStatus(t, f, "tx row 600", gateway.StatusRolledBack)
		wantIDs(t, f.dsn, 600)
	})

	if rep := f.sys.Verify(t); !rep.OK {
		t.Fatalf("logbook: %+v", rep)
	}
}

// TestTransactionIdleTimeout: a session idle inside a transaction past the
// front's limit is ended with 25P03 and its transaction rolled back.
func TestTransactionIdleTimeout(t *testing.T) {
	t.Parallel()
	f := newFixtureFront(t, nil, func(c *pgwire.Config) { c.TransactionIdle = 300 * time.Millisecond })
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for _, q := range []string{"BEGIN", "INSERT INTO kinds (id, txt) VALUES (700, 'tx row 700')"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	time.Sleep(time.Second)
	_, err := c.Exec(ctx, "COMMIT")
	var pe *pgconn.PgError
	if err == nil || errors.As(err, &pe) && pe.Code != "25P03" {
		t.Fatalf("COMMIT after the idle limit: %v, want the session ended (25P03)", err)
	}
	wantStatus(t, f, "tx row 700", gateway.StatusRolledBack)
	wantIDs(t, f.dsn, 700)
}

// TestTransactionMaxWithoutAStatement: a transaction open past the
// front's TransactionMax is rolled back, with its target transaction
// (its row locks, its Pilot connection, its slot of MaxTransactions),
// though the client sends only what the front answers itself. Before, it
// was rolled back at its next governed statement alone, and a client
// that sent SHOW within every idle limit held it for as long as it
// liked (review i24).
func TestTransactionMaxWithoutAStatement(t *testing.T) {
	t.Parallel()
	f := newFixtureFront(t, nil, func(c *pgwire.Config) {
		c.TransactionIdle = 10 * time.Second
		c.TransactionMax = 400 * time.Millisecond
	})
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for _, q := range []string{"BEGIN", "INSERT INTO kinds (id, txt) VALUES (710, 'tx row 710')"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for range 15 {
		if _, err := c.Exec(ctx, "SHOW TimeZone"); err != nil {
			t.Fatalf("SHOW inside the transaction: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantStatus(t, f, "tx row 710", gateway.StatusRolledBack)
	_, err := c.Exec(ctx, "INSERT INTO kinds (id, txt) VALUES (711, 'tx row 711')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25P04" {
		t.Fatalf("a statement in the transaction past its limit: %v, want 25P04", err)
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	// And COMMIT of a transaction rolled back so says ROLLBACK.
	for _, q := range []string{"BEGIN", "INSERT INTO kinds (id, txt) VALUES (712, 'tx row 712')"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	time.Sleep(600 * time.Millisecond)
	tag, err := c.Exec(ctx, "COMMIT")
	if err != nil || tag.String() != "ROLLBACK" {
		t.Fatalf("COMMIT past the limit: %q %v, want ROLLBACK", tag, err)
	}
	wantStatus(t, f, "tx row 712", gateway.StatusRolledBack)
	wantIDs(t, f.dsn, 710)
}

// TestTransactionReconciledAfterCrash: statements run in a transaction
// whose node stopped before COMMIT are settled by another node from their
// receipts: the target rolled the transaction back when its connection
// died, so none of them ran.
func TestTransactionReconciledAfterCrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for _, q := range []string{"BEGIN", "INSERT INTO kinds (id, txt) VALUES (800, 'tx row 800')", "INSERT INTO kinds (id, txt) VALUES (801, 'tx row 801')"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	other := f.sys.OtherNode(t)
	// While the transaction is open, another node leaves its requests
	// alone: their transaction is in progress.
	if _, err := other.Reconcile(ctx, 0); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, f, "tx row 800", gateway.StatusRunning)
	// The node "stops": its target connection dies with the transaction.
	admin, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := other.Reconcile(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// Both: a pass may meet one while the target still has the
		// transaction in progress, and the other once it has not.
		v := append(requestsOf(t, f, "tx row 800"), requestsOf(t, f, "tx row 801")...)
		if len(v) == 2 && v[0].Status == gateway.StatusWaiting && v[1].Status == gateway.StatusWaiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests not reconciled: %+v", v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantIDs(t, f.dsn, 800)
	// The client learns its transaction is gone at its next statement.
	_, err = c.Exec(ctx, "INSERT INTO kinds (id, txt) VALUES (802, 'tx row 802')")
	if err == nil {
		t.Fatal("a statement in a transaction the target rolled back ran")
	}
	wantIDs(t, f.dsn, 800)
	// The reconciler's answer stands: the front's rollback does not
	// overwrite it.
	time.Sleep(200 * time.Millisecond)
	wantStatus(t, f, "tx row 800", gateway.StatusWaiting)
}

// BenchmarkTransaction is the cost of a transaction of n statements (each
// a single-row INSERT with new literals) against the same statements sent
// alone, over the wire front: ms per statement for each.
//
//	go test -run '^$' -bench Transaction -benchtime 30x ./internal/pgwire/
func BenchmarkTransaction(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	next := 1000
	insert := func() {
		next++
		if _, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO kinds (id, txt) VALUES (%d, 'bench %d')", next, next), pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, 3, 10} {
		var alone, inTx time.Duration
		for range b.N {
			start := time.Now()
			for range n {
				insert()
			}
			alone += time.Since(start)
			start = time.Now()
			if _, err := c.Exec(ctx, "BEGIN"); err != nil {
				b.Fatal(err)
			}
			for range n {
				insert()
			}
			if _, err := c.Exec(ctx, "COMMIT"); err != nil {
				b.Fatal(err)
			}
			inTx += time.Since(start)
		}
		per := float64(b.N * n)
		b.ReportMetric(float64(alone.Microseconds())/1000/per, fmt.Sprintf("alone-%d-ms/stmt", n))
		b.ReportMetric(float64(inTx.Microseconds())/1000/per, fmt.Sprintf("tx-%d-ms/stmt", n))
	}
}

// TestPortalsEndAtSync: outside a transaction block, PostgreSQL
// closes every portal at Sync (the implicit transaction ends). The front
// kept named portals, each with its statement's whole result, across
// Syncs: results no cap weighs (the held-portal cap weighs texts and
// trees), held for the session's life.
// Found in the hostile review of the wire front (review 1, rv-wire).
func TestPortalsEndAtSync(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.hijack(t)
	h.Frontend.Send(&pgproto3.Parse{Name: "s", Query: "SELECT id FROM orders WHERE id < $1::int8"})
	h.Frontend.Send(&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p", Parameters: [][]byte{[]byte("5")}})
	h.Frontend.Send(&pgproto3.Describe{ObjectType: 'P', Name: "p"})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, msg := errorCode(receive(t, h.Frontend)); code != "" {
		t.Fatalf("the read: %s %s", code, msg)
	}
	h.Frontend.Send(&pgproto3.Execute{Portal: "p"})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	got := receive(t, h.Frontend)
	if code, _ := errorCode(got); code != "34000" {
		t.Fatalf("the portal after Sync: %v, want 34000 (it ended with the Sync)", got)
	}
	// The prepared statement outlives the Sync, as in PostgreSQL.
	h.Frontend.Send(&pgproto3.Bind{PreparedStatement: "s", DestinationPortal: "p", Parameters: [][]byte{[]byte("5")}})
	h.Frontend.Send(&pgproto3.Execute{Portal: "p"})
	h.Frontend.Send(&pgproto3.Sync{})
	if err := h.Frontend.Flush(); err != nil {
		t.Fatal(err)
	}
	if code, msg := errorCode(receive(t, h.Frontend)); code != "" {
		t.Fatalf("a new portal of the prepared statement: %s %s", code, msg)
	}
}
