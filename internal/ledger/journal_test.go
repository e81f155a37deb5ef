package ledger

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestRunningRowsCommitInTheJournal: the decision of a statement decided
// to run and its executed outcome (RecordLater's) commit in the logbook's
// journal, their request row reaching the store behind them; the ledger's
// readers see it at once. A reconciler that settles the request from its
// receipt meanwhile records nothing: its conditional record commits in
// the store after the journal's entries, and finds the request settled.
// A referral's row, which the queue moves in the store directly, commits
// with its decision in the store.
func TestRunningRowsCommitInTheJournal(t *testing.T) {
	// No background batch: the rows reach the store only when a reader or
	// a record that commits in the store asks.
	f := newFixtureWith(t, logbook.Config{IndexDelay: time.Hour})
	ctx := context.Background()
	// stored reads the row as the store holds it, not through the ledger.
	stored := func(id string) (status string, rows int64, found bool) {
		t.Helper()
		err := f.st.ReadDB().QueryRowContext(ctx, "SELECT status, rows_affected FROM requests WHERE id = ?", id).Scan(&status, &rows)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "", 0, false
		case err != nil:
			t.Fatal(err)
		}
		return status, rows, true
	}

	// The first batch commits in the store, with the first checkpoint.
	w := f.decide(t, OutcomeReferred, "")
	if s, _, ok := stored(w.ID); !ok || s != string(StatusWaiting) {
		t.Fatalf("a referral's row is %q (%v) in the store after its decision, want waiting", s, ok)
	}
	w2 := f.decide(t, OutcomeReferred, "")
	if _, _, ok := stored(w2.ID); !ok {
		t.Fatal("a referral's row is not in the store after its decision: the queue could not move it")
	}

	r := f.decide(t, OutcomeReferred, "compiled")
	if _, _, ok := stored(r.ID); ok {
		t.Fatal("the running request's row is in the store as soon as its decision is: the decision did not commit in the journal")
	}
	f.want(t, r.ID, StatusRunning) // through List, which waits for Visible
	if s, _, ok := stored(r.ID); !ok || s != string(StatusRunning) {
		t.Fatalf("after a read through the ledger the store holds %q (%v), want running", s, ok)
	}

	executed := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 3}
	r.ApplyResult(executed)
	if err := f.l.record(ctx, r, ExecutedPayload(r, executed), true, true); err != nil { // RecordLater's record
		t.Fatal(err)
	}
	if s, _, _ := stored(r.ID); s != string(StatusRunning) {
		t.Fatalf("the executed outcome reached the store at once (%q): it did not commit in the journal", s)
	}

	// A reconciler that read the request running, and found its receipt.
	settle := &Request{ID: r.ID, Target: r.Target, Principal: r.Principal, MarqueID: r.MarqueID,
		Outcome: OutcomeExecuted, Status: StatusExecuted, RowsAffected: 3}
	err := f.l.record(ctx, settle, map[string]any{"request_id": r.ID, "marque_id": r.MarqueID, "outcome": "executed",
		"rows_affected": int64(3), "reconciled": true}, false, false)
	if !errors.Is(err, logbook.ErrNotApplied) {
		t.Fatalf("the reconciler's record: %v, want ErrNotApplied (the journal's outcome came first)", err)
	}
	if s, n, _ := stored(r.ID); s != string(StatusExecuted) || n != 3 {
		t.Fatalf("the store holds %q with %d rows, want executed with 3", s, n)
	}
	executions := 0
	if err := f.lb.Iterate(ctx, logbook.Query{SubjectKey: "request", SubjectValue: r.ID}, func(e logbook.Entry) error {
		if e.Kind == logbook.KindExecution {
			executions++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if executions != 1 {
		t.Fatalf("%d execution entries for the request, want 1", executions)
	}
}
