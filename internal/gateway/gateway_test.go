package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// storeLocation is a fresh control store of the driver this pass tests
// (storetest.EnvDriver): a SQLite file, or a database on the shared server.
func storeLocation(t testing.TB) string {
	t.Helper()
	return storetest.New(t, storetest.FromEnv(t), &shared).Path
}

type fixture struct {
	dsn string
	sys *gatewaytest.System
}

// newFixture starts a system over a fresh target loaded with the demo data
// and both example delegations for agent:demo. tune adjusts the options.
func newFixture(t *testing.T, tune func(*gatewaytest.Options)) *fixture {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	opt := gatewaytest.Options{TargetDSN: dsn, StorePath: storeLocation(t), Keys: gatewaytest.NewKeys(t)}
	if tune != nil {
		tune(&opt)
	}
	sys := gatewaytest.Start(t, opt)
	sys.AddExamples(t)
	return &fixture{dsn: dsn, sys: sys}
}

// restart closes the system and starts a new one over the same store,
// target and keys, as a process restart would.
func (f *fixture) restart(t *testing.T) {
	t.Helper()
	f.sys.Close()
	f.sys = gatewaytest.Start(t, f.sys.Opts)
}

// entries returns the logbook entries about one request, in seq order.
func entries(t *testing.T, lb *logbook.Logbook, requestID string) []logbook.Entry {
	t.Helper()
	es, err := lb.Find(context.Background(), logbook.Query{SubjectKey: "request", SubjectValue: requestID})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func ofKind(es []logbook.Entry, kind logbook.Kind) []logbook.Entry {
	var out []logbook.Entry
	for _, e := range es {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func payload(t *testing.T, e logbook.Entry) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func storedRequestIDs(t *testing.T, sys *gatewaytest.System) []string {
	t.Helper()
	rows, err := sys.Store.ReadDB().QueryContext(context.Background(), "SELECT id FROM requests ORDER BY created_ns")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestDecisionBeforeExecution runs a mix of statements and checks
// invariant 7 on every request: exactly one decision entry, written before
// anything else about the request; an execution.pending and an execution
// entry after it for each statement the Pilot ran; a receipt in the target
// exactly for those that executed; and a logbook that verifies.
func TestDecisionBeforeExecution(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	gw := f.sys.Gateway
	type want struct {
		outcome string
		pilot   string // "" (the Pilot never ran), "executed" or "refused"
	}
	statements := []struct {
		principal, sql string
		want           want
	}{
		{gatewaytest.Agent, "SELECT id, status FROM orders WHERE id < 10 ORDER BY id", want{gateway.OutcomeExecuted, "executed"}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3", want{gateway.OutcomeExecuted, "executed"}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id IN (4, 5)", want{gateway.OutcomeExecuted, "executed"}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id = 100000", want{gateway.OutcomeExecuted, "executed"}},
		{gatewaytest.Agent, "SELECT id, total_cents FROM orders", want{gateway.OutcomeReferred, ""}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id = 45", want{gateway.OutcomeReferred, "refused"}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'shipped' WHERE id = 6", want{gateway.OutcomeReferred, "refused"}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40", want{gateway.OutcomeReferred, "refused"}},
		{gatewaytest.Agent, "DELETE FROM orders WHERE id = 7", want{gateway.OutcomeReferred, ""}},
		{gatewaytest.Agent, "UPDATE orders SET status = 'failed' WHERE id = 8; DROP TABLE orders", want{gateway.OutcomeRejected, ""}},
		{gatewaytest.Agent, "UPDATE customers SET name = 'John Smith' WHERE id = 3", want{gateway.OutcomeReferred, ""}},
		{gatewaytest.Agent, "SELECT id, name FROM customers WHERE region = 'EU'", want{gateway.OutcomeExecuted, "executed"}},
		{gatewaytest.Other, "SELECT id FROM orders", want{gateway.OutcomeReferred, ""}},
		{gatewaytest.Agent, "SELEC id FROM orders", want{gateway.OutcomeRejected, ""}},
		{gatewaytest.Agent, "", want{gateway.OutcomeRejected, ""}},
	}
	wants := map[string]want{}
	for _, s := range statements {
		resp, err := gw.Submit(ctx, s.principal, gatewaytest.Target, s.sql)
		var sqlErr *gateway.SQLError
		switch {
		case errors.As(err, &sqlErr):
			if s.want.outcome != gateway.OutcomeRejected || sqlErr.RequestID == "" {
				t.Fatalf("%q: %v", s.sql, err)
			}
			wants[sqlErr.RequestID] = s.want
			continue
		case err != nil:
			t.Fatalf("%q: %v", s.sql, err)
		}
		if resp.Outcome != s.want.outcome {
			t.Fatalf("%q: outcome %s %v, want %s", s.sql, resp.Outcome, resp.Reasons, s.want.outcome)
		}
		wants[resp.RequestID] = s.want
	}
	// An unknown target is an error before any request exists.
	if _, err := gw.Submit(ctx, gatewaytest.Agent, "nope", "SELECT 1"); !errors.Is(err, gateway.ErrUnknownTarget) {
		t.Fatalf("unknown target: %v", err)
	}

	// Executed statements were answered while their execution entries
	// group-committed; wait for those.
	gw.Drain()
	// Every stored request is one of ours, and every one of ours is stored.
	stored := storedRequestIDs(t, f.sys)
	if len(stored) != len(wants) {
		t.Fatalf("%d requests stored, %d submitted", len(stored), len(wants))
	}
	// Every decision entry names a stored request.
	decisions, err := f.sys.Logbook.Find(ctx, logbook.Query{Kind: "decision"})
	if err != nil {
		t.Fatal(err)
	}
	if len(decisions) != len(wants) {
		t.Fatalf("%d decision entries for %d requests", len(decisions), len(wants))
	}
	executedReceipts := 0
	for _, id := range stored {
		w, ok := wants[id]
		if !ok {
			t.Fatalf("request %s was stored but not submitted", id)
		}
		es := entries(t, f.sys.Logbook, id)
		ds := ofKind(es, "decision")
		if len(ds) != 1 {
			t.Fatalf("%s: %d decision entries, want exactly one", id, len(ds))
		}
		if es[0].Kind != "decision" {
			t.Fatalf("%s: the first entry about it is %s, not its decision", id, es[0].Kind)
		}
		d := payload(t, ds[0])
		if d["request_id"] != id {
			t.Fatalf("%s: decision payload names %v", id, d["request_id"])
		}
		view, err := gw.Request(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		if view.Outcome != w.outcome {
			t.Errorf("%s: stored outcome %s, want %s", id, view.Outcome, w.outcome)
		}
		pending, execs := ofKind(es, "execution.pending"), ofKind(es, "execution")
		switch w.pilot {
		case "":
			if len(pending)+len(execs) != 0 {
				t.Errorf("%s: execution entries for a statement the Pilot never ran", id)
			}
			if d["path"] != "" {
				t.Errorf("%s: decision path %v for a referral", id, d["path"])
			}
		case "executed":
			// The compiled path records the marque id in the decision (a
			// restart settles it by that id): no pending entry.
			if len(pending) != 0 || len(execs) != 1 {
				t.Fatalf("%s: %d pending and %d execution entries, want none and one", id, len(pending), len(execs))
			}
			if !(ds[0].Seq < execs[0].Seq) {
				t.Errorf("%s: decision %d, execution %d: not in that order", id, ds[0].Seq, execs[0].Seq)
			}
			if d["marque_id"] == nil || d["marque_id"] == "" || d["marque_id"] != payload(t, execs[0])["marque_id"] {
				t.Errorf("%s: decision marque %v, execution marque %v: want the same, recorded", id, d["marque_id"], payload(t, execs[0])["marque_id"])
			}
			if d["outcome"] != "run" || d["path"] != "compiled" {
				t.Errorf("%s: decision %v/%v, want run on the compiled path", id, d["outcome"], d["path"])
			}
			x := payload(t, execs[0])
			if x["outcome"] != string(pilot.Executed) || int64(x["rows_affected"].(float64)) != view.RowsAffected {
				t.Errorf("%s: execution entry %v, request %+v", id, x, view)
			}
			if execs[0].Subjects["marque"] != view.MarqueID || view.MarqueID == "" {
				t.Errorf("%s: execution entries do not name marque %s and a txid", id, view.MarqueID)
			}
			found, rows, err := f.sys.Pilot.Receipt(ctx, view.MarqueID)
			if err != nil {
				t.Fatal(err)
			}
			if read := strings.HasPrefix(view.CanonicalSQL, "SELECT"); read {
				// A read runs while its decision is made, and is recorded with
				// its outcome in one commit, right after it, before any row
				// leaves; it writes no receipt, and its entry says so.
				if found || x["receipt"] != false || execs[0].Seq != ds[0].Seq+1 {
					t.Errorf("%s: a read: receipt %v, execution entry %d (receipt %v) after decision %d; want no receipt, the entry right after, saying so", id, found, execs[0].Seq, x["receipt"], ds[0].Seq)
				}
			} else if !found || rows != view.RowsAffected {
				t.Errorf("%s: receipt found=%v rows=%d, request rows %d", id, found, rows, view.RowsAffected)
			} else if _, ok := x["receipt"]; ok {
				t.Errorf("%s: a write's execution entry says receipt %v", id, x["receipt"])
			}
			executedReceipts++
		case "refused":
			// The guard refused before COMMIT was near: no pending entry.
			if len(pending) != 0 || len(execs) != 1 {
				t.Fatalf("%s: %d pending and %d execution entries, want 0 and 1", id, len(pending), len(execs))
			}
			if ds[0].Seq >= execs[0].Seq {
				t.Errorf("%s: the execution entry precedes the decision", id)
			}
			if x := payload(t, execs[0]); x["outcome"] != string(pilot.Refused) {
				t.Errorf("%s: execution entry %v", id, x)
			}
			if view.MarqueID == "" {
				t.Fatalf("%s: a statement the Pilot refused names no marque", id)
			}
			if found, _, _ := f.sys.Pilot.Receipt(ctx, view.MarqueID); found {
				t.Errorf("%s: a refused statement left a receipt", id)
			}
		}
	}
	if n := f.ran(t); n != executedReceipts {
		t.Fatalf("%d receipts in the target and receiptless reads, %d executed requests", n, executedReceipts)
	}
	rep := f.sys.Verify(t)
	if rep.Checkpoints == 0 || rep.SignedThrough != rep.HeadSeq {
		t.Fatalf("verify: %s: the head is not covered by a checkpoint", rep)
	}
}

// TestNothingExecutesWithoutTheLogbook: once the logbook cannot be
// written, every statement fails with ErrLogUnavailable before anything
// runs in the target or is stored: a read, which otherwise runs while its
// decision is made, is decided first while the logbook is known not to be
// recording (ledger.Ledger.Recording), so it does not run either; the
// Pilot ran nothing.
func TestNothingExecutesWithoutTheLogbook(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	orders, customers := gatewaytest.Snapshot(t, f.dsn, "orders"), gatewaytest.Snapshot(t, f.dsn, "customers")
	head, _, err := f.sys.Logbook.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.sys.StopLogbook(t)
	ran := f.sys.Pilot.Stats()
	for _, sql := range []string{
		"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3",
		"SELECT id, status FROM orders WHERE id = 3",
		"UPDATE orders SET status = 'failed' WHERE id = 45",
		"UPDATE customers SET name = 'John Smith' WHERE id = 3",
		"SELEC 1",
	} {
		resp, err := f.sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
		if !errors.Is(err, gateway.ErrLogUnavailable) || resp != nil {
			t.Fatalf("%q with the logbook down: %+v, %v; want ErrLogUnavailable and no answer", sql, resp, err)
		}
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != orders || gatewaytest.Snapshot(t, f.dsn, "customers") != customers {
		t.Fatal("the target changed while the logbook could not be written")
	}
	if n := f.ran(t); n != 0 || f.sys.Pilot.Stats() != ran {
		t.Fatalf("%d receipts, Pilot runs %+v (before %+v): a statement reached the Pilot without a durable decision", n, f.sys.Pilot.Stats(), ran)
	}
	if ids := storedRequestIDs(t, f.sys); len(ids) != 0 {
		t.Fatalf("requests %v stored without a decision entry", ids)
	}
	if now, _, _ := f.sys.Logbook.Head(ctx); now != head {
		t.Fatalf("logbook head moved from %d to %d while stopped", head, now)
	}
	f.sys.Verify(t)
}

// crashFixture is a system whose Pilot waits long on locks, so a test can
// hold a statement at a chosen point with a lock in the target.
func newCrashFixture(t *testing.T) *fixture {
	return newFixture(t, func(o *gatewaytest.Options) {
		o.Pilot.LockTimeout = time.Minute
		o.Pilot.StatementTimeout = time.Minute
	})
}

func (f *fixture) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// waitFor polls cond until it holds, failing t after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) count(t *testing.T, kind logbook.Kind) int {
	t.Helper()
	es, err := f.sys.Logbook.Find(context.Background(), logbook.Query{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// lastRequest is the request of the newest decision entry.
func (f *fixture) lastRequest(t *testing.T) string {
	t.Helper()
	ds, err := f.sys.Logbook.Find(context.Background(), logbook.Query{Kind: "decision"})
	if err != nil || len(ds) == 0 {
		t.Fatalf("no decision entry: %v", err)
	}
	return ds[len(ds)-1].Subjects["request"]
}

// holdCommit makes every transaction that updates orders wait at COMMIT
// (in a deferred constraint trigger) while conn holds advisory lock 4242.
func holdCommit(t *testing.T, admin, holder *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	_, err := admin.Exec(ctx, `CREATE FUNCTION public.hold_commit() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER hold_commit AFTER UPDATE ON public.orders DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION public.hold_commit()`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
}

// committingBackend is the pid of the Pilot's backend waiting at COMMIT.
func committingBackend(t *testing.T, admin *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	waitFor(t, "the Pilot to wait at COMMIT", func() bool {
		err := admin.QueryRow(context.Background(),
			"SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND datname = current_database()").Scan(&pid)
		return err == nil
	})
	return pid
}

type submitted struct {
	resp *gateway.Response
	err  error
}

func (f *fixture) submitAsync(sql string) chan submitted {
	done := make(chan submitted, 1)
	gw := f.sys.Gateway
	go func() {
		resp, err := gw.Submit(context.Background(), gatewaytest.Agent, gatewaytest.Target, sql)
		done <- submitted{resp, err}
	}()
	return done
}

const crashSQL = "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3"

// TestCrashBeforeExecution: the process dies after the decision, while
// its statement waits inside the target (the logbook stops and the
// transaction's backend is terminated, as when the process and its
// connections go away). The decision recorded the marque id; a restarted
// gateway inserts a void receipt under it, which succeeds (the statement's
// transaction aborted), so the request is reconciled as not run and the
// marque can never run.
func TestCrashBeforeExecution(t *testing.T) {
	t.Parallel()
	f := newCrashFixture(t)
	ctx := t.Context()
	before := gatewaytest.Snapshot(t, f.dsn, "orders")

	// Hold the row the statement updates, so it waits inside the Pilot.
	blocker := f.conn(t)
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM orders WHERE id = 3 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	admin := f.conn(t)
	done := f.submitAsync(crashSQL)
	var pid int32
	waitFor(t, "the statement to wait on the row", func() bool {
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND wait_event = 'transactionid' AND datname = current_database()`).Scan(&pid)
		return err == nil
	})
	id := f.lastRequest(t)
	if decisionMarque(t, f, id) == "" {
		t.Fatal("the decision does not record the marque id")
	}
	f.sys.StopLogbook(t)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err == nil {
		t.Fatalf("Submit: %+v; want an error (the logbook is gone)", res.resp)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("the statement committed")
	}
	v, err := f.sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusRunning {
		t.Fatalf("left as %s, want running (as a crash leaves it)", v.Status)
	}

	f.restart(t)
	n, err := f.sys.Gateway.Reconcile(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want 1 resolved", n, err)
	}
	v, err = f.sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusWaiting || v.Outcome != gateway.OutcomeReferred || !strings.Contains(strings.Join(v.Reasons, " "), "did not run") {
		t.Fatalf("reconciled as %+v, want referred: did not run", v)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("reconciliation ran the statement")
	}
	if n, err := f.sys.Gateway.Reconcile(ctx, 0); err != nil || n != 0 {
		t.Fatalf("second reconcile: %d, %v", n, err)
	}
	var voided int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM harbormaster.receipts WHERE void AND marque_id = $1", decisionMarque(t, f, id)).Scan(&voided); err != nil || voided != 1 {
		t.Fatalf("the marque was not burned by a void receipt: %d %v", voided, err)
	}
	checkReconciled(t, f, id, "not_executed")
}

// decisionMarque is the marque id request id's decision entry recorded.
func decisionMarque(t *testing.T, f *fixture, id string) string {
	t.Helper()
	ds := ofKind(entries(t, f.sys.Logbook, id), "decision")
	if len(ds) != 1 {
		t.Fatalf("%s: %d decision entries", id, len(ds))
	}
	m, _ := payload(t, ds[0])["marque_id"].(string)
	return m
}

// TestCrashAfterCommit: the statement commits in its one round trip, then
// the logbook goes away before the execution entry. The agent is told it
// executed (it did); the request stays running, and a restarted gateway's
// void receipt under the marque id meets the receipt's key: it reconciles
// the request as executed, with the receipt's row count, and runs nothing
// again.
func TestCrashAfterCommit(t *testing.T) {
	t.Parallel()
	f := newCrashFixture(t)
	ctx := t.Context()
	admin, holder := f.conn(t), f.conn(t)
	holdCommit(t, admin, holder)
	before := gatewaytest.Snapshot(t, f.dsn, "orders")

	done := f.submitAsync(crashSQL)
	committingBackend(t, admin)
	id := f.lastRequest(t)
	if decisionMarque(t, f, id) == "" {
		t.Fatal("the decision does not record the marque id")
	}
	f.sys.StopLogbook(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.resp.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("Submit: %+v, %v; want executed (it committed)", res.resp, res.err)
	}
	after := gatewaytest.Snapshot(t, f.dsn, "orders")
	if after == before || f.ran(t) != 1 {
		t.Fatal("the statement did not commit")
	}
	v, err := f.sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusRunning || v.MarqueID == "" {
		t.Fatalf("left as %+v, want running with its marque", v)
	}

	f.restart(t)
	n, err := f.sys.Gateway.Reconcile(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want 1 resolved", n, err)
	}
	v, err = f.sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusExecuted || v.Outcome != gateway.OutcomeExecuted || v.RowsAffected != 1 {
		t.Fatalf("reconciled as %+v, want executed, 1 row", v)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != after || f.ran(t) != 1 {
		t.Fatal("reconciliation ran the statement again")
	}
	if n, err := f.sys.Gateway.Reconcile(ctx, 0); err != nil || n != 0 {
		t.Fatalf("second reconcile: %d, %v", n, err)
	}
	checkReconciled(t, f, id, "executed")
}

// TestCrashDuringCommit: the process dies while COMMIT is in flight (its
// backend is terminated). The Pilot cannot know whether COMMIT took, so
// the request stays running. The transaction aborted: a restarted
// gateway's void receipt under the marque id the decision recorded
// succeeds, and it refers.
func TestCrashDuringCommit(t *testing.T) {
	t.Parallel()
	f := newCrashFixture(t)
	ctx := t.Context()
	admin, holder := f.conn(t), f.conn(t)
	holdCommit(t, admin, holder)
	before := gatewaytest.Snapshot(t, f.dsn, "orders")

	done := f.submitAsync(crashSQL)
	pid := committingBackend(t, admin)
	id := f.lastRequest(t)
	f.sys.StopLogbook(t)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if !errors.Is(res.err, pilot.ErrCommitUnknown) {
		t.Fatalf("Submit: %+v, %v; want ErrCommitUnknown", res.resp, res.err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("a transaction killed at COMMIT changed the target")
	}
	var marqueID string
	if err := f.sys.Store.ReadDB().QueryRowContext(ctx, f.sys.Store.SQL("SELECT marque_id FROM requests WHERE id = ?"), id).Scan(&marqueID); err != nil || marqueID == "" {
		t.Fatalf("the marque id was not recorded before COMMIT: %q %v", marqueID, err)
	}

	f.restart(t)
	n, err := f.sys.Gateway.Reconcile(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want 1 resolved", n, err)
	}
	v, err := f.sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusWaiting || !strings.Contains(strings.Join(v.Reasons, " "), "did not run") {
		t.Fatalf("reconciled as %+v, want referred: did not run", v)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("reconciliation ran the statement")
	}
	checkReconciled(t, f, id, "not_executed")
}

// checkReconciled: the request has one decision, then exactly one
// execution entry (the reconciled one, with the outcome), and the logbook
// verifies.
func checkReconciled(t *testing.T, f *fixture, id, outcome string) {
	t.Helper()
	es := entries(t, f.sys.Logbook, id)
	if len(es) == 0 || es[0].Kind != "decision" || len(ofKind(es, "decision")) != 1 {
		t.Fatalf("%s: entries %v: want its one decision first", id, kinds(es))
	}
	execs := ofKind(es, "execution")
	if len(execs) != 1 {
		t.Fatalf("%s: %d execution entries, want the reconciled one: %v", id, len(execs), kinds(es))
	}
	p := payload(t, execs[0])
	if p["reconciled"] != true || p["outcome"] != outcome {
		t.Fatalf("%s: execution entry %v, want reconciled %s", id, p, outcome)
	}
	f.sys.Verify(t)
}

func kinds(es []logbook.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e.Kind)
	}
	return out
}

// TestReferralsDoNotStarveThePool: the transaction opened while a statement
// is checked goes back when it is referred, so more concurrent referrals
// than the Pilot has connections all finish, and a human's preview of each
// (which needs a connection of its own) then gets one.
func TestReferralsDoNotStarveThePool(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *gatewaytest.Options) { o.Pilot.MaxConns = 2 })
	const n = 8
	results := make([]chan submitted, n)
	for i := range results {
		results[i] = f.submitAsync(fmt.Sprintf("DELETE FROM orders WHERE id = %d", 100+i))
	}
	deadline := time.After(time.Minute)
	for i, ch := range results {
		select {
		case r := <-ch:
			if r.err != nil || r.resp.Outcome != gateway.OutcomeReferred {
				t.Fatalf("referral %d: %+v, %v", i, r.resp, r.err)
			}
			if v := f.previewed(t, r.resp.RequestID); len(v.Preview) == 0 {
				t.Fatalf("referral %d has no preview (%s)", i, v.PreviewError)
			}
		case <-deadline:
			t.Fatalf("referral %d did not finish: the Pilot's pool is starved", i)
		}
	}
}

// TestUnknownCommitReconciledWhileRunning: COMMIT's outcome is unknown
// (the backend died during it) while the node and its logbook stay up.
// The request is left running; the node's periodic reconciliation burns
// the marque with a void receipt (the transaction aborted, so the insert
// succeeds) and refers it, without a restart and without running
// anything.
func TestUnknownCommitReconciledWhileRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *gatewaytest.Options) {
		o.Pilot.LockTimeout = time.Minute
		o.Pilot.StatementTimeout = time.Minute
		o.Gateway.ReconcileAfter = time.Millisecond
	})
	ctx := t.Context()
	admin, holder := f.conn(t), f.conn(t)
	holdCommit(t, admin, holder)
	before := gatewaytest.Snapshot(t, f.dsn, "orders")

	done := f.submitAsync(crashSQL)
	pid := committingBackend(t, admin)
	id := f.lastRequest(t)
	// While the statement is in flight, reconciliation leaves it alone.
	time.Sleep(1500 * time.Millisecond)
	if v, err := f.sys.Gateway.Request(ctx, id, ""); err != nil || v.Status != gateway.StatusRunning {
		t.Fatalf("a request in flight was reconciled: %+v, %v", v, err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if res := <-done; !errors.Is(res.err, pilot.ErrCommitUnknown) {
		t.Fatalf("Submit: %+v, %v; want ErrCommitUnknown", res.resp, res.err)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the periodic reconciliation", func() bool {
		v, err := f.sys.Gateway.Request(ctx, id, "")
		return err == nil && v.Status != gateway.StatusRunning
	})
	v, err := f.sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusWaiting || !strings.Contains(strings.Join(v.Reasons, " "), "did not run") {
		t.Fatalf("reconciled as %+v, want referred: did not run", v)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || f.ran(t) != 0 {
		t.Fatal("the statement ran")
	}
	checkReconciled(t, f, id, "not_executed")
}

// TestOversizeStatementIsRecorded: a statement past the check's limit is
// refused as too large, and its decision entry recorded, whatever its
// text: its entry keeps a prefix, its length and its hash. Found in
// review: a body of ~1 MiB of characters JSON escapes six times over made
// an entry past the logbook's 1 MiB, and the agent was told the decision
// could not be recorded and to try again later.
func TestOversizeStatementIsRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	text := "SELECT '" + strings.Repeat("\x01", 900<<10) + "'"
	_, err := f.sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, text)
	var se *gateway.SQLError
	if !errors.As(err, &se) || se.Code != sqlcheck.CodeInputTooLarge {
		t.Fatalf("got %v, want the statement refused as too large", err)
	}
	var found bool
	err = f.sys.Logbook.Iterate(ctx, logbook.Query{SubjectKey: "request", SubjectValue: se.RequestID}, func(e logbook.Entry) error {
		var p struct {
			Statement string `json:"statement"`
			Bytes     int    `json:"statement_bytes"`
			SHA       string `json:"statement_text_sha256"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return err
		}
		found = e.Kind == logbook.KindDecision && p.Bytes == len(text) && len(p.SHA) == 64 && len(p.Statement) == 64<<10
		return nil
	})
	if err != nil || !found {
		t.Fatalf("the decision entry of %s: %v (found %v)", se.RequestID, err, found)
	}
}

// ran counts the statements that ran against the target: receipts, and
// the reads run in process, which write none (gatewaytest.Ran).
func (f *fixture) ran(t *testing.T) int {
	t.Helper()
	return gatewaytest.Ran(t, f.dsn, f.sys.Logbook)
}
