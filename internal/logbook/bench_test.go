package logbook

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppendGroupCommit measures durable appends from many concurrent
// callers (WAL, synchronous=FULL): each op is one Append that returns after
// its batch committed.
func BenchmarkAppendGroupCommit(b *testing.B) {
	f := newFixture(b, Config{})
	ctx := context.Background()
	rec := Record{
		Kind:     "decision",
		Subjects: map[string]string{"request": "r-0123456789", "delegation": "d-abcdef", "principal": "agent:ops-bot"},
		Payload:  map[string]any{"outcome": "conforms", "rule": 2, "tier": "A", "canonical_sql": "UPDATE public.orders SET status = 'failed' WHERE id = 42"},
	}
	b.SetParallelism(64) // 64 × GOMAXPROCS appenders
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.lb.Append(ctx, rec); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
}

// BenchmarkVerify measures a full Verify of a 100,000-entry log.
func BenchmarkVerify(b *testing.B) {
	const n = 100_000
	f := newFixture(b, Config{})
	ctx := context.Background()
	fillLog(b, f, n)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		rep, err := f.lb.Verify(ctx, f.v)
		if err != nil || !rep.OK || rep.Entries != n {
			b.Fatalf("Verify: %v %v", rep, err)
		}
	}
	b.ReportMetric(float64(b.N)*n/time.Since(start).Seconds(), "entries/s")
}

// fillLog appends n entries through the writer in large batches, bypassing
// the queue for speed.
func fillLog(tb testing.TB, f *fixture, n int) {
	tb.Helper()
	f.stop()
	ctx := context.Background()
	w, err := f.lb.newWriter(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.close()
	const batch = 5000
	for done := 0; done < n; done += batch {
		reqs := make([]*request, 0, batch)
		for i := done; i < done+batch && i < n; i++ {
			p, err := prepare(Record{
				Kind:     "decision",
				Subjects: map[string]string{"request": fmt.Sprintf("r-%d", i)},
				Payload:  map[string]any{"outcome": "conforms", "i": i, "canonical_sql": "UPDATE public.orders SET status = 'failed' WHERE id = 42"},
			}, 1<<20)
			if err != nil {
				tb.Fatal(err)
			}
			reqs = append(reqs, &request{rec: p})
		}
		if _, err := w.write(ctx, reqs, cpDue); err != nil {
			tb.Fatal(err)
		}
	}
}
