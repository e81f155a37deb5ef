package faults_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestCheckCatches breaks each invariant by hand and requires the check to
// say so: a check that cannot fail proves nothing.
func TestCheckCatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: gatewaytest.NewKeys(t)})
	y := tallyDelegation(t)
	sig := gatewaytest.Sign(t, sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, y, sys.Pilot.Catalog()))
	if _, _, err := sys.Gateway.AddDelegation(ctx, y, sig, "tally.yaml"); err != nil {
		t.Fatal(err)
	}
	submit := func(sql, want string) *gateway.Response {
		r, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
		if err != nil || r.Outcome != want {
			t.Fatalf("%s: %+v %v, want %s", sql, r, err, want)
		}
		return r
	}
	ran := submit(incr(1), gateway.OutcomeExecuted)
	waiting := submit(noted(2), gateway.OutcomeReferred)
	readResp := submit(read(3), gateway.OutcomeExecuted)
	sys.Gateway.Drain()

	answered := map[string]string{ran.RequestID: ran.Outcome, waiting.RequestID: waiting.Outcome}
	run := func() []string {
		t.Helper()
		rep, err := faults.Check{Store: sys.Store, Origin: sys.Opts.Logbook.Origin, Verifier: sys.CheckpointVerifier,
			TargetDSN: dsn, Answered: answered}.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return append(rep.Violations, tallyViolations(t, dsn, rep)...)
	}
	if _, err := sys.Logbook.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if v := run(); len(v) != 0 {
		t.Fatalf("an intact deployment has violations: %q", v)
	}

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	storeExec := func(sql string, args ...any) {
		t.Helper()
		if _, err := sys.Store.OpsDB().ExecContext(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, want   string
		break_, mend func()
	}{
		{"a statement ran twice", "tally row 1 is 2",
			func() { exec("UPDATE tally SET n = n + 1 WHERE id = 1") },
			func() { exec("UPDATE tally SET n = n - 1 WHERE id = 1") }},
		{"a receipt for a request that is not executed", "which is not executed under it",
			func() {
				exec(`INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path)
					VALUES ('m_forged', $1, 'agent:demo', 'shop', 'x', 'compiled')`, waiting.RequestID)
			},
			func() { exec("DELETE FROM harbormaster.receipts WHERE marque_id = 'm_forged'") }},
		{"an executed request without its receipt", "has no receipt",
			func() {
				exec("UPDATE harbormaster.receipts SET marque_id = 'm_moved' WHERE request_id = $1", ran.RequestID)
			},
			func() {
				var m string
				if err := sys.Store.ReadDB().QueryRowContext(ctx, "SELECT marque_id FROM requests WHERE id = ?", ran.RequestID).Scan(&m); err != nil {
					t.Fatal(err)
				}
				exec("UPDATE harbormaster.receipts SET marque_id = $1 WHERE request_id = $2", m, ran.RequestID)
			}},
		{"a receipt under a read that says it wrote none", "is executed without a receipt, per its execution entry",
			func() {
				var m string
				if err := sys.Store.ReadDB().QueryRowContext(ctx, "SELECT marque_id FROM requests WHERE id = ?", readResp.RequestID).Scan(&m); err != nil {
					t.Fatal(err)
				}
				exec(`INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path)
					VALUES ($1, $2, 'agent:demo', 'shop', 'x', 'compiled')`, m, readResp.RequestID)
			},
			func() { exec("DELETE FROM harbormaster.receipts WHERE request_id = $1", readResp.RequestID) }},
		{"a request left running", "still running",
			func() { storeExec("UPDATE requests SET status = 'running' WHERE id = ?", waiting.RequestID) },
			func() { storeExec("UPDATE requests SET status = 'waiting' WHERE id = ?", waiting.RequestID) }},
		{"an agent told executed for a request that did not run", "was answered executed",
			func() { answered[waiting.RequestID] = gateway.OutcomeExecuted },
			func() { answered[waiting.RequestID] = gateway.OutcomeReferred }},
	} {
		c.break_()
		v := run()
		if !strings.Contains(strings.Join(v, "\n"), c.want) {
			t.Errorf("%s: violations %q, want one saying %q", c.name, v, c.want)
		}
		c.mend()
		if v := run(); len(v) != 0 {
			t.Fatalf("%s: mended, yet violations %q", c.name, v)
		}
	}
}
