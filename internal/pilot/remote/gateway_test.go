package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// residualRule is fix-name-typos.yaml's rule with the residual clause.
const residualRule = 1

// system starts a control plane over a fresh shop target, with its Pilot
// in process or behind a remote server, a Surveyor on scripted providers
// that always answer conforms, Tier B enabled for the residual rule, and
// both example delegations.
func system(t *testing.T, remote bool, tune func(*gatewaytest.Options)) (*gatewaytest.System, string) {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	var jurors []llm.Juror
	for i, start := range []func(testing.TB, llmtest.Behaviour) *llmtest.Server{llmtest.NewOpenAI, llmtest.NewAnthropic, llmtest.NewOpenAI} {
		srv := start(t, llmtest.AlwaysConforms())
		kind := llm.KindOpenAI
		if i == 1 {
			kind = llm.KindAnthropic
		}
		j, err := llm.New(llm.ProviderConfig{Name: fmt.Sprintf("%s-%d", kind, i), Kind: kind, BaseURL: srv.URL, Model: "m", Timeout: 10 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jurors = append(jurors, j)
	}
	panel, err := surveyor.NewPanel(surveyor.Config{}, jurors, nil)
	if err != nil {
		t.Fatal(err)
	}
	opt := gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: gatewaytest.NewKeys(t),
		Audit: &audit.Config{}, RemotePilot: remote}
	opt.Gateway.Surveyor = panel
	if tune != nil {
		tune(&opt)
	}
	sys := gatewaytest.Start(t, opt)
	if remote && sys.Remote == nil {
		t.Fatal("gatewaytest did not put the Pilot behind a remote server")
	}
	ds := sys.AddExamples(t)
	sys.EnableTierB(t, ds[gatewaytest.Customers], residualRule, panel.Identity(), panel.Bundle().Version)
	return sys, dsn
}

// observed is what the agent and a human see of one statement, without
// what differs from one run to the next (ids, times).
type observed struct {
	Outcome, Path string
	Status        gateway.Status
	Reasons       []string
	Rows          string
	RowsAffected  int64
	Columns       []gateway.Column
	Truncated     bool
	Previewed     bool
	PreviewRows   int64
	Code          string
	Receipts      int
}

func observe(t *testing.T, sys *gatewaytest.System, dsn string, resp *gateway.Response, previewable bool) observed {
	t.Helper()
	rows, _ := json.Marshal(resp.Rows)
	o := observed{Outcome: resp.Outcome, Path: resp.Path, Reasons: resp.Reasons, Rows: string(rows), RowsAffected: resp.RowsAffected,
		Columns: resp.Columns, Truncated: resp.Truncated}
	v := sys.Gateway
	view, err := v.Request(context.Background(), resp.RequestID, "")
	if err != nil {
		t.Fatal(err)
	}
	o.Status = view.Status
	if resp.Outcome == gateway.OutcomeReferred && previewable {
		view = sys.Previewed(t, resp.RequestID)
		if len(view.Preview) > 0 {
			var pv pilot.Preview
			if err := json.Unmarshal(view.Preview, &pv); err != nil {
				t.Fatal(err)
			}
			o.Previewed, o.PreviewRows = true, pv.Rows
			if pv.Digest == "" || pv.Digest != view.PreviewSHA256 {
				t.Errorf("%s: the stored preview's digest is not the request's", resp.RequestID)
			}
		}
	}
	o.Receipts = gatewaytest.Ran(t, dsn, sys.Logbook)
	return o
}

// TestGatewayThroughRemotePilot runs the statement path end to end twice,
// with the Pilot in process and behind the remote server, and compares
// what every statement did: compiled reads and writes, refusals by the
// Pilot's guards, referrals with their rehearsals, the surveyed path, and
// an approval executed on the approved path. The logbook verifies.
func TestGatewayThroughRemotePilot(t *testing.T) {
	t.Parallel()
	statements := []string{
		"SELECT id, status FROM orders WHERE id < 10 ORDER BY id",
		"SELECT id, customer_id, status FROM orders WHERE id = 1",
		"SELECT status AS x, id AS x, customer_id FROM orders WHERE id = 2", // columns of one name, in order
		"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3",
		"UPDATE orders SET status = 'failed' WHERE id IN (4, 5) RETURNING id, status",
		"UPDATE orders SET status = 'failed' WHERE id = 100000",
		"SELECT id, total_cents FROM orders",                                      // referred: a column no rule lists
		"UPDATE orders SET status = 'failed' WHERE id = 45",                       // fence
		"UPDATE orders SET status = 'shipped' WHERE id = 6",                       // check
		"UPDATE orders SET status = 'retrying' WHERE id BETWEEN 11 AND 40",        // max_rows
		"DELETE FROM orders WHERE id = 7",                                         // referred, rehearsed
		"UPDATE orders SET nosuch = 'failed' WHERE id = 8",                        // referred, not rehearsable
		"SELECT id, name FROM customers WHERE region = 'EU' ORDER BY id",          // fenced read
		"UPDATE customers SET name = 'John Smith' WHERE id = 3",                   // surveyed
		"UPDATE customers SET name = 'X' WHERE id IN (4, 5)",                      // surveyed, past max_rows: referred
		"UPDATE customers SET email = 'x@example.com' WHERE id = 12 RETURNING id", // referred: to approve
	}
	type run struct {
		sys  *gatewaytest.System
		dsn  string
		seen []observed
		ids  []string
	}
	runs := map[bool]*run{}
	for _, remote := range []bool{false, true} {
		sys, dsn := system(t, remote, nil)
		r := &run{sys: sys, dsn: dsn}
		for _, sql := range statements {
			resp, err := sys.Gateway.Submit(t.Context(), gatewaytest.Agent, gatewaytest.Target, sql)
			if err != nil {
				t.Fatalf("remote %v: %q: %v", remote, sql, err)
			}
			r.seen = append(r.seen, observe(t, sys, dsn, resp, !strings.Contains(sql, "nosuch")))
			r.ids = append(r.ids, resp.RequestID)
		}
		// A human approves the last one.
		last := r.ids[len(r.ids)-1]
		act, err := sys.Gateway.ProposeApproval(t.Context(), last)
		if err != nil {
			t.Fatalf("remote %v: propose: %v", remote, err)
		}
		sig, err := sys.Opts.Keys.Approver.Sign(signing.NamespaceApproval, act)
		if err != nil {
			t.Fatal(err)
		}
		done, err := sys.Gateway.Approve(t.Context(), last, act, sig)
		if err != nil {
			t.Fatalf("remote %v: approve: %v", remote, err)
		}
		if done.Status != gateway.StatusExecuted || done.Path != marque.PathApproved || done.RowsAffected != 1 {
			t.Fatalf("remote %v: approved request %+v, want executed on the approved path", remote, done)
		}
		r.seen = append(r.seen, observed{Outcome: done.Outcome, Path: done.Path, Status: done.Status, RowsAffected: done.RowsAffected,
			Receipts: gatewaytest.Ran(t, dsn, sys.Logbook)})
		sys.Verify(t)
		runs[remote] = r
	}
	in, out := runs[false], runs[true]
	for _, r := range runs {
		for i, sql := range statements {
			if strings.Contains(sql, "nosuch") {
				if v, err := r.sys.Gateway.Request(t.Context(), r.ids[i], ""); err != nil || v.PreviewSHA256 != "" {
					t.Errorf("%q was rehearsed: %v", sql, err)
				}
			}
		}
	}
	for i := range in.seen {
		what := "the approval"
		if i < len(statements) {
			what = statements[i]
		}
		a, _ := json.Marshal(in.seen[i])
		b, _ := json.Marshal(out.seen[i])
		if string(a) != string(b) {
			t.Errorf("%s:\nin process %s\nremote     %s", what, a, b)
		}
	}
	// The paths were all taken.
	paths := map[string]bool{}
	for _, o := range out.seen {
		paths[o.Path+"/"+o.Outcome] = true
	}
	for _, want := range []string{"compiled/executed", "surveyed/executed", "approved/executed", "/referred"} {
		if !paths[want] {
			t.Errorf("no statement went %s through the remote Pilot: %v", want, paths)
		}
	}
	if gatewaytest.Snapshot(t, in.dsn, "orders") == gatewaytest.Snapshot(t, out.dsn, "orders") {
		// Times differ between the two targets (now()), so equal snapshots
		// would mean nothing ran on one of them.
		t.Log("note: the two targets' orders are byte-identical")
	}
}

// TestConnectionCutMidExecute: the connection to the remote Pilot is cut
// while its statement waits inside the target. The gateway gets
// ErrCommitUnknown and leaves the request running; the statement, which
// the server does not cancel, then commits; reconciliation settles the
// request from the receipt (VoidReceipt meets it) as executed, exactly
// once, and a second pass finds nothing to do.
func TestConnectionCutMidExecute(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sys, dsn := system(t, true, func(o *gatewaytest.Options) {
		o.Pilot.LockTimeout, o.Pilot.StatementTimeout = time.Minute, time.Minute
	})
	before := gatewaytest.Snapshot(t, dsn, "orders")
	blocker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM orders WHERE id = 3 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	type submitted struct {
		resp *gateway.Response
		err  error
	}
	done := make(chan submitted, 1)
	go func() {
		resp, err := sys.Gateway.Submit(context.Background(), gatewaytest.Agent, gatewaytest.Target,
			"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3")
		done <- submitted{resp, err}
	}()
	waitFor(t, "the Pilot's statement to wait on the row lock", func() bool {
		var n int
		err := blocker.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&n)
		return err == nil && n == 1
	})
	sys.Relay.Cut()
	res := <-done
	if !errors.Is(res.err, pilot.ErrCommitUnknown) {
		t.Fatalf("Submit after the cut: %+v, %v; want ErrCommitUnknown", res.resp, res.err)
	}
	id := lastRequest(t, sys.Logbook)
	if v, err := sys.Gateway.Request(ctx, id, ""); err != nil || v.Status != gateway.StatusRunning || v.MarqueID == "" {
		t.Fatalf("after the cut: %+v %v; want running with its marque", v, err)
	}
	// The server did not cancel the statement: released, it commits.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the statement to commit in the target", func() bool { return gatewaytest.Receipts(t, dsn) == 1 })
	after := gatewaytest.Snapshot(t, dsn, "orders")
	if after == before {
		t.Fatal("the receipt committed without the statement")
	}
	n, err := sys.Gateway.Reconcile(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want 1 resolved", n, err)
	}
	v, err := sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusExecuted || v.RowsAffected != 1 {
		t.Fatalf("reconciled as %+v, want executed, 1 row", v)
	}
	if n, err := sys.Gateway.Reconcile(ctx, 0); err != nil || n != 0 {
		t.Fatalf("second reconcile: %d, %v", n, err)
	}
	if gatewaytest.Snapshot(t, dsn, "orders") != after || gatewaytest.Receipts(t, dsn) != 1 {
		t.Fatal("reconciliation ran the statement again")
	}
	es, err := sys.Logbook.Find(ctx, logbook.Query{SubjectKey: "request", SubjectValue: id})
	if err != nil {
		t.Fatal(err)
	}
	var execs []map[string]any
	for _, e := range es {
		if e.Kind == "execution" {
			var p map[string]any
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			execs = append(execs, p)
		}
	}
	if len(execs) != 1 || execs[0]["reconciled"] != true || execs[0]["outcome"] != "executed" {
		t.Fatalf("execution entries %v, want one, reconciled executed", execs)
	}
	sys.Verify(t)

	// The relay carries new connections after the cut: the next
	// statement runs.
	resp, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, "UPDATE orders SET status = 'failed' WHERE id = 4")
	if err != nil || resp.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("after the cut: %+v %v", resp, err)
	}
}

// TestConnectionCutBeforeCommit: the same cut, but the statement's
// backend dies before it commits. The request is settled as not run by
// the void receipt, which burns the marque.
func TestConnectionCutBeforeCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sys, dsn := system(t, true, func(o *gatewaytest.Options) {
		o.Pilot.LockTimeout, o.Pilot.StatementTimeout = time.Minute, time.Minute
	})
	before := gatewaytest.Snapshot(t, dsn, "orders")
	blocker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM orders WHERE id = 3 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sys.Gateway.Submit(context.Background(), gatewaytest.Agent, gatewaytest.Target, "UPDATE orders SET status = 'retrying' WHERE id = 3")
		done <- err
	}()
	var pid int32
	waitFor(t, "the Pilot's statement to wait on the row lock", func() bool {
		err := blocker.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&pid)
		return err == nil
	})
	sys.Relay.Cut()
	if err := <-done; !errors.Is(err, pilot.ErrCommitUnknown) {
		t.Fatalf("Submit after the cut: %v; want ErrCommitUnknown", err)
	}
	id := lastRequest(t, sys.Logbook)
	if _, err := blocker.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := sys.Gateway.Reconcile(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("reconcile: %d, %v; want 1 resolved", n, err)
	}
	v, err := sys.Gateway.Request(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusWaiting || !strings.Contains(strings.Join(v.Reasons, " "), "did not run") {
		t.Fatalf("reconciled as %+v, want referred: did not run", v)
	}
	if gatewaytest.Snapshot(t, dsn, "orders") != before || gatewaytest.Receipts(t, dsn) != 0 {
		t.Fatal("the statement ran")
	}
	sys.Verify(t)
}

func lastRequest(t *testing.T, lb *logbook.Logbook) string {
	t.Helper()
	ds, err := lb.Find(context.Background(), logbook.Query{Kind: "decision"})
	if err != nil || len(ds) == 0 {
		t.Fatalf("no decision entry: %v", err)
	}
	return ds[len(ds)-1].Subjects["request"]
}

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
