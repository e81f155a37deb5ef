package logbook

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConditionalRecords: a record whose If says no is not appended and
// its With does not run, while the records batched with it commit; the
// chain stays contiguous and verifies. One that says yes is appended.
func TestConditionalRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := context.Background()
	var mu sync.Mutex
	withRan := map[string]bool{}
	rec := func(name string, cond bool) Record {
		return Record{Kind: "execution", Subjects: map[string]string{"request": name},
			If: func(context.Context, *sql.Tx) (bool, error) { return cond, nil },
			With: func(context.Context, *sql.Tx) error {
				mu.Lock()
				defer mu.Unlock()
				withRan[name] = true
				return nil
			}}
	}
	// Several at once, so some share a batch.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = f.lb.Append(ctx, rec(string(rune('a'+i)), i%2 == 0))
		})
	}
	wg.Wait()
	for i, err := range errs {
		name := string(rune('a' + i))
		switch {
		case i%2 == 0 && err != nil:
			t.Errorf("%s (condition true): %v", name, err)
		case i%2 == 1 && !errors.Is(err, ErrNotApplied):
			t.Errorf("%s (condition false): %v, want ErrNotApplied", name, err)
		}
		if withRan[name] != (i%2 == 0) {
			t.Errorf("%s: With ran %v", name, withRan[name])
		}
	}
	e := f.append(Record{Kind: "decision"})
	if e.Seq != 5 {
		t.Fatalf("the next entry is %d, want 5: the four skipped records took no seq", e.Seq)
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
	if _, err := f.lb.Append(ctx, Record{Kind: "execution", If: func(context.Context, *sql.Tx) (bool, error) {
		return false, errors.New("boom")
	}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a failing condition: %v, want ErrUnavailable", err)
	}
}

// TestWriteTimeout: a batch whose transaction does not finish within
// WriteTimeout (a store that stopped answering) fails its appends with
// ErrUnavailable instead of leaving their callers waiting; nothing of it is
// in the chain, and the next append works.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{WriteTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	f.append(Record{Kind: "decision"})
	began := time.Now()
	_, err := f.lb.Append(ctx, Record{Kind: "decision", With: func(ctx context.Context, _ *sql.Tx) error {
		<-ctx.Done() // a statement the store never answers
		return ctx.Err()
	}})
	if !errors.Is(err, ErrUnavailable) || time.Since(began) > 10*time.Second {
		t.Fatalf("a hung batch: %v after %v; want ErrUnavailable after about the write timeout", err, time.Since(began))
	}
	if e := f.append(Record{Kind: "decision"}); e.Seq != 2 {
		t.Fatalf("the next entry is %d, want 2: the hung one is not in the chain", e.Seq)
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
}

// TestThenRecords: a record's Then is appended right after it, in the same
// transaction, under several concurrent appends: the two entries are
// consecutive, in order, their Withs run in order, both are indexed by
// their subjects, and the chain verifies. A record whose If says no
// leaves both out; a Then with an If, Lazy or Then of its own is refused.
func TestThenRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	with := func(name string) func(context.Context, *sql.Tx) error {
		return func(context.Context, *sql.Tx) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		}
	}
	pair := func(id string, cond bool) Record {
		return Record{Kind: "decision", Subjects: map[string]string{"request": id}, Payload: id, With: with(id + "/decision"),
			If:   func(context.Context, *sql.Tx) (bool, error) { return cond, nil },
			Then: &Record{Kind: "execution", Subjects: map[string]string{"request": id}, Payload: id, With: with(id + "/execution")}}
	}
	var wg sync.WaitGroup
	entries := make([]Entry, 8)
	errs := make([]error, 8)
	for i := range entries {
		wg.Go(func() {
			entries[i], errs[i] = f.lb.Append(ctx, pair(string(rune('a'+i)), i != 3))
		})
		if i%2 == 0 {
			wg.Go(func() { f.append(Record{Kind: "other", Payload: i}) })
		}
	}
	wg.Wait()
	for i, err := range errs {
		id := string(rune('a' + i))
		if i == 3 {
			if !errors.Is(err, ErrNotApplied) {
				t.Fatalf("%s: %v, want ErrNotApplied", id, err)
			}
			if es, err := f.lb.Find(ctx, Query{SubjectKey: "request", SubjectValue: id}); err != nil || len(es) != 0 {
				t.Fatalf("%s: %d entries, %v: its If said no, so neither record exists", id, len(es), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if err := f.lb.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		es, err := f.lb.Find(ctx, Query{SubjectKey: "request", SubjectValue: id})
		if err != nil || len(es) != 2 {
			t.Fatalf("%s: %d entries, %v; want its decision and its execution", id, len(es), err)
		}
		if es[0].Seq != entries[i].Seq || es[0].Kind != "decision" || es[1].Kind != "execution" || es[1].Seq != es[0].Seq+1 || es[1].PrevHash != es[0].Hash {
			t.Fatalf("%s: entries %d %s and %d %s (Append said %d): want the decision, then its execution right after it", id, es[0].Seq, es[0].Kind, es[1].Seq, es[1].Kind, entries[i].Seq)
		}
	}
	for i, name := range order {
		if id, kind, _ := strings.Cut(name, "/"); kind == "decision" && (i+1 >= len(order) || order[i+1] != id+"/execution") {
			t.Fatalf("With calls %v: %s's execution With does not follow its decision's", order, id)
		}
	}
	if len(order) != 14 {
		t.Fatalf("With ran %d times, want 14 (7 pairs): %v", len(order), order)
	}
	if rep := f.verify(); !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
	for _, bad := range []Record{
		{Kind: "decision", Then: &Record{Kind: "execution", Lazy: true}},
		{Kind: "decision", Then: &Record{Kind: "execution", If: func(context.Context, *sql.Tx) (bool, error) { return true, nil }}},
		{Kind: "decision", Then: &Record{Kind: "execution", Then: &Record{Kind: "x"}}},
		{Kind: "decision", Then: &Record{Kind: "Not A Kind"}},
	} {
		if _, err := f.lb.Append(ctx, bad); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("a Then of its own kind: %v, want ErrInvalidRecord", err)
		}
	}
}

// TestRecording: a running writer is recording; a batch that fails to
// commit makes it not recording until one commits; a stopped writer is
// not recording.
func TestRecording(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := context.Background()
	f.append(Record{Kind: "decision"})
	if !f.lb.Recording() {
		t.Fatal("a running writer that committed is not recording")
	}
	if _, err := f.lb.Append(ctx, Record{Kind: "decision", With: func(context.Context, *sql.Tx) error {
		return errors.New("the store refused")
	}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a failing With: %v, want ErrUnavailable", err)
	}
	if f.lb.Recording() {
		t.Fatal("recording after a batch failed to commit")
	}
	f.append(Record{Kind: "decision"})
	if !f.lb.Recording() {
		t.Fatal("not recording after a batch committed again")
	}
	f.stop()
	if f.lb.Recording() {
		t.Fatal("a stopped writer is recording")
	}
}
