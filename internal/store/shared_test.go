package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

// TestDriversSharedQuota: the quota buckets in the store take one token
// from every bucket or from none, refill continuously, start full at a
// new rate, never refill when a node's clock is behind, and hold exactly
// across two nodes taking at once.
func TestDriversSharedQuota(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		s := loc.Open(t)
		now := time.Now().UnixNano()
		minute := int64(time.Minute)
		d := store.QuotaWant{Key: "delegation:d1", Count: 3, PerNS: minute}
		p := store.QuotaWant{Key: "principal:a", Count: 100, PerNS: minute}
		take := func(at int64, ws ...store.QuotaWant) string {
			t.Helper()
			empty, err := s.TakeQuota(ctx, at, ws)
			if err != nil {
				t.Fatal(err)
			}
			return empty
		}
		for i := range 3 {
			if e := take(now, d, p); e != "" {
				t.Fatalf("take %d: %s empty", i, e)
			}
		}
		if e := take(now, d, p); e != d.Key {
			t.Fatalf("the fourth take: empty %q, want %s", e, d.Key)
		}
		// All or nothing: the principal's bucket kept its tokens.
		for i := range 97 {
			if e := take(now, p); e != "" {
				t.Fatalf("principal take %d: %s empty (a failed take spent its token)", i, e)
			}
		}
		if e := take(now, p); e != p.Key {
			t.Fatalf("the principal's bucket after 100: %q", e)
		}
		// A node whose clock is behind refills nothing.
		if e := take(now-int64(time.Hour), d); e != d.Key {
			t.Fatalf("a clock behind refilled the bucket: %q", e)
		}
		// 20 s later one token is back (3 per minute).
		if e := take(now+int64(20*time.Second)+1, d); e != "" {
			t.Fatalf("after 20 s: %q", e)
		}
		if e := take(now+int64(20*time.Second)+2, d); e != d.Key {
			t.Fatalf("after 20 s, a second take: %q", e)
		}
		// A new rate starts full.
		d5 := store.QuotaWant{Key: d.Key, Count: 5, PerNS: minute}
		for i := range 5 {
			if e := take(now+int64(21*time.Second), d5); e != "" {
				t.Fatalf("new rate, take %d: %q", i, e)
			}
		}
		if e := take(now+int64(21*time.Second), d5); e != d.Key {
			t.Fatalf("new rate, sixth take: %q", e)
		}

		// Two nodes take at once from one bucket: exactly its count succeed.
		nodes := [2]*store.Store{s, loc.Open(t)}
		w := store.QuotaWant{Key: "delegation:shared", Count: 7, PerNS: int64(24 * time.Hour)}
		var ok atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for range 5 {
					empty, err := nodes[g%2].TakeQuota(ctx, now, []store.QuotaWant{w})
					if err != nil {
						t.Error(err)
						return
					}
					if empty == "" {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if ok.Load() != w.Count {
			t.Fatalf("%d of 40 concurrent takes succeeded across two nodes, want %d", ok.Load(), w.Count)
		}
		if _, err := s.TakeQuota(ctx, now, []store.QuotaWant{{Key: "bad", Count: 0, PerNS: 1}}); err == nil {
			t.Fatal("a rate of nothing was accepted")
		}
	})
}

// TestDriversExpiryClaimedOnce: one node of all on the store claims the
// logging of a delegation's expiry; a released claim can be taken again.
func TestDriversExpiryClaimedOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		a, b := loc.Open(t), loc.Open(t)
		if err := a.InsertDelegation(ctx, store.Delegation{ID: "dlg_1", Target: "shop", Grantee: "agent:a", Signer: "alice",
			Canonical: "{}", Signature: "sig", CreatedNS: 1}); err != nil {
			t.Fatal(err)
		}
		first, err := a.ClaimDelegationExpiry(ctx, "dlg_1", 2)
		if err != nil || !first {
			t.Fatalf("first claim: %v, %v", first, err)
		}
		if again, err := b.ClaimDelegationExpiry(ctx, "dlg_1", 3); err != nil || again {
			t.Fatalf("a second node's claim: %v, %v; want refused", again, err)
		}
		if err := a.ReleaseDelegationExpiry(ctx, "dlg_1"); err != nil {
			t.Fatal(err)
		}
		if again, err := b.ClaimDelegationExpiry(ctx, "dlg_1", 4); err != nil || !again {
			t.Fatalf("after a release: %v, %v", again, err)
		}
		clock := a.Clock()
		if (a.Driver() == store.Postgres) != (clock != nil) {
			t.Fatalf("driver %s, clock %v", a.Driver(), clock != nil)
		}
		if clock != nil {
			st, err := clock(ctx)
			if err != nil || st.Sub(time.Now()).Abs() > 5*time.Second {
				t.Fatalf("the store's clock: %v, %v", st, err)
			}
		}
	})
}

// TestDriversClaimed: Claimed sees a claim until it expires, and never
// claims anything itself.
func TestDriversClaimed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		s := loc.Open(t)
		now := time.Now().UnixNano()
		claimed := func(d string, at int64) bool {
			t.Helper()
			ok, err := s.Claimed(ctx, d, at)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if claimed("d1", now) {
			t.Fatal("an unclaimed digest is claimed")
		}
		if ok, err := s.ClaimRequest(ctx, "d1", now, now+int64(time.Minute)); err != nil || !ok {
			t.Fatalf("the first claim: %v %v", ok, err)
		}
		if !claimed("d1", now) || !claimed("d1", now+int64(time.Minute)) {
			t.Error("a claim is not seen before it expires")
		}
		if claimed("d1", now+int64(time.Minute)+1) {
			t.Error("an expired claim is seen")
		}
		if claimed("d2", now) {
			t.Error("Claimed sees another digest's claim")
		}
		if ok, err := s.ClaimRequest(ctx, "d2", now, now+int64(time.Minute)); err != nil || !ok {
			t.Errorf("Claimed took the claim it only looked at: %v %v", ok, err)
		}
	})
}
