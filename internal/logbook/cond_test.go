package logbook

import (
	"context"
	"database/sql"
	"errors"
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
