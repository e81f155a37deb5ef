package switches_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// clock is a manual clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, storeOptions(path)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func storeOptions(path string) []store.Option {
	return storetest.Location{Driver: map[bool]store.Driver{true: store.Postgres, false: store.SQLite}[store.IsPostgresURL(path)]}.Options()
}

// pg serves the stores of the PostgreSQL pass (storetest.EnvDriver).
var pg pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Run(m)) }

// newLocation is a fresh store of the driver this pass tests.
func newLocation(t *testing.T) storetest.Location {
	t.Helper()
	return storetest.New(t, storetest.FromEnv(t), &pg)
}

var (
	deployment = switches.Key{Name: switches.TierB, Scope: switches.Deployment}
	shop       = switches.Key{Name: switches.TierB, Scope: switches.TargetScope("shop")}
	other      = switches.Key{Name: switches.TierB, Scope: switches.TargetScope("other")}
)

func set(t *testing.T, st *store.Store, k switches.Key, on bool, c *clock) {
	t.Helper()
	if err := switches.Set(context.Background(), st, k, on, "alice", c.Now()); err != nil {
		t.Fatal(err)
	}
}

func poll(t *testing.T, p *switches.Poller) {
	t.Helper()
	if err := p.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func wantTierB(t *testing.T, p *switches.Poller, target string, want bool, why string) {
	t.Helper()
	on, reason := p.TierBOn(target)
	if on != want {
		t.Fatalf("TierBOn(%s) = %v (%q), want %v", target, on, reason, want)
	}
	if !on && (reason == "" || why != "" && !strings.Contains(reason, why)) {
		t.Fatalf("TierBOn(%s) is off with reason %q, want one mentioning %q", target, reason, why)
	}
	if on && reason != "" {
		t.Fatalf("TierBOn(%s) is on with reason %q", target, reason)
	}
}

// TestTierBNeedsBothSwitches: off by default, off with only the deployment
// or only the target switch, on with both, per target; a change takes
// effect at the next poll and not before.
func TestTierBNeedsBothSwitches(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := openStore(t, newLocation(t).Path)
	p := switches.New(st, switches.Config{Clock: c.Now})

	wantTierB(t, p, "shop", false, "not been read")
	poll(t, p)
	wantTierB(t, p, "shop", false, "deployment")
	if n := len(p.Snapshot()); n != 0 {
		t.Fatalf("an empty store has %d switches", n)
	}

	set(t, st, deployment, true, c)
	wantTierB(t, p, "shop", false, "deployment") // not polled yet
	poll(t, p)
	wantTierB(t, p, "shop", false, "target shop")

	set(t, st, shop, true, c)
	poll(t, p)
	wantTierB(t, p, "shop", true, "")
	wantTierB(t, p, "other", false, "target other")

	// Only the target switch: off.
	set(t, st, deployment, false, c)
	wantTierB(t, p, "shop", true, "") // the flip is seen at the next poll
	poll(t, p)
	wantTierB(t, p, "shop", false, "deployment")

	// Another target's switch does not turn shop on.
	set(t, st, shop, false, c)
	set(t, st, other, true, c)
	set(t, st, deployment, true, c)
	poll(t, p)
	wantTierB(t, p, "shop", false, "target shop")
	wantTierB(t, p, "other", true, "")

	states := map[switches.Key]switches.State{}
	for _, s := range p.Snapshot() {
		states[s.Key] = s
	}
	if len(states) != 3 || !states[deployment].On || states[shop].On || !states[other].On || states[shop].UpdatedBy != "alice" ||
		!states[shop].UpdatedAt.Equal(c.Now()) {
		t.Fatalf("snapshot %+v", states)
	}
	if err := switches.Set(context.Background(), st, switches.Key{Name: "tier_c", Scope: switches.Deployment}, true, "alice", c.Now()); !errors.Is(err, switches.ErrUnknown) {
		t.Fatalf("setting an unknown switch: %v", err)
	}
}

// TestStaleSwitchesTurnTierBOff: a node whose store stops answering keeps
// its last good read for three intervals, then treats Tier B as off; a good
// read turns it back on.
func TestStaleSwitchesTurnTierBOff(t *testing.T) {
	t.Parallel()
	c := newClock()
	path := newLocation(t).Path
	writer := openStore(t, path)
	set(t, writer, deployment, true, c)
	set(t, writer, shop, true, c)

	// The node reads through its own connection to the store.
	node, err := store.Open(context.Background(), path, storeOptions(path)...)
	if err != nil {
		t.Fatal(err)
	}
	const interval = 500 * time.Millisecond
	p := switches.New(node, switches.Config{Clock: c.Now, Interval: interval})
	if p.Interval() != interval {
		t.Fatalf("interval %s", p.Interval())
	}
	poll(t, p)
	wantTierB(t, p, "shop", true, "")

	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		c.Advance(interval)
		if err := p.Poll(context.Background()); err == nil {
			t.Fatal("a poll of a closed store succeeded")
		}
		wantTierB(t, p, "shop", true, "") // within three intervals of the last good read
		if got := p.Failures(); got != int64(i) {
			t.Fatalf("failures %d, want %d", got, i)
		}
	}
	if p.Staleness() != 3*interval {
		t.Fatalf("staleness %s, want %s", p.Staleness(), 3*interval)
	}
	c.Advance(time.Nanosecond)
	wantTierB(t, p, "shop", false, "could not be read")

	// The node's store comes back: the next good read turns Tier B on again.
	p2 := switches.New(writer, switches.Config{Clock: c.Now, Interval: interval})
	wantTierB(t, p2, "shop", false, "not been read")
	if p2.Staleness() < 100*365*24*time.Hour {
		t.Fatalf("staleness before any read: %s", p2.Staleness())
	}
	poll(t, p2)
	wantTierB(t, p2, "shop", true, "")
	if p2.Staleness() != 0 {
		t.Fatalf("staleness just after a read: %s", p2.Staleness())
	}
}

// TestStaleWithoutFailures: even without failed polls (a poller that
// stopped running), a read older than three intervals turns Tier B off.
func TestStaleWithoutFailures(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := openStore(t, newLocation(t).Path)
	set(t, st, deployment, true, c)
	set(t, st, shop, true, c)
	p := switches.New(st, switches.Config{Clock: c.Now}) // 1s by default
	if p.Interval() != time.Second {
		t.Fatalf("default interval %s", p.Interval())
	}
	poll(t, p)
	c.Advance(3 * time.Second)
	wantTierB(t, p, "shop", true, "")
	c.Advance(time.Millisecond)
	wantTierB(t, p, "shop", false, "could not be read")
	poll(t, p)
	wantTierB(t, p, "shop", true, "")
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want time.Duration
	}{{0, time.Second}, {-time.Second, time.Second}, {2 * time.Second, time.Second}, {100 * time.Millisecond, 100 * time.Millisecond}} {
		got := switches.Config{Interval: c.in}.WithDefaults()
		if got.Interval != c.want || got.StaleAfter != 3 || got.Clock == nil || got.Logger == nil {
			t.Errorf("Config{Interval: %s}.WithDefaults() = %+v", c.in, got)
		}
	}
}

// TestRunPolls: Run polls on its own until its context ends.
func TestRunPolls(t *testing.T) {
	t.Parallel()
	c := newClock()
	st := openStore(t, newLocation(t).Path)
	// Polls every 250 ms, which is also each read's timeout: a store
	// slowed by a busy machine (CI runs this against PostgreSQL beside
	// other suites, where a read that opens a connection took over 20 ms
	// every time) still answers within it. A read stays good for 100 of
	// them: staleness is tested apart.
	p := switches.New(st, switches.Config{Interval: 250 * time.Millisecond, StaleAfter: 100})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	set(t, st, deployment, true, c)
	set(t, st, shop, true, c)
	deadline := time.Now().Add(time.Minute)
	for on, why := p.TierBOn("shop"); !on; on, why = p.TierBOn("shop") {
		if time.Now().After(deadline) {
			t.Fatalf("Run never saw the switches: %s", why)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
