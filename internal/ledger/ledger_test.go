package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger/entry"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/logbook/logbooktest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// move is one transition.
type move struct{ from, to Status }

// performed is every move the code makes, and where.
var performed = []move{
	{StatusNew, StatusRejected},       // Decide: did not parse, or no human could approve it
	{StatusNew, StatusRefused},        // Decide: a referral flood
	{StatusNew, StatusWaiting},        // Decide: referred; reconcileOrphans
	{StatusNew, StatusRunning},        // Decide: the compiled or surveyed path
	{StatusWaiting, StatusRunning},    // Decided: an approval's claim
	{StatusWaiting, StatusDeciding},   // Move: a denial's or an expiry's claim
	{StatusRunning, StatusExecuted},   // Executed, RecordLater, Committed, ReconcileRunning
	{StatusRunning, StatusFailed},     // Executed: an approved statement the Pilot refused
	{StatusRunning, StatusRolledBack}, // RolledBack
	{StatusRunning, StatusWaiting},    // Failed, Executed (referred by the Pilot), Undecide, ReconcileRunning
	{StatusDeciding, StatusDenied},    // Decided: a denial
	{StatusDeciding, StatusExpired},   // Move: an expiry
	{StatusDeciding, StatusWaiting},   // Move: an act not recorded; ReconcileDeciding
}

var statuses = []Status{StatusNew, StatusRejected, StatusWaiting, StatusRunning, StatusExecuted, StatusFailed,
	StatusDenied, StatusExpired, StatusDeciding, StatusRefused, StatusRolledBack}

// TestTransitionTable: the table allows exactly the moves the code makes,
// and no other pair of statuses.
func TestTransitionTable(t *testing.T) {
	for _, from := range statuses {
		for _, to := range statuses {
			want := slices.Contains(performed, move{from, to})
			if got := Allowed(from, to); got != want {
				t.Errorf("Allowed(%q, %q) = %v, want %v", from, to, got, want)
			}
		}
	}
	for from, tos := range transitions {
		if !slices.Contains(statuses, from) {
			t.Errorf("the table moves from an unknown status %q", from)
		}
		for _, to := range tos {
			if !slices.Contains(statuses, to) {
				t.Errorf("the table moves to an unknown status %q", to)
			}
		}
	}
	for _, s := range []Status{StatusRejected, StatusRefused, StatusExecuted, StatusFailed, StatusDenied, StatusExpired, StatusRolledBack} {
		if !Final(s) {
			t.Errorf("%s is not final", s)
		}
	}
}

type fixture struct {
	l  *Ledger
	lb *logbook.Logbook
	st *store.Store

	mu   sync.Mutex
	seen map[move]int
}

// newFixture is a ledger on a SQLite store whose logbook has its journal,
// as a node's has (logbook.Config.Journal).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, logbook.Config{})
}

// newFixtureWith is newFixture with the logbook's configuration cfg.
func newFixtureWith(t *testing.T, cfg logbook.Config) *fixture {
	t.Helper()
	location := filepath.Join(t.TempDir(), "store.db")
	cfg.Journal = location + "-logbook"
	st, lb := logbooktest.RunningWith(t, "ledger-test", location, time.Now, cfg)
	if st.LogbookJournal() != cfg.Journal {
		t.Fatalf("the store's journal is %q, the fixture's %q", st.LogbookJournal(), cfg.Journal)
	}
	l, err := New(context.Background(), Config{}, st, lb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Drain)
	f := &fixture{l: l, lb: lb, st: st, seen: map[move]int{}}
	l.seen = func(from, to Status) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen[move{from, to}]++
	}
	return f
}

var n int

// decide records a new request with outcome (or on path, to run).
func (f *fixture) decide(t *testing.T, outcome Outcome, path string) *Request {
	t.Helper()
	n++
	return decideNth(t, f.l, n, outcome, path, time.Now())
}

// decideNth records request n, created at created, with outcome (or on
// path, to run).
func decideNth(t *testing.T, l *Ledger, n int, outcome Outcome, path string, created time.Time) *Request {
	t.Helper()
	req := &Request{ID: fmt.Sprintf("req_%d", n), Principal: "agent", Target: "shop", SQL: "SELECT 1", Canonical: "SELECT 1",
		Outcome: outcome, Path: path, Reasons: []string{"because"}, Created: created}
	if path != "" {
		req.MarqueID = fmt.Sprintf("mq_%d", n)
	}
	if err := l.Decide(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	return req
}

func (f *fixture) status(t *testing.T, id string) Status {
	t.Helper()
	r, err := f.l.Get(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func (f *fixture) want(t *testing.T, id string, want Status) {
	t.Helper()
	if got := f.status(t, id); got != want {
		t.Fatalf("%s is %s, want %s", id, got, want)
	}
}

// TestEveryMoveIsInTheTable drives the ledger through every move the
// code makes against a real store and logbook: each is seen, and each
// row ends where the move says.
func TestEveryMoveIsInTheTable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	executed := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 1}
	refused := &pilot.Result{Outcome: pilot.Refused, Reasons: []string{"a guard failed"}}

	f.want(t, f.decide(t, OutcomeRejected, "").ID, StatusRejected)
	f.want(t, f.decide(t, OutcomeRefused, "").ID, StatusRefused)
	f.want(t, f.decide(t, OutcomeReferred, "").ID, StatusWaiting)

	r := f.decide(t, OutcomeReferred, "compiled")
	f.want(t, r.ID, StatusRunning)
	r.ApplyResult(executed)
	if err := f.l.Executed(ctx, r, executed); err != nil {
		t.Fatal(err)
	}
	f.want(t, r.ID, StatusExecuted)

	r = f.decide(t, OutcomeReferred, "compiled")
	r.ApplyResult(executed)
	f.l.RecordLater(ctx, r, executed)
	f.want(t, r.ID, StatusExecuted) // Get waits for the entry

	r = f.decide(t, OutcomeReferred, "compiled")
	r.ApplyResult(refused) // referred by the Pilot: back to waiting
	if err := f.l.Executed(ctx, r, refused); err != nil {
		t.Fatal(err)
	}
	f.want(t, r.ID, StatusWaiting)

	r = f.decide(t, OutcomeReferred, "compiled")
	if err := f.l.Failed(ctx, r, errors.New("the target went away"), "it did not run"); err != nil {
		t.Fatal(err)
	}
	f.want(t, r.ID, StatusWaiting)

	r = f.decide(t, OutcomeReferred, "compiled")
	if err := f.l.RolledBack(ctx, r, "42", "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	f.want(t, r.ID, StatusRolledBack)

	r = f.decide(t, OutcomeReferred, "compiled")
	if err := f.l.Committed(ctx, r, executed, "43", 1); err != nil {
		t.Fatal(err)
	}
	f.want(t, r.ID, StatusExecuted)

	// An approval claims a waiting request, takes the claim back, claims
	// it again and records its marque; the Pilot refuses it for good.
	w := f.decide(t, OutcomeReferred, "")
	approve := Decision{Status: StatusRunning, Path: "approved", DecidedBy: "bob", Act: "act", ActSignature: "sig", At: time.Now()}
	if ok, err := f.l.Decided(ctx, w.ID, StatusWaiting, approve); err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if err := f.l.Undecide(ctx, w.ID, StatusRunning, StatusWaiting); err != nil {
		t.Fatal(err)
	}
	f.want(t, w.ID, StatusWaiting)
	if ok, err := f.l.Decided(ctx, w.ID, StatusWaiting, approve); err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	w.MarqueID = "mq_approved"
	if err := f.l.Executing(ctx, w, ""); err != nil {
		t.Fatal(err)
	}
	w.ApplyResult(refused)
	w.Status = StatusFailed
	if err := f.l.Executed(ctx, w, refused); err != nil {
		t.Fatal(err)
	}
	f.want(t, w.ID, StatusFailed)

	// A denial, an expiry, and an act that could not be recorded.
	for _, end := range []Status{StatusDenied, StatusExpired, StatusWaiting} {
		w := f.decide(t, OutcomeReferred, "")
		if ok, err := f.l.Move(ctx, w.ID, StatusWaiting, StatusDeciding, time.Now()); err != nil || !ok {
			t.Fatalf("claim: %v, %v", ok, err)
		}
		var ok bool
		var err error
		if end == StatusDenied {
			ok, err = f.l.Decided(ctx, w.ID, StatusDeciding, Decision{Status: end, DecidedBy: "bob", Reasons: []string{"no"}, At: time.Now()})
		} else {
			ok, err = f.l.Move(ctx, w.ID, StatusDeciding, end, time.Time{})
		}
		if err != nil || !ok {
			t.Fatalf("%s: %v, %v", end, ok, err)
		}
		f.want(t, w.ID, end)
	}

	for _, m := range performed {
		if f.seen[m] == 0 {
			t.Errorf("the ledger never made the move %q -> %q", m.from, m.to)
		}
	}
	for m := range f.seen {
		if !slices.Contains(performed, m) {
			t.Errorf("the ledger made the move %q -> %q, which performed does not list", m.from, m.to)
		}
	}
}

// TestForbiddenMovesAreRefused: a move the table does not list is refused
// before anything is written, the row and the logbook unchanged.
func TestForbiddenMovesAreRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := f.decide(t, OutcomeReferred, "compiled")
	executed := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 1}
	r.ApplyResult(executed)
	if err := f.l.Executed(ctx, r, executed); err != nil {
		t.Fatal(err)
	}
	head, _, err := f.lb.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Executed is final: back to waiting, and a second outcome, are refused.
	if ok, err := f.l.Move(ctx, r.ID, StatusExecuted, StatusWaiting, time.Now()); !errors.Is(err, ErrForbidden) || ok {
		t.Errorf("executed -> waiting: %v, %v", ok, err)
	}
	r.Status = StatusDenied // a human's act is no outcome of the Pilot's
	if err := f.l.Executed(ctx, r, executed); !errors.Is(err, ErrForbidden) {
		t.Errorf("running -> denied: %v", err)
	}
	w := f.decide(t, OutcomeReferred, "")
	// A waiting request is not denied without being claimed first.
	if ok, err := f.l.Decided(ctx, w.ID, StatusWaiting, Decision{Status: StatusDenied, At: time.Now()}); !errors.Is(err, ErrForbidden) || ok {
		t.Errorf("waiting -> denied: %v, %v", ok, err)
	}
	// Nor does a decision record a request as executed already.
	x := &Request{ID: "req_x", Principal: "agent", Target: "shop", Outcome: OutcomeExecuted, Created: time.Now()}
	x.Status = StatusExecuted
	if err := f.l.transit(StatusNew, x.Status); !errors.Is(err, ErrForbidden) {
		t.Errorf("new -> executed: %v", err)
	}
	f.want(t, r.ID, StatusExecuted)
	f.want(t, w.ID, StatusWaiting)
	after, _, err := f.lb.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after != head+1 { // w's decision only
		t.Errorf("the logbook went from %d to %d entries: a refused move wrote one", head, after)
	}
}

// TestExecutedTextLoggedOnce: an execution entry names its executed text
// by SHA-256, and carries the text itself until an entry of this ledger
// has committed it; an entry that did not commit leaves the text to the
// next one.
func TestExecutedTextLoggedOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const text = "UPDATE public.orders SET status = $1 WHERE id = $2::int"
	sum := sha256.Sum256([]byte(text))
	entry := func(r *Request) map[string]any {
		t.Helper()
		var got map[string]any
		err := f.lb.Iterate(ctx, logbook.Query{Kind: logbook.KindExecution, SubjectKey: "request", SubjectValue: r.ID}, func(e logbook.Entry) error {
			return json.Unmarshal(e.Payload, &got)
		})
		if err != nil || got == nil {
			t.Fatalf("%s: no execution entry (%v)", r.ID, err)
		}
		return got
	}
	run := func(sql string) *Request {
		r := f.decide(t, OutcomeReferred, "compiled")
		res := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 1, ExecutedSQL: sql, ExecutedArgs: []any{"retrying", 7}}
		r.ApplyResult(res)
		if err := f.l.Executed(ctx, r, res); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Moved by a reconciler first: the entry is not written, and the text
	// is not remembered as logged.
	r := f.decide(t, OutcomeReferred, "compiled")
	r.MarqueID = "mq_other"
	res := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 1, ExecutedSQL: text}
	r.ApplyResult(res)
	if err := f.l.record(ctx, r, ExecutedPayload(r, res), false, false); !errors.Is(err, logbook.ErrNotApplied) {
		t.Fatalf("a move under another marque: %v, want ErrNotApplied", err)
	}

	first, second := entry(run(text)), entry(run(text))
	if first["executed_sql"] != text || first["executed_sql_sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("first entry: %v", first)
	}
	if _, ok := second["executed_sql"]; ok || second["executed_sql_sha256"] != hex.EncodeToString(sum[:]) || second["executed_args"] == nil {
		t.Errorf("second entry repeats the text or lost its hash or values: %v", second)
	}
	other := entry(run("SELECT 1"))
	if other["executed_sql"] != "SELECT 1" {
		t.Errorf("another text was not logged: %v", other)
	}
	if got, err := ExecutedText(ctx, f.lb, hex.EncodeToString(sum[:])); err != nil || got != text {
		t.Errorf("ExecutedText: %q, %v; want the text", got, err)
	}
	if got, err := ExecutedText(ctx, f.lb, strings.Repeat("0", 64)); err != nil || got != "" {
		t.Errorf("ExecutedText of a hash no entry names: %q, %v", got, err)
	}
}

// TestDecisionEntrySchema: every decision entry the ledger writes reads
// back through entry.Decision, the one schema its readers (reconcile,
// the backtest, the console) use, with nothing lost or added: a field
// written but not in the schema, or in the schema under another name,
// fails here.
func TestDecisionEntrySchema(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rule := 2
	for _, req := range []*Request{
		{Outcome: OutcomeRejected, Reasons: []string{"does not parse"}},
		{Outcome: OutcomeReferred, Reasons: []string{"no rule"}, Detail: "for humans"},
		{Outcome: OutcomeRefused, Reasons: []string{"flood"}},
		{Path: "compiled", DelegationID: "dlg_1", Rule: &rule, MarqueID: "mq_schema", TxID: "123"},
		{Path: "surveyed", DelegationID: "dlg_1", Rule: &rule, MarqueID: "mq_schema2", JudgmentID: "jdg_1"},
		{Outcome: OutcomeReferred, SQL: strings.Repeat("x", maxLoggedStatement+10)},
	} {
		n++
		req.ID, req.Principal, req.Target, req.Created = fmt.Sprintf("req_schema_%d", n), "agent", "shop", time.Now()
		if req.SQL == "" {
			req.SQL, req.Canonical = "SELECT 1", "SELECT 1"
		}
		evals := []entry.Evaluation{{Delegation: "dlg_1", Decision: "conforms", Rule: &rule}, {Delegation: "dlg_2", Decision: "refer", Reasons: []string{"why"}}}
		if err := f.l.Decide(ctx, req, evals); err != nil {
			t.Fatal(err)
		}
		var raw []byte
		err := f.lb.Iterate(ctx, logbook.Query{Kind: logbook.KindDecision, SubjectKey: "request", SubjectValue: req.ID}, func(e logbook.Entry) error {
			raw = e.Payload
			return nil
		})
		if err != nil || raw == nil {
			t.Fatalf("%s: no decision entry (%v)", req.ID, err)
		}
		d, err := entry.ReadDecision(raw)
		if err != nil || d.RequestID != req.ID {
			t.Fatalf("%s: %+v %v", req.ID, d, err)
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var written, read map[string]any
		if err := json.Unmarshal(raw, &written); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(again, &read); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(written, read) {
			t.Errorf("%s: the entry does not read back through entry.Decision:\nwritten %v\nread    %v", req.ID, written, read)
		}
	}
}
