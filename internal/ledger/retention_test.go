package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/logbook/logbooktest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// retentionFixture is a ledger and its logbook on one settable clock, a
// checkpoint signed with every batch.
type retentionFixture struct {
	l   *Ledger
	lb  *logbook.Logbook
	now atomic.Int64
	n   int
}

var retentionT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newRetentionFixture(t *testing.T) *retentionFixture {
	t.Helper()
	f := &retentionFixture{}
	f.now.Store(retentionT0.UnixNano())
	clock := func() time.Time { return time.Unix(0, f.now.Load()).UTC() }
	st, lb := logbooktest.RunningWith(t, "retention-test", "", clock, logbook.Config{CheckpointEvery: 1, CheckpointInterval: time.Hour})
	l, err := New(context.Background(), Config{Clock: clock}, st, lb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Drain)
	f.l, f.lb = l, lb
	return f
}

func (f *retentionFixture) at(d time.Duration) { f.now.Store(retentionT0.Add(d).UnixNano()) }

func (f *retentionFixture) decide(t *testing.T, outcome Outcome, path string) *Request {
	t.Helper()
	f.n++
	return decideNth(t, f.l, f.n, outcome, path, f.l.cfg.Clock())
}

func (f *retentionFixture) executed(t *testing.T, text string) *Request {
	t.Helper()
	r := f.decide(t, OutcomeReferred, "compiled")
	res := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 1, ExecutedSQL: text, ExecutedArgs: []any{"x"}}
	r.ApplyResult(res)
	if err := f.l.Executed(context.Background(), r, res); err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *retentionFixture) exists(t *testing.T, id string) bool {
	t.Helper()
	_, err := f.l.Get(context.Background(), id, "")
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrNotFound):
		return false
	}
	t.Fatal(err)
	return false
}

func (f *retentionFixture) prune(t *testing.T, retain time.Duration) (int64, int64) {
	t.Helper()
	ctx := context.Background()
	if err := f.lb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := f.l.Prune(ctx, Retention{Retain: retain})
	if err != nil {
		t.Fatal(err)
	}
	return p.Entries, p.Requests
}

// TestRetentionRemovesSettledRequestsWithTheirEntries: entries older than
// the retention go with the rows of the settled requests they decided;
// younger ones stay, and an executed text that a kept entry names by hash
// alone is carried past the prune.
func TestRetentionRemovesSettledRequestsWithTheirEntries(t *testing.T) {
	f := newRetentionFixture(t)
	ctx := context.Background()
	const text = "UPDATE public.orders SET status = $1 WHERE id = $2::int"
	sum := sha256.Sum256([]byte(text))

	old := f.executed(t, text) // the text in full
	rejected := f.decide(t, OutcomeRejected, "")
	f.at(30 * time.Second)
	once := f.executed(t, "SELECT 'named by nothing later'") // in full, never named by hash
	f.at(5 * time.Minute)
	kept := f.executed(t, text) // the text by hash alone
	var keptEntry map[string]any
	_ = f.lb.Iterate(ctx, logbook.Query{Kind: logbook.KindExecution, SubjectKey: "request", SubjectValue: kept.ID}, func(e logbook.Entry) error {
		return json.Unmarshal(e.Payload, &keptEntry)
	})
	if _, full := keptEntry["executed_sql"]; full || keptEntry["executed_sql_sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("the kept entry should name the text by hash alone: %v", keptEntry)
	}

	const retain = 90 * 24 * time.Hour
	f.at(retain + time.Minute) // entries before 1m are older than the retention
	entries, requests := f.prune(t, retain)
	if entries == 0 || requests != 3 {
		t.Fatalf("pruned %d entries and %d requests, want the three old requests", entries, requests)
	}
	if f.exists(t, old.ID) || f.exists(t, rejected.ID) || !f.exists(t, kept.ID) {
		t.Fatalf("after the prune: old %v, rejected %v, kept %v", f.exists(t, old.ID), f.exists(t, rejected.ID), f.exists(t, kept.ID))
	}
	if es, _ := f.lb.Find(ctx, logbook.Query{SubjectKey: "request", SubjectValue: old.ID}); len(es) != 0 {
		t.Fatalf("the old request's entries are still there: %d", len(es))
	}
	if got, err := ExecutedText(ctx, f.lb, hex.EncodeToString(sum[:])); err != nil || got != text {
		t.Fatalf("the executed text a kept entry names was not carried: %q %v", got, err)
	}
	// Only that one: a text no kept entry names is not carried.
	prunes, err := f.lb.Find(ctx, logbook.Query{Kind: logbook.KindPruned})
	if err != nil || len(prunes) != 1 {
		t.Fatalf("prune entries: %d %v", len(prunes), err)
	}
	if carried := carriedTexts(prunes[0].Payload); len(carried) != 1 || carried[hex.EncodeToString(sum[:])] != text {
		t.Fatalf("carried %v, want only the text a kept entry names", carried)
	}
	if f.exists(t, once.ID) {
		t.Fatal("a settled request older than the cut kept its row")
	}
	// Nothing else is old enough.
	if entries, requests := f.prune(t, retain); entries != 0 || requests != 0 {
		t.Fatalf("a second prune removed %d entries, %d requests", entries, requests)
	}
	// Past the memo's freshness the text is logged in full again.
	f.at(retain + time.Hour)
	again := f.executed(t, text)
	var againEntry map[string]any
	_ = f.lb.Iterate(ctx, logbook.Query{Kind: logbook.KindExecution, SubjectKey: "request", SubjectValue: again.ID}, func(e logbook.Entry) error {
		return json.Unmarshal(e.Payload, &againEntry)
	})
	if againEntry["executed_sql"] != text {
		t.Fatalf("a text logged long ago was not logged in full again: %v", againEntry)
	}
}

// TestRetentionKeepsOpenRequests: a request still open (here waiting for
// a human) keeps its entries and everything after them, however old.
func TestRetentionKeepsOpenRequests(t *testing.T) {
	f := newRetentionFixture(t)
	before := f.executed(t, "SELECT 1")
	f.at(2 * time.Hour)
	waiting := f.decide(t, OutcomeReferred, "")
	f.at(3 * time.Hour)
	after := f.executed(t, "SELECT 2")

	f.at(400 * 24 * time.Hour)
	entries, requests := f.prune(t, 24*time.Hour)
	if entries == 0 || requests != 1 {
		t.Fatalf("pruned %d entries, %d requests; want only what precedes the open request by the margin", entries, requests)
	}
	if f.exists(t, before.ID) || !f.exists(t, waiting.ID) || !f.exists(t, after.ID) {
		t.Fatalf("before %v, waiting %v, after %v", f.exists(t, before.ID), f.exists(t, waiting.ID), f.exists(t, after.ID))
	}
	es, err := f.lb.Find(context.Background(), logbook.Query{SubjectKey: "request", SubjectValue: waiting.ID})
	if err != nil || !slices.ContainsFunc(es, func(e logbook.Entry) bool { return e.Kind == logbook.KindDecision }) {
		t.Fatalf("the waiting request's decision entry is gone: %v %v", es, err)
	}
}

// TestRetentionKeepsARequestWithAKeptEntry: a request whose entries fall
// on both sides of the cut (the Surveyor's judgment before its decision,
// say) keeps its row, so reconciliation never takes its kept decision
// entry for an orphan and queues it again.
func TestRetentionKeepsARequestWithAKeptEntry(t *testing.T) {
	f := newRetentionFixture(t)
	ctx := context.Background()
	id := fmt.Sprintf("req_%d", f.n+1)
	if _, err := f.lb.Append(ctx, logbook.Record{Kind: logbook.KindJudgment, Subjects: map[string]string{"request": id},
		Payload: map[string]any{"request_id": id}}); err != nil {
		t.Fatal(err)
	}
	f.at(10 * time.Second)
	r := f.executed(t, "UPDATE orders SET status = 'x'")
	if r.ID != id {
		t.Fatalf("request %s, want %s", r.ID, id)
	}
	const retain = 24 * time.Hour
	f.at(retain + 5*time.Second) // the judgment is older than the retention, the decision is not
	if entries, requests := f.prune(t, retain); entries == 0 || requests != 0 {
		t.Fatalf("pruned %d entries, %d requests; want the judgment's entries and no request", entries, requests)
	}
	if !f.exists(t, id) {
		t.Fatal("the request lost its row while its decision entry is kept")
	}
	if n, err := f.l.reconcileOrphans(ctx); err != nil || n != 0 {
		t.Fatalf("reconcile found %d orphans (%v)", n, err)
	}
	if st, err := f.l.Get(ctx, id, ""); err != nil || st.Status != StatusExecuted {
		t.Fatalf("after reconcile: %+v %v", st, err)
	}
}

// TestRetentionStatuses: open and final statuses, as retention reads them
// from the transition table, are every status but the new one, once.
func TestRetentionStatuses(t *testing.T) {
	got := append(openStatuses(), finalStatuses()...)
	var want []string
	for _, s := range statuses[1:] {
		want = append(want, string(s))
	}
	var have []string
	for _, s := range got {
		have = append(have, string(s))
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Fatalf("open and final %v, want %v", have, want)
	}
}
