package gateway_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

const readOrder = "SELECT id, status FROM orders WHERE id = 3"

// eventually submits sql until its outcome is want, for up to 5 s.
func (f *fixture) eventually(t *testing.T, sql, want string) *gateway.Response {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := f.submit(t, gatewaytest.Agent, sql)
		if r.Outcome == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: still %s (%v) after 5 s, want %s", sql, r.Outcome, r.Reasons, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDelegationsFromAnotherNode: a delegation another node added to the
// shared store, and then its revocation there, reach this node through
// its delegations service within a few seconds, with no restart.
func TestDelegationsFromAnotherNode(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, nil)
	ctx := context.Background()
	if r := f.submit(t, gatewaytest.Agent, readOrder); r.Outcome != gateway.OutcomeReferred {
		t.Fatalf("before any delegation: %+v", r)
	}
	canonical := gatewaytest.Canonical(t, gatewaytest.Example(t, gatewaytest.Orders), f.sys.Pilot.Catalog())
	sig := gatewaytest.Sign(t, f.sys.Opts.Keys.Grantor, canonical)
	b, err := bound.ParseCanonical(canonical)
	if err != nil {
		t.Fatal(err)
	}
	id := bound.ID(canonical)
	signer, err := f.sys.Opts.Keys.Signers.Verify(canonical, sig, signing.NamespaceDelegation, b.Target, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// What AddDelegation on another node leaves in the store.
	if err := f.sys.Store.InsertDelegation(ctx, store.Delegation{ID: id, Target: b.Target, Grantee: b.Grantee, Signer: signer.Name,
		Canonical: string(canonical), Signature: string(sig), Source: "node-2", CreatedNS: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	if r := f.eventually(t, readOrder, gateway.OutcomeExecuted); r.DelegationID != id {
		t.Fatalf("ran under %s, want %s", r.DelegationID, id)
	}
	// What Revoke on another node leaves in the store.
	if err := f.sys.Store.RevokeDelegation(ctx, id, time.Now().UnixNano(), signer.Name, "revocation and signature"); err != nil {
		t.Fatal(err)
	}
	f.eventually(t, readOrder, gateway.OutcomeReferred)
	if d := f.sys.Gateway.Registry().Delegation(id); d == nil || d.Revoked == nil || len(f.sys.Gateway.Registry().Delegations("")) != 1 {
		t.Fatalf("after the revocation elsewhere: %+v, %d delegations", d, len(f.sys.Gateway.Registry().Delegations("")))
	}
}

// TestStaleDelegationsStopTheFastPath: a node that has not read the
// delegations for longer than the staleness bound runs nothing (another
// node may have revoked what it holds), says why, and runs again after
// its next good read.
func TestStaleDelegationsStopTheFastPath(t *testing.T) {
	t.Parallel()
	var later atomic.Int64 // how far this node's clock of durations is moved on
	f := newFixture(t, func(o *gatewaytest.Options) {
		// The service never ticks by itself in this test.
		o.Gateway.Services = gateway.Services{Delegations: time.Hour, DelegationsStale: 10 * time.Second}
		o.Gateway.LocalClock = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	})
	if r := f.submit(t, gatewaytest.Agent, readOrder); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("fresh: %+v", r)
	}
	// A minute passes with no good read, as a store that stopped
	// answering would leave it.
	later.Store(int64(time.Minute))
	before := f.ran(t)
	r := f.submit(t, gatewaytest.Agent, readOrder)
	if r.Outcome != gateway.OutcomeReferred || len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "the delegations could not be read from the store for 1m") {
		t.Fatalf("stale: %+v", r)
	}
	if f.ran(t) != before {
		t.Fatal("a stale node ran a statement")
	}
	if err := f.sys.Gateway.Registry().Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := f.submit(t, gatewaytest.Agent, readOrder); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("after a good read: %+v", r)
	}
}

// TestSharedQuotaAcrossNodes: with the quota buckets in the store, a
// delegation's signed quota holds exactly across two nodes: of ten
// statements sent through both, three run (the quota is 3/minute) and the
// rest are referred with the quota's reason. Without shared buckets each
// node would run three.
func TestSharedQuotaAcrossNodes(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, func(o *gatewaytest.Options) { o.SharedQuota = true })
	f.addDelegation(t, rewrite(t, gatewaytest.Example(t, gatewaytest.Orders), "quota: 120/hour\n", "quota: 3/minute\n"))
	other := f.sys.OtherNode(t)
	ctx := context.Background()
	ran := 0
	for i := range 10 {
		g := f.sys.Gateway
		if i%2 == 1 {
			g = other
		}
		r, err := g.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, readOrder)
		if err != nil {
			t.Fatal(err)
		}
		switch r.Outcome {
		case gateway.OutcomeExecuted:
			ran++
		case gateway.OutcomeReferred:
			if len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "(3/minute) is used up") {
				t.Fatalf("statement %d referred for %v, want the quota", i, r.Reasons)
			}
		}
	}
	if ran != 3 {
		t.Fatalf("%d statements ran across two nodes, want 3 (the shared quota)", ran)
	}
}

// TestUnreachableTargetRefers: when the Pilot cannot reach its target,
// nothing runs and the agent is answered as for any referral (outcome
// referred, its request id, the fixed reason), not with a server error;
// the request waits for a human.
func TestUnreachableTargetRefers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	admin := f.conn(t)
	var db string
	if err := admin.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	// Another session of the same server, outside the target database.
	cfg := admin.Config().Copy()
	cfg.Database = "postgres"
	ops, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close(ctx)
	if _, err := ops.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if _, err := ops.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` ALLOW_CONNECTIONS true`); err != nil {
			t.Fatal(err)
		}
	}
	defer restore()
	if _, err := ops.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // past the pool's ping-on-acquire idle time
	r, err := f.sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, readOrder)
	if err != nil {
		t.Fatalf("an unreachable target: %v; want a referral", err)
	}
	if r.Outcome != gateway.OutcomeReferred || r.RequestID == "" || len(r.Reasons) != 1 || r.Reasons[0] != gateway.ReasonUnreachable {
		t.Fatalf("an unreachable target: %+v; want referred with %q", r, gateway.ReasonUnreachable)
	}
	v, err := f.sys.Gateway.Request(ctx, r.RequestID, "")
	if err != nil || v.Status != gateway.StatusWaiting || v.Detail == "" {
		t.Fatalf("the request: %+v, %v; want waiting, with the error for humans", v, err)
	}
	restore()
	if n := f.ran(t); n != 0 {
		t.Fatalf("%d receipts: something ran", n)
	}
}

// TestReconcileAndASlowApprovalAgree: an approval claimed by one node that
// has not yet recorded its marque when another node's reconciliation finds
// it (its store stalled past the grace) is settled exactly once: either the
// reconciliation sets it waiting and the slow node then runs nothing, or
// the slow node records its marque first and the reconciliation leaves it
// alone. Found by the fault suite (store-down): the reconciliation used to
// set it waiting while the slow node went on to run it.
func TestReconcileAndASlowApprovalAgree(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	other := f.sys.OtherNode(t)
	rq, err := store.NewRequests(ctx, f.sys.Store)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(id string) {
		t.Helper()
		// What Approve's claim leaves: running on the approved path, no marque yet.
		ok, err := rq.Decide(ctx, id, store.RequestStatus(gateway.StatusWaiting), store.Decision{Status: store.RequestStatus(gateway.StatusRunning), Path: "approved",
			DecidedBy: "bob", Act: "act", ActSignature: "sig", UpdatedNS: time.Now().Add(-time.Hour).UnixNano()})
		if err != nil || !ok {
			t.Fatalf("claim %s: %v, %v", id, ok, err)
		}
	}

	// The reconciliation first: the slow node then runs nothing.
	a := f.referred(t, "UPDATE orders SET status = 'failed' WHERE id = 45")
	claim(a.ID)
	// Either node's periodic reconciliation (every second) may settle it
	// before this call does: what matters is that it is settled, once.
	if n, err := other.Reconcile(ctx, time.Minute); err != nil || n > 1 {
		t.Fatalf("the other node's reconciliation: %d, %v; want it settled once", n, err)
	}
	if err := f.sys.Gateway.RecordMarque(ctx, a.ID, gatewaytest.Target, a.MarqueID, "mrq_slow"); err == nil {
		t.Fatal("the slow node recorded its marque on a request settled meanwhile")
	}
	if v, err := f.sys.Gateway.Request(ctx, a.ID, ""); err != nil || v.Status != gateway.StatusWaiting || v.MarqueID != a.MarqueID {
		t.Fatalf("after both: status %s marque %s, %v; want waiting under the fast path's refused marque %s", v.Status, v.MarqueID, err, a.MarqueID)
	}

	// The slow node first: the reconciliation leaves it to the receipt.
	b := f.referred(t, "UPDATE orders SET status = 'failed' WHERE id = 46")
	claim(b.ID)
	if err := f.sys.Gateway.RecordMarque(ctx, b.ID, gatewaytest.Target, b.MarqueID, "mrq_first"); err != nil {
		t.Fatal(err)
	}
	if n, err := other.Reconcile(ctx, time.Minute); err != nil || n != 0 {
		t.Fatalf("the reconciliation after the marque was recorded: %d, %v; want nothing settled (the marque was recorded just now)", n, err)
	}
	if v, err := f.sys.Gateway.Request(ctx, b.ID, ""); err != nil || v.Status != gateway.StatusRunning || v.MarqueID != "mrq_first" {
		t.Fatalf("after both: %+v, %v; want running under the marque", v, err)
	}
}
