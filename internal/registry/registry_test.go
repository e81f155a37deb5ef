package registry_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/registry"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// expires is examples/unstick-orders.yaml's expiry; the tests ask the
// registry about instants around it.
var expires = time.Date(2027, 12, 31, 0, 0, 0, 0, time.UTC)

// openStore opens a SQLite control store, shared by every registry
// (node) a test opens on it.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "control.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// example compiles examples/unstick-orders.yaml against examples/shop.sql
// into a delegation, as the gateway does before it verifies the
// signature (which the registry takes as verified).
func example(t *testing.T) *registry.Delegation {
	t.Helper()
	ddl, err := examples.FS.ReadFile("shop.sql")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcheck.ParseSchemaDDL(string(ddl), nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := examples.FS.ReadFile("unstick-orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dy, err := bound.Parse(y, "unstick-orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, rep := bound.Compile(dy, cat, bound.Options{Now: func() time.Time { return expires.Add(-24 * time.Hour) }})
	if !rep.Signable {
		t.Fatalf("the example is not signable: %+v", rep.Problems)
	}
	canonical, err := b.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	d, err := registry.NewDelegation(canonical, []byte("signature"), "grantor", "unstick-orders.yaml", expires.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func open(t *testing.T, st *store.Store, cfg registry.Config) *registry.Registry {
	t.Helper()
	r, err := registry.New(context.Background(), cfg, st)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRevocationIsFinal: a delegation added through one node reaches
// another at its next Refresh; a revocation whose record fails stores
// nothing; a revocation reaches the other node, which keeps the
// delegation (nothing is removed) revoked; a second revocation is refused
// without recording anything; adding it again keeps it revoked.
func TestRevocationIsFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	one, two := open(t, st, registry.Config{}), open(t, st, registry.Config{})
	d := example(t)
	at := expires.Add(-time.Hour)

	held, err := one.Add(ctx, d)
	if err != nil || held != d {
		t.Fatalf("Add: %v, %v; want d", held, err)
	}
	if again, err := one.Add(ctx, example(t)); err != nil || again != d {
		t.Fatalf("adding it again: %v, %v; want the one held", again, err)
	}
	if got := two.InForce(d.Grantee, d.Target, at); len(got) != 0 {
		t.Fatalf("another node before its refresh: %d in force", len(got))
	}
	if err := two.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := two.InForce(d.Grantee, d.Target, at); len(got) != 1 || got[0].ID != d.ID {
		t.Fatalf("another node after its refresh: %v", got)
	}
	if got := two.InForce(d.Grantee, "other", at); len(got) != 0 {
		t.Fatalf("in force on another target: %v", got)
	}

	fail := errors.New("the logbook cannot be written")
	if err := one.Revoke(ctx, d, at, "grantor", "act", func() error { return fail }); !errors.Is(err, fail) {
		t.Fatalf("a revocation whose record fails: %v", err)
	}
	if err := two.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if one.Revoked(d) != nil || !one.IsInForce(d, at) || len(two.InForce(d.Grantee, d.Target, at)) != 1 {
		t.Fatal("a revocation that was not recorded took effect")
	}

	if err := one.Revoke(ctx, d, at, "grantor", "act", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if r := one.Revoked(d); r == nil || !r.Equal(at) || one.IsInForce(d, at) || len(one.InForce(d.Grantee, d.Target, at)) != 0 {
		t.Fatalf("after the revocation: revoked %v", r)
	}
	recorded := false
	if err := one.Revoke(ctx, d, at, "grantor", "act", func() error { recorded = true; return nil }); !errors.Is(err, registry.ErrAlreadyRevoked) || recorded {
		t.Fatalf("revoking twice: %v (recorded: %v); want ErrAlreadyRevoked, nothing recorded", err, recorded)
	}

	if err := two.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	other := two.Delegation(d.ID)
	if other == nil || two.Revoked(other) == nil || len(two.Delegations("")) != 1 || len(two.InForce(d.Grantee, d.Target, at)) != 0 {
		t.Fatalf("another node after the revocation: %+v, %d delegations", other, len(two.Delegations("")))
	}
	if _, err := two.Add(ctx, example(t)); err != nil {
		t.Fatal(err)
	}
	if two.Revoked(other) == nil || len(two.Delegations(d.Grantee)) != 1 || len(two.Delegations("agent:other")) != 0 {
		t.Fatal("adding a revoked delegation again brought it back")
	}
	// A node started after the revocation reads it as revoked.
	if three := open(t, st, registry.Config{}); three.Revoked(three.Delegation(d.ID)) == nil {
		t.Fatal("a new node holds the delegation unrevoked")
	}
}

// TestStale: nothing is stale until the delegations service runs (Watch);
// then the delegations are, once the last good read is older than
// Config.Stale, and are fresh again after a good read.
func TestStale(t *testing.T) {
	t.Parallel()
	var later atomic.Int64
	r := open(t, openStore(t), registry.Config{Stale: 10 * time.Second,
		Now: func() time.Time { return time.Now().Add(time.Duration(later.Load())) }})
	later.Store(int64(time.Minute))
	if why := r.Stale(); why != "" {
		t.Fatalf("stale with no delegations service: %q", why)
	}
	r.Watch()
	if why := r.Stale(); !strings.Contains(why, "the delegations could not be read from the store for 1m") {
		t.Fatalf("a minute after the last read: %q", why)
	}
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if why := r.Stale(); why != "" {
		t.Fatalf("after a good read: %q", why)
	}
}

// TestClockSkew: while the store's clock is ahead of this node's beyond
// the leeway, a delegation is in force only if it is at both clocks, and
// an expiry has passed if it has at either; within the leeway, or with no
// store clock, this node's clock decides alone.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var offset atomic.Int64
	st := openStore(t)
	r := open(t, st, registry.Config{ClockLeeway: 2 * time.Second,
		StoreClock: func(context.Context) (time.Time, error) { return time.Now().Add(time.Duration(offset.Load())), nil }})
	d, err := r.Add(ctx, example(t))
	if err != nil {
		t.Fatal(err)
	}
	now := expires.Add(-3 * time.Minute)
	tests := []struct {
		name   string
		offset time.Duration
		in     bool
	}{
		{"clocks agree", 0, true},
		{"within the leeway", time.Second, true},
		{"the store five minutes ahead", 5 * time.Minute, false},
		{"the store five minutes behind", -5 * time.Minute, true},
		{"clocks agree again", 0, true},
	}
	for _, tt := range tests { // in order: one registry, measured again each time
		offset.Store(int64(tt.offset))
		if err := r.MeasureClock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(r.InForce(d.Grantee, d.Target, now)); got != map[bool]int{true: 1, false: 0}[tt.in] || r.IsInForce(d, now) != tt.in {
			t.Errorf("%s: %d in force, IsInForce %v; want in force %v", tt.name, got, r.IsInForce(d, now), tt.in)
		}
		if got := r.ExpiredAt(expires, now); got == tt.in {
			t.Errorf("%s: ExpiredAt %v, want %v", tt.name, got, !tt.in)
		}
	}

	// Without a store clock there is nothing to measure.
	alone := open(t, st, registry.Config{})
	if err := alone.MeasureClock(ctx); err != nil || !alone.IsInForce(alone.Delegation(d.ID), now) || alone.ExpiredAt(expires, now) {
		t.Fatalf("no store clock: %v", err)
	}
	if !alone.ExpiredAt(expires, expires) || alone.IsInForce(alone.Delegation(d.ID), expires) {
		t.Fatal("at its expiry the delegation is still in force")
	}
}
