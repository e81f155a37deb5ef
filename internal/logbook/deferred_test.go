package logbook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// indexState is indexed_through and the number of subject rows.
func indexState(t *testing.T, f *fixture) (through, rows int64) {
	t.Helper()
	err := f.st.ReadDB().QueryRowContext(context.Background(),
		"SELECT (SELECT indexed_through FROM logbook_index), (SELECT count(*) FROM logbook_subjects)").Scan(&through, &rows)
	if err != nil {
		t.Fatal(err)
	}
	return through, rows
}

func findSeqs(t *testing.T, f *fixture, q Query) []int64 {
	t.Helper()
	es, err := f.lb.Find(context.Background(), q)
	if err != nil {
		t.Fatalf("Find(%+v): %v", q, err)
	}
	return seqsOf(es)
}

// A lookup by subject sees every committed entry whether or not the index
// has it yet, with the same answer before and after the index catches up,
// for every combination of From, Kind and Limit.
func TestSubjectLookupBeforeAndAfterIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{IndexDelay: time.Hour, IndexBatch: 1 << 20})
	for i := range 30 {
		kind := []Kind{"decision", "execution"}[i%2]
		f.append(Record{Kind: kind, Subjects: map[string]string{
			"request": fmt.Sprintf("r-%d", i/2), "principal": "agent:" + []string{"a", "b", "c"}[i%3], "dotted.key": "v",
		}})
	}
	queries := []Query{
		{SubjectKey: "request", SubjectValue: "r-3"},
		{SubjectKey: "principal", SubjectValue: "agent:b"},
		{SubjectKey: "principal", SubjectValue: "agent:b", Kind: "execution"},
		{SubjectKey: "principal", SubjectValue: "agent:a", From: 10, Limit: 3},
		{SubjectKey: "dotted.key", SubjectValue: "v", Limit: 5},
		{SubjectKey: "request", SubjectValue: "r-99"},
		{SubjectKey: "no such key", SubjectValue: "v"},
	}
	want := [][]int64{{7, 8}, {2, 5, 8, 11, 14, 17, 20, 23, 26, 29}, {2, 8, 14, 20, 26}, {10, 13, 16}, {1, 2, 3, 4, 5}, nil, nil}
	check := func(stage string) {
		t.Helper()
		for i, q := range queries {
			if got := findSeqs(t, f, q); !slices.Equal(got, want[i]) {
				t.Errorf("%s: Find(%+v) = %v, want %v", stage, q, got, want[i])
			}
		}
	}
	if through, rows := indexState(t, f); through != 0 || rows != 0 {
		t.Fatalf("before any settle: indexed through %d, %d rows; want nothing indexed yet", through, rows)
	}
	check("unindexed")
	if err := f.lb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if through, rows := indexState(t, f); through != 30 || rows != 90 {
		t.Fatalf("after Settle: indexed through %d, %d rows; want 30, 90", through, rows)
	}
	check("indexed")
	for i := 30; i < 34; i++ {
		f.append(Record{Kind: "decision", Subjects: map[string]string{"request": "r-3", "principal": "agent:b"}})
	}
	want[0] = []int64{7, 8, 31, 32, 33, 34}
	want[1] = append(want[1], 31, 32, 33, 34)
	check("partly indexed")
}

// Every Append, the moment it returns, is found by its subjects, however
// the concurrent appends were grouped.
func TestSubjectLookupSeesItsOwnGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{IndexBatch: 7, IndexDelay: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				req := fmt.Sprintf("g%d-%d", g, i)
				e, err := f.lb.Append(ctx, Record{Kind: "decision", Subjects: map[string]string{"request": req, "group": "all"}})
				if err != nil {
					t.Error(err)
					return
				}
				es, err := f.lb.Find(ctx, Query{SubjectKey: "request", SubjectValue: req})
				if err != nil || len(es) != 1 || es[0].Seq != e.Seq {
					t.Errorf("Find(%s) right after its Append = %v, %v; want seq %d", req, seqsOf(es), err, e.Seq)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := findSeqs(t, f, Query{SubjectKey: "group", SubjectValue: "all"}); len(got) != 200 {
		t.Fatalf("Find(group) = %d entries, want 200", len(got))
	}
}

// After work runs once the entry is durable, outside its transaction, in
// seq order; Settle waits for it; one that fails is rolled back alone.
func TestAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, Config{IndexDelay: time.Hour, IndexBatch: 1 << 20})
	ddl, order := "CREATE TABLE after_log (seq INTEGER, note TEXT)", "rowid"
	if f.st.Driver() == store.Postgres {
		ddl, order = "CREATE TABLE after_log (seq INTEGER, note TEXT, id BIGSERIAL)", "id"
	}
	if _, err := f.st.DB().ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	after := func(note string, fail bool) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			mu.Lock()
			ran = append(ran, note)
			mu.Unlock()
			if _, err := tx.ExecContext(ctx, f.st.SQL("INSERT INTO after_log (note) VALUES (?)"), note); err != nil {
				return err
			}
			if fail {
				return errors.New("refused")
			}
			return nil
		}
	}
	notes := func() []string {
		rows, err := f.st.ReadDB().QueryContext(ctx, "SELECT note FROM after_log ORDER BY "+order)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	withRan := false
	f.append(Record{Kind: "decision", Subjects: map[string]string{"request": "r-1"},
		With: func(ctx context.Context, tx *sql.Tx) error {
			mu.Lock()
			defer mu.Unlock()
			withRan = len(ran) == 0
			return nil
		},
		After: after("one", false)})
	f.append(Record{Kind: "decision", After: after("two", true)})
	f.append(Record{Kind: "execution", After: after("three", false)})
	mu.Lock()
	if len(ran) != 0 || !withRan {
		t.Fatalf("after the appends: After ran %v, With first %v; want no After yet, With in the entry's commit", ran, withRan)
	}
	mu.Unlock()
	if got := notes(); len(got) != 0 {
		t.Fatalf("After work committed before its settle: %v", got)
	}
	if err := f.lb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := notes(); !slices.Equal(got, []string{"one", "three"}) {
		t.Fatalf("after Settle: %v; want one and three (two failed and was rolled back alone)", got)
	}
	mu.Lock()
	// A failure reruns the settle's callbacks, each in a savepoint.
	if !slices.Equal(ran, []string{"one", "two", "one", "two", "three"}) {
		t.Fatalf("After ran %v; want in seq order, the failed settle's callbacks run again", ran)
	}
	mu.Unlock()
	if es := findSeqs(t, f, Query{}); len(es) != 3 {
		t.Fatalf("%d entries, want 3: a failed After never touches its entry", len(es))
	}
	// The write handle fsyncs again after a settle.
	if f.st.Driver() == store.Postgres {
		var mode string
		if err := f.st.DB().QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&mode); err != nil || mode != "on" {
			t.Fatalf("synchronous_commit after a settle = %q, %v; want on", mode, err)
		}
		return
	}
	var syncMode int
	if err := f.st.DB().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil || syncMode != 2 {
		t.Fatalf("synchronous after a settle = %d, %v; want 2 (FULL)", syncMode, err)
	}
}

// A writer that stops settles first: every After and index row is in.
func TestStopSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newLocation(t)
	f := openFixture(t, path, Config{IndexDelay: time.Hour, IndexBatch: 1 << 20}, true)
	if _, err := f.st.DB().ExecContext(ctx, "CREATE TABLE after_log (seq INTEGER)"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		f.append(Record{Kind: "decision", Subjects: map[string]string{"request": fmt.Sprint(i)},
			After: func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, f.st.SQL("INSERT INTO after_log (seq) VALUES (?)"), i)
				return err
			}})
	}
	f.stop()
	if through, rows := indexState(t, f); through != 5 || rows != 5 {
		t.Fatalf("after stop: indexed through %d, %d rows; want 5, 5", through, rows)
	}
	var n int
	if err := f.st.ReadDB().QueryRowContext(ctx, "SELECT count(*) FROM after_log").Scan(&n); err != nil || n != 5 {
		t.Fatalf("after stop: %d After rows, %v; want 5", n, err)
	}
	if err := f.lb.Settle(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Settle after stop: %v, want ErrClosed", err)
	}
}

// Entries committed but never indexed (a crash before the settle) are
// found by subject at once, and indexed by the next writer when it starts.
func TestIndexCatchesUpAfterCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newLocation(t)
	f := openFixture(t, path, Config{}, false)
	w, err := f.lb.newWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*request
	for i := range 10 {
		p, err := prepare(Record{Kind: "decision", Subjects: map[string]string{"request": fmt.Sprint(i % 3)}}, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, &request{rec: p})
	}
	if _, err := w.write(ctx, reqs, cpDue); err != nil {
		t.Fatal(err)
	}
	w.close() // the crash: its deferred work is gone with it
	f.st.Close()

	g := openFixture(t, path, Config{IndexDelay: time.Hour}, false)
	if through, rows := indexState(t, g); through != 0 || rows != 0 {
		t.Fatalf("after the crash: indexed through %d, %d rows", through, rows)
	}
	if got := findSeqs(t, g, Query{SubjectKey: "request", SubjectValue: "1"}); !slices.Equal(got, []int64{2, 5, 8}) {
		t.Fatalf("Find before catch-up = %v", got)
	}
	g.start()
	g.append(Record{Kind: "decision", Subjects: map[string]string{"request": "1"}})
	if through, rows := indexState(t, g); through != 10 || rows != 10 {
		t.Fatalf("after the next writer started: indexed through %d, %d rows; want 10, 10", through, rows)
	}
	if got := findSeqs(t, g, Query{SubjectKey: "request", SubjectValue: "1"}); !slices.Equal(got, []int64{2, 5, 8, 11}) {
		t.Fatalf("Find after catch-up = %v", got)
	}
}

// Two processes' writers on one file: each indexes what the other wrote
// and nothing twice.
func TestIndexTwoWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newLocation(t)
	a := openFixture(t, path, Config{IndexBatch: 5}, true)
	b := openFixture(t, path, Config{IndexBatch: 3}, true)
	var wg sync.WaitGroup
	for i, f := range []*fixture{a, b, a, b} {
		wg.Go(func() {
			for j := range 50 {
				if _, err := f.lb.Append(ctx, Record{Kind: "decision", Subjects: map[string]string{"g": fmt.Sprint(i), "all": "x"}, Payload: j}); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, f := range []*fixture{a, b} {
		if err := f.lb.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if through, rows := indexState(t, a); through != 200 || rows != 400 {
		t.Fatalf("indexed through %d, %d rows; want 200, 400", through, rows)
	}
	for g := range 4 {
		if got := findSeqs(t, a, Query{SubjectKey: "g", SubjectValue: fmt.Sprint(g)}); len(got) != 50 {
			t.Fatalf("Find(g=%d) = %d entries, want 50", g, len(got))
		}
	}
}

// A batch held open by the commit window is committed, not dropped, when
// the writer stops; the Append that waited in it succeeds.
func TestStopDuringCommitWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := openFixture(t, newLocation(t), Config{CommitWindow: time.Hour}, false)
	f.lb.est.observe(8, false) // as if eight appenders had just shared a batch
	f.start()
	done := make(chan error, 1)
	go func() {
		_, err := f.lb.Append(ctx, Record{Kind: "decision", Subjects: map[string]string{"request": "alone"}})
		done <- err
	}()
	waitHeld(t, f)
	select {
	case err := <-done:
		t.Fatalf("a lone append after concurrent ones returned (%v) before the window or the stop", err)
	default:
	}
	f.stop()
	if err := <-done; err != nil {
		t.Fatalf("the append held in the window: %v; want it committed at stop", err)
	}
	if got := findSeqs(t, f, Query{SubjectKey: "request", SubjectValue: "alone"}); len(got) != 1 {
		t.Fatalf("the held entry: %v", got)
	}
}

// One appender never waits for the window: with an hour's window,
// sequential appends still complete.
func TestCommitWindowOneAppender(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{CommitWindow: time.Hour})
	for i := range 50 {
		f.append(Record{Kind: "decision", Payload: i})
	}
}

func TestConcurrencyEstimate(t *testing.T) {
	t.Parallel()
	var c concurrency
	steps := []struct {
		eager    int
		timedOut bool
		want     int
	}{
		{1, false, 1}, {5, false, 5}, {3, false, 5}, {2, false, 5}, {2, false, 5}, {2, false, 3},
		{1, true, 1}, {4, false, 4}, {1, true, 1},
	}
	for i, s := range steps {
		c.observe(s.eager, s.timedOut)
		if got := c.target(); got != s.want {
			t.Fatalf("step %d: target %d, want %d", i, got, s.want)
		}
	}
}

// A lone appender commits its own entry (lead): no batch of one goes
// through Run and back. Entries are durable and chained as before, and a
// lazy record Run holds joins the leader's commit.
func TestALoneAppenderLeads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Nothing wakes Run on its own meanwhile (deferred work, checkpoints):
	// an appender finds it busy only when Run has work of its own.
	f := newFixture(t, Config{LazyWait: time.Hour, IndexDelay: time.Hour, IndexBatch: 1 << 20, CheckpointInterval: time.Hour})
	f.append(Record{Kind: "decision"})
	waitIdle(t, f)
	led0, commits0 := f.lb.stats.led.Load(), f.lb.stats.commits.Load()
	for i := range 20 {
		f.append(Record{Kind: "decision", Subjects: map[string]string{"request": fmt.Sprint(i)}, Payload: i})
	}
	if led, commits := f.lb.stats.led.Load()-led0, f.lb.stats.commits.Load()-commits0; led != 20 || commits != 20 {
		t.Fatalf("20 sequential appends: %d led, %d commits; want each appender to commit its own", led, commits)
	}
	lazyDone := make(chan Entry, 1)
	go func() {
		e, err := f.lb.Append(ctx, Record{Kind: "execution", Subjects: map[string]string{"request": "19"}, Payload: "lazy", Lazy: true})
		if err != nil {
			t.Error(err)
		}
		lazyDone <- e
	}()
	waitHeld(t, f)
	eager := f.append(Record{Kind: "decision", Payload: "eager"})
	lazy := <-lazyDone
	if lazy.Seq != eager.Seq-1 || !lazy.Time.Equal(eager.Time) || f.lb.stats.led.Load()-led0 != 21 {
		t.Fatalf("lazy %d, eager %d (led %d): want the held lazy record in the leader's commit", lazy.Seq, eager.Seq, f.lb.stats.led.Load()-led0)
	}
	f.stop()
	if r := f.verify(); !r.OK || r.Entries != 23 {
		t.Fatalf("verify after leading appends: %+v", r)
	}
}

// A leader never runs the deferred work (other records' After callbacks)
// in its own goroutine: an appender that holds a lock an After callback
// takes still gets its answer, and Run writes the work once it lets go.
func TestALeaderLeavesAfterWorkToRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{IndexBatch: 1, IndexDelay: time.Hour})
	var held sync.Mutex
	ran := make(chan struct{}, 1)
	after := func(context.Context, *sql.Tx) error {
		held.Lock()
		defer held.Unlock()
		ran <- struct{}{}
		return nil
	}
	f.append(Record{Kind: "decision"})
	waitIdle(t, f)
	led := f.lb.stats.led.Load()
	held.Lock()
	answered := make(chan error, 1)
	go func() {
		_, err := f.lb.Append(context.Background(), Record{Kind: "decision", After: after})
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the appending goroutine ran the After callback itself (it waits for a lock its caller holds)")
	}
	held.Unlock()
	if f.lb.stats.led.Load() != led+1 {
		t.Fatalf("led %d, want the appender to have committed its own entry", f.lb.stats.led.Load()-led)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not write the deferred work the leader left")
	}
}

// waitIdle returns once Run has started and finished the steps it had to
// take (its deferred work included), so the next append finds it idle.
func waitIdle(t *testing.T, f *fixture) {
	t.Helper()
	if err := f.lb.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.lb.mu.Lock()
	f.lb.mu.Unlock() //nolint:staticcheck // waits out Run's step
}
