package logbook

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkAppendGroupCommit measures durable appends from many concurrent
// callers (WAL, synchronous=FULL): each op is one Append that returns after
// its batch committed.
func BenchmarkAppendGroupCommit(b *testing.B) {
	f := newFixture(b, Config{})
	ctx := context.Background()
	var ids atomic.Int64
	b.SetParallelism(64) // 64 × GOMAXPROCS appenders
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// A new request id per entry, time-ordered (as UUIDv7 would be),
			// plus two hot subjects: the shape of a decision entry.
			id := ids.Add(1)
			rec := Record{
				Kind:     "decision",
				Subjects: map[string]string{"request": fmt.Sprintf("r-%012d", id), "delegation": "d-abcdef", "principal": "agent:ops-bot"},
				Payload:  map[string]any{"outcome": "conforms", "rule": 2, "tier": "A", "canonical_sql": "UPDATE public.orders SET status = 'failed' WHERE id = 42", "n": id},
			}
			if _, err := f.lb.Append(ctx, rec); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
	// CPU per append (process user+system), a figure a loaded machine
	// distorts less than the wall-clock rate.
	b.ReportMetric(float64(cpuTime()-cpu)/1e3/float64(b.N), "cpu-µs/append")
}

// BenchmarkVerify measures a full Verify of a 100,000-entry log.
func BenchmarkVerify(b *testing.B) {
	const n = 100_000
	f := newFixture(b, Config{})
	ctx := context.Background()
	fillLog(b, f, n)
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	for range b.N {
		rep, err := f.lb.Verify(ctx, f.v)
		if err != nil || !rep.OK || rep.Entries != n {
			b.Fatalf("Verify: %v %v", rep, err)
		}
	}
	b.ReportMetric(float64(b.N)*n/time.Since(start).Seconds(), "entries/s")
	b.ReportMetric(float64(cpuTime()-cpu)/1e3/(float64(b.N)*n), "cpu-µs/entry")
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
				Subjects: map[string]string{"request": fmt.Sprintf("r-%012d", i), "principal": "agent:ops-bot"},
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
		if err := w.settle(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

// cpuTime is the process's user plus system CPU time, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
