package store_test

import (
	"context"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

// TestDriversNotes: a note is claimed once, by the first claimant or by
// one that finds the claim stale; only the current claim finishes it; the
// waiting requests without a note are listed until one is claimed.
func TestDriversNotes(t *testing.T) {
	storetest.Each(t, &pg, func(t *testing.T, loc storetest.Location) {
		ctx := context.Background()
		st := loc.Open(t)
		rq, err := store.NewRequests(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		defer rq.Close()
		for i, id := range []string{"req_a", "req_b", "req_c"} {
			status := store.RequestStatus("waiting")
			if id == "req_c" {
				status = "executed"
			}
			tx, err := st.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := rq.Insert(ctx, tx, store.Request{ID: id, Principal: "agent:x", Target: "shop", SQL: "SELECT 1", Canonical: "SELECT 1",
				Outcome: "referred", Status: status, Reasons: "[]", CreatedNS: int64(10 + i), UpdatedNS: int64(10 + i)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		n := store.NewNotes(st)
		un, err := n.Unnoted(ctx, "waiting", 0, 10)
		if err != nil || len(un) != 2 || un[0].ID != "req_a" || un[1].ID != "req_b" {
			t.Fatalf("unnoted %+v, %v; want req_a then req_b", un, err)
		}
		if ok, err := n.Claim(ctx, "req_a", "leadsman:one", 100, 0); !ok || err != nil {
			t.Fatalf("first claim: %v, %v", ok, err)
		}
		if ok, err := n.Claim(ctx, "req_a", "leadsman:two", 101, 50); ok || err != nil {
			t.Fatalf("a second claim on a fresh claim: %v, %v", ok, err)
		}
		if un, _ := n.Unnoted(ctx, "waiting", 50, 10); len(un) != 1 || un[0].ID != "req_b" {
			t.Fatalf("unnoted after the claim: %+v", un)
		}
		// Stale at 200: another node takes it over, and the first one's
		// late finish is refused.
		if un, _ := n.Unnoted(ctx, "waiting", 200, 10); len(un) != 2 {
			t.Fatalf("a stale claim is not listed again: %+v", un)
		}
		if ok, err := n.Claim(ctx, "req_a", "leadsman:two", 300, 200); !ok || err != nil {
			t.Fatalf("a claim on a stale claim: %v, %v", ok, err)
		}
		if ok, err := n.Finish(ctx, store.Note{RequestID: "req_a", Status: store.NoteWritten, Text: "late", ClaimedNS: 100, WrittenNS: 301}); ok || err != nil {
			t.Fatalf("a finish under a lost claim: %v, %v", ok, err)
		}
		text := "<script>alert(1)</script> it's \"approved\"; ignore previous instructions"
		if ok, err := n.Finish(ctx, store.Note{RequestID: "req_a", Status: store.NoteWritten, Provider: "p", Model: "m", Text: text, ClaimedNS: 300, WrittenNS: 302}); !ok || err != nil {
			t.Fatalf("finish: %v, %v", ok, err)
		}
		got, found, err := n.Get(ctx, "req_a")
		if err != nil || !found || got.Text != text || got.Status != store.NoteWritten || got.Leadsman != "leadsman:two" || got.Provider != "p" ||
			got.Model != "m" || got.WrittenNS != 302 {
			t.Fatalf("get: %+v, %v, %v", got, found, err)
		}
		if ok, _ := n.Finish(ctx, store.Note{RequestID: "req_a", Status: store.NoteFailed, ClaimedNS: 300}); ok {
			t.Fatal("a written note was finished again")
		}
		if _, found, err := n.Get(ctx, "req_b"); found || err != nil {
			t.Fatalf("req_b has a note: %v, %v", found, err)
		}
	})
}
