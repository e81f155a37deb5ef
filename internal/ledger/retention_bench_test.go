package ledger

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/logbook/logbooktest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// BenchmarkRetainedStore is the store's size under a steady load with and
// without retention: every iteration is one simulated hour of 1,000
// executed statements (a new literal each) on a SQLite store; with a
// retention of 6h, each hour's prune removes what is older. Run it with
// -benchtime=24x (a day); it reports the file's size at the end (with its
// WAL), the bytes it holds per statement written, and how long pruning
// took per 10,000 entries (a step, during which the store's write lock is
// held for the deletion).
//
//	go test -run '^$' -bench RetainedStore -benchtime 24x ./internal/ledger
func BenchmarkRetainedStore(b *testing.B) {
	for _, retain := range []time.Duration{0, 6 * time.Hour} {
		b.Run(fmt.Sprintf("retain=%s", retain), func(b *testing.B) {
			ctx := context.Background()
			var ns atomic.Int64 // the logbook's writer reads it too
			ns.Store(retentionT0.UnixNano())
			clock := func() time.Time { return time.Unix(0, ns.Load()).UTC() }
			dir := b.TempDir()
			st, lb := logbooktest.RunningWith(b, "retention-bench", filepath.Join(dir, "store.db"), clock, logbook.Config{})
			l, err := New(ctx, Config{Clock: clock}, st, lb)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(l.Drain)
			const perHour = 1000
			n := 0
			var pruneTime time.Duration
			var pruned int64
			var held time.Duration
			for b.Loop() {
				for i := range perHour {
					n++
					req := &Request{ID: fmt.Sprintf("req_%08d", n), Principal: "agent", Target: "shop",
						SQL:       fmt.Sprintf("UPDATE orders SET status = 'x%d' WHERE id = %d", n, i),
						Canonical: "UPDATE orders SET status = $1 WHERE id = $2", Outcome: OutcomeReferred, Path: "compiled",
						MarqueID: fmt.Sprintf("mq_%08d", n), Reasons: []string{"inside the delegation"}, Created: clock()}
					if err := l.Decide(ctx, req, nil); err != nil {
						b.Fatal(err)
					}
					res := &pilot.Result{Outcome: pilot.Executed, RowsAffected: 1,
						ExecutedSQL: "UPDATE public.orders SET status = $1 WHERE id = $2::int", ExecutedArgs: []any{fmt.Sprintf("x%d", n), i}}
					req.ApplyResult(res)
					if err := l.Executed(ctx, req, res); err != nil {
						b.Fatal(err)
					}
				}
				ns.Add(int64(time.Hour))
				if _, err := lb.Checkpoint(ctx); err != nil {
					b.Fatal(err)
				}
				if err := lb.Settle(ctx); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				p, err := l.Prune(ctx, Retention{Retain: retain})
				if err != nil {
					b.Fatal(err)
				}
				if p.Entries > 0 {
					pruneTime += time.Since(t0)
					pruned += p.Entries
					held = max(held, p.Held)
				}
			}
			var size int64
			for _, f := range []string{"store.db", "store.db-wal"} {
				if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
					size += fi.Size()
				}
			}
			b.ReportMetric(float64(size)/1e6, "store-MB")
			b.ReportMetric(float64(size)/float64(n), "bytes/stmt")
			if pruned > 0 {
				// What a prune holds the store for, per 10,000 entries (one step).
				b.ReportMetric(float64(pruneTime.Milliseconds())*10_000/float64(pruned), "prune-ms/10k-entries")
				b.ReportMetric(float64(held.Microseconds())/1000, "max-held-ms")
			}
		})
	}
}
