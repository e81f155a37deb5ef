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

// TestDriversIdempotency: a key is claimed once per scope across nodes,
// shows its first fingerprint and answer to the next claimant, is scoped
// per principal, can be released, and starts afresh once expired.
func TestDriversIdempotency(t *testing.T) {
	t.Parallel()
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		t.Parallel()
		ctx := context.Background()
		s := loc.Open(t)
		now := time.Now().UnixNano()
		day := int64(24 * time.Hour)

		e, first, err := s.BeginIdempotent(ctx, "agent:a", "k1", "fp1", now, now+day)
		if err != nil || !first || e.State != store.IdempotencyRunning {
			t.Fatalf("first begin: %+v %v %v", e, first, err)
		}
		// Another node, same key: running, with the first fingerprint.
		other := loc.Open(t)
		e, first, err = other.BeginIdempotent(ctx, "agent:a", "k1", "fp2", now+1, now+day)
		if err != nil || first || e.State != store.IdempotencyRunning || e.Fingerprint != "fp1" {
			t.Fatalf("second begin: %+v %v %v", e, first, err)
		}
		// Another principal's same key is its own.
		if _, first, err := s.BeginIdempotent(ctx, "agent:b", "k1", "fp1", now, now+day); err != nil || !first {
			t.Fatalf("another scope: %v %v", first, err)
		}
		if err := s.CompleteIdempotent(ctx, "agent:a", "k1", 200, `{"ok":true}`, now+day); err != nil {
			t.Fatal(err)
		}
		if err := s.CompleteIdempotent(ctx, "agent:a", "k1", 500, `{}`, now+day); err == nil {
			t.Fatal("a done key completed twice")
		}
		e, first, err = other.BeginIdempotent(ctx, "agent:a", "k1", "fp1", now+2, now+day)
		if err != nil || first || e.State != store.IdempotencyDone || e.Status != 200 || e.Body != `{"ok":true}` {
			t.Fatalf("after complete: %+v %v %v", e, first, err)
		}
		// Release: only a running key, and then it is free.
		if err := s.ReleaseIdempotent(ctx, "agent:a", "k1"); err != nil {
			t.Fatal(err)
		}
		if _, first, _ := s.BeginIdempotent(ctx, "agent:a", "k1", "fp1", now+3, now+day); first {
			t.Fatal("releasing a done key dropped it")
		}
		if err := s.ReleaseIdempotent(ctx, "agent:b", "k1"); err != nil {
			t.Fatal(err)
		}
		if _, first, err := s.BeginIdempotent(ctx, "agent:b", "k1", "fp9", now+4, now+day); err != nil || !first {
			t.Fatalf("after release: %v %v", first, err)
		}
		// Expired: a later begin starts afresh.
		if _, first, err := s.BeginIdempotent(ctx, "agent:a", "k1", "fp3", now+day+1, now+2*day); err != nil || !first {
			t.Fatalf("after expiry: %v %v", first, err)
		}

		// Eight claimants at once on two nodes: exactly one is first.
		nodes := [2]*store.Store{s, other}
		var firsts atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, first, err := nodes[g%2].BeginIdempotent(ctx, "agent:c", "race", "fp", now, now+day)
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := firsts.Load(); n != 1 {
			t.Fatalf("%d claimants were first, want 1", n)
		}
	})
}
