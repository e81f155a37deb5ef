package gateway_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// checkNothingRan: the Pilot never saw the request (no marque, no
// execution entries) and its only logbook entry is its decision.
func checkNothingRan(t *testing.T, f *fixture, id string) {
	t.Helper()
	v := f.view(t, id)
	if v.MarqueID != "" || v.Status != gateway.StatusWaiting {
		t.Fatalf("%s: %+v, want waiting with no marque", id, v)
	}
	if got := strings.Join(kinds(entries(t, f.sys.Logbook, id)), ","); got != "decision" {
		t.Fatalf("%s: entries %s, want only its decision", id, got)
	}
}

// TestDelegationQuota: a delegation's signed quota (3/minute) lets three
// fast-path statements run; the fourth is referred with the quota reason
// and never reaches the Pilot; referred statements take no token; tokens
// come back with time.
func TestDelegationQuota(t *testing.T) {
	t.Parallel()
	clk := newManualClock()
	f := newEmptyFixture(t, func(o *gatewaytest.Options) { o.Gateway.Clock = clk.Now })
	d := f.addDelegation(t, rewrite(t, gatewaytest.Example(t, gatewaytest.Orders), "quota: 120/hour", "quota: 3/minute"))
	if d.Bound.Quota == nil || d.Bound.Quota.Count != 3 {
		t.Fatalf("quota %+v", d.Bound.Quota)
	}

	// Referred statements, before and between, take no token.
	for i := range 5 {
		r := f.submit(t, gatewaytest.Agent, fmt.Sprintf("SELECT id, total_cents FROM orders WHERE id = %d", i+1))
		if r.Outcome != gateway.OutcomeReferred || strings.Contains(strings.Join(r.Reasons, " "), "quota") {
			t.Fatalf("a statement outside the bound: %+v", r)
		}
	}
	for i := range 3 {
		r := f.submit(t, gatewaytest.Agent, fmt.Sprintf("SELECT id, status FROM orders WHERE id = %d", i+1))
		if r.Outcome != gateway.OutcomeExecuted {
			t.Fatalf("fast-path statement %d of 3: %+v", i+1, r)
		}
		f.submit(t, gatewaytest.Agent, "DELETE FROM orders WHERE id = 1") // referred
	}
	receipts := f.ran(t)
	r := f.submit(t, gatewaytest.Agent, "SELECT id, status FROM orders WHERE id = 4")
	want := fmt.Sprintf("the fast-path quota of delegation %s (3/minute) is used up", d.ID)
	if r.Outcome != gateway.OutcomeReferred || len(r.Reasons) != 1 || !strings.HasPrefix(r.Reasons[0], want) {
		t.Fatalf("the fourth statement: %+v, want referred: %s", r, want)
	}
	checkNothingRan(t, f, r.RequestID)
	if f.ran(t) != receipts {
		t.Fatal("a statement over quota ran")
	}
	// The quota refusal is a referral a human can approve: it previews.
	if v := f.previewed(t, r.RequestID); v.PreviewSHA256 == "" {
		t.Fatalf("a quota referral has no preview: %s", v.PreviewError)
	}

	// One token per 20s.
	clk.Advance(19 * time.Second)
	if r := f.submit(t, gatewaytest.Agent, "SELECT id, status FROM orders WHERE id = 5"); r.Outcome != gateway.OutcomeReferred {
		t.Fatalf("19s later: %+v, want still referred", r)
	}
	clk.Advance(2 * time.Second)
	if r := f.submit(t, gatewaytest.Agent, "SELECT id, status FROM orders WHERE id = 5"); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("21s later: %+v, want executed", r)
	}
	if f.ran(t) != receipts+1 {
		t.Fatal("receipts do not match the statements that ran")
	}
	f.sys.Verify(t)
}

// TestPrincipalQuota: the configured per-principal quota spans all of the
// principal's delegations, refers with its own reason, and leaves other
// principals alone.
func TestPrincipalQuota(t *testing.T) {
	t.Parallel()
	clk := newManualClock()
	f := newFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.Clock = clk.Now
		o.Gateway.PrincipalQuota = map[string]quota.Rate{gatewaytest.Agent: {Count: 2, Per: time.Minute}}
	})
	forOther := rewrite(t, gatewaytest.Example(t, gatewaytest.Orders), "grantee: agent:demo", "grantee: agent:other")
	f.addDelegation(t, forOther)

	// Two fast-path statements under two different delegations.
	for _, sql := range []string{"SELECT id, status FROM orders WHERE id = 3", "SELECT id, name FROM customers WHERE region = 'EU'"} {
		if r := f.submit(t, gatewaytest.Agent, sql); r.Outcome != gateway.OutcomeExecuted {
			t.Fatalf("%q: %+v", sql, r)
		}
	}
	r := f.submit(t, gatewaytest.Agent, "SELECT id, name FROM customers WHERE region = 'EU'")
	want := "the fast-path quota of agent:demo is used up"
	if r.Outcome != gateway.OutcomeReferred || len(r.Reasons) != 1 || !strings.HasPrefix(r.Reasons[0], want) {
		t.Fatalf("the third statement: %+v, want referred: %s", r, want)
	}
	checkNothingRan(t, f, r.RequestID)
	// agent:other has no principal quota.
	for i := range 5 {
		if r := f.submit(t, gatewaytest.Other, "SELECT id, status FROM orders WHERE id = 3"); r.Outcome != gateway.OutcomeExecuted {
			t.Fatalf("agent:other, statement %d: %+v", i+1, r)
		}
	}
	clk.Advance(30 * time.Second)
	if r := f.submit(t, gatewaytest.Agent, "SELECT id, status FROM orders WHERE id = 3"); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("30s later: %+v", r)
	}
	if n := f.ran(t); n != 8 {
		t.Fatalf("%d receipts, want 8", n)
	}
}

// TestSwitchPropagation: a switch set through one node's gateway is in
// force on that node when SetSwitch returns, and reaches two other nodes
// (pollers with their own store connections, 100ms interval) within a few
// intervals. It reports the propagation time over 50 flips.
func TestSwitchPropagation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	const interval = 100 * time.Millisecond
	var nodes []*switches.Poller
	for range 2 {
		st, err := store.Open(ctx, f.sys.Store.Path(), f.sys.StoreOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		p := switches.New(st, switches.Config{Interval: interval})
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
		nodes = append(nodes, p)
	}
	gw := f.sys.Gateway
	target := switches.Key{Name: switches.TierB, Scope: switches.TargetScope(gatewaytest.Target)}
	if err := gw.SetSwitch(ctx, switches.Key{Name: switches.TierB, Scope: switches.Deployment}, true, "alice"); err != nil {
		t.Fatal(err)
	}

	const flips = 50
	var lat []time.Duration
	for i := range flips {
		on := i%2 == 0
		// A random phase against the nodes' polls, or every flip would
		// land just after the slower node's poll.
		time.Sleep(rand.N(interval))
		if err := gw.SetSwitch(ctx, target, on, "alice"); err != nil {
			t.Fatal(err)
		}
		set := time.Now()
		// The node that set it sees it at once.
		if got, why := f.sys.Switches.TierBOn(gatewaytest.Target); got != on {
			t.Fatalf("flip %d: this node's Tier B is %v (%s) right after SetSwitch(%v)", i, got, why, on)
		}
		deadline := set.Add(time.Minute)
		for {
			a, _ := nodes[0].TierBOn(gatewaytest.Target)
			b, _ := nodes[1].TierBOn(gatewaytest.Target)
			if a == on && b == on {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("flip %d to %v: not seen by both nodes within a minute", i, on)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(set))
	}
	slices.Sort(lat)
	t.Logf("switch propagation to two nodes polling every %s, %d flips: p50 %s, p99 %s, max %s",
		interval, flips, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))

	es, err := f.sys.Logbook.Find(ctx, logbook.Query{Kind: "switch"})
	if err != nil || len(es) != flips+1 {
		t.Fatalf("%d switch entries, want %d: %v", len(es), flips+1, err)
	}
	if p := payload(t, es[len(es)-1]); p["on"] != false || p["by"] != "alice" || p["scope"] != target.Scope {
		t.Fatalf("last switch entry %v", p)
	}
	// Every node agrees on the final state: off.
	for i, p := range append(nodes, f.sys.Switches) {
		if on, _ := p.TierBOn(gatewaytest.Target); on {
			t.Fatalf("node %d still has Tier B on", i)
		}
	}
}
