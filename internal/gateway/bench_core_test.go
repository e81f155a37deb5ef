package gateway_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// BenchmarkGovernedCore is a prototype measurement for the ratio target:
// the honest benchmark's workloads (the single-row UPDATE and SELECT) (a new text every statement, clients on
// rows of their own) through Gateway.Submit called directly by 16
// goroutines, with no HTTP on either side, side by side with the direct
// run. It is what a node costs behind a front cheaper than HTTP and JSON
// (the PostgreSQL wire front is such a front), with the clients' own cost
// near the direct run's. It reports statements per second, the ratio, and
// CPU per statement: this process (the node, and the 16 goroutines, whose
// own cost is one Sprintf) and the whole machine (the rest is PostgreSQL).
//
//	go test -run '^$' -bench GovernedCore -benchtime 1x ./internal/gateway/
func BenchmarkGovernedCore(b *testing.B) {
	sys, dsn := benchNode(b, "core")
	const clients = 16
	ctx := context.Background()
	conns := make([]*pgconn.PgConn, clients)
	for i := range conns {
		c, err := pgconn.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	var lit atomic.Int64
	lit.Store(1_000_000_000_000)
	for _, w := range []struct{ name, form string }{
		{"update", "UPDATE orders SET updated_at = now() WHERE id = %d AND total_cents <> %d"},
		{"read", "SELECT id, total_cents FROM orders WHERE id = %d AND total_cents <> %d"},
	} {
		b.Run(w.name, func(b *testing.B) {
			sql := func(c, i int) string {
				id := bench.DefaultFirstID + (c+clients*i)%(bench.DefaultLastID-bench.DefaultFirstID+1)
				return fmt.Sprintf(w.form, id, lit.Add(1))
			}
			direct := func(c, i int) error { return bench.ExecDirect(ctx, conns[c], sql(c, i)) }
			governed := func(c, i int) error {
				r, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql(c, i))
				if err != nil {
					return err
				}
				if r.Outcome != "executed" {
					return fmt.Errorf("%s: %v", r.Outcome, r.Reasons)
				}
				return nil
			}
			phase := func(f func(c, i int) error, d time.Duration) (tps, procUS, machineUS, allocs float64) {
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				p0, c0 := processCPUNow(), machineBusyOrZero()
				var n atomic.Int64
				var wg sync.WaitGroup
				stop := time.Now().Add(d)
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func(c int) {
						defer wg.Done()
						for i := 0; time.Now().Before(stop); i++ {
							if err := f(c, i); err != nil {
								b.Error(err)
								return
							}
							n.Add(1)
						}
					}(c)
				}
				wg.Wait()
				k := float64(n.Load())
				p, c := processCPUNow()-p0, machineBusyOrZero()-c0
				runtime.ReadMemStats(&m1)
				return k / d.Seconds(), float64(p.Microseconds()) / k, float64(c.Microseconds()) / k, float64(m1.Mallocs-m0.Mallocs) / k
			}
			d := 3 * time.Second
			if b.N == 1 {
				phase(governed, 300*time.Millisecond) // warm the shapes and the connections
			}
			b.ResetTimer()
			dt, dp, dm, _ := phase(direct, d)
			gt, gp, gm, ga := phase(governed, d)
			b.StopTimer()
			b.ReportMetric(dt, "direct-16c-stmt/s")
			b.ReportMetric(gt, "governed-16c-stmt/s")
			b.ReportMetric(gt/dt, "throughput-ratio-16c")
			b.ReportMetric(dp, "direct-process-cpu-µs/stmt")
			b.ReportMetric(dm, "direct-machine-cpu-µs/stmt")
			b.ReportMetric(gp, "governed-process-cpu-µs/stmt")
			b.ReportMetric(gm, "governed-machine-cpu-µs/stmt")
			// The process's heap allocations per governed statement (the
			// node's, the clients' Sprintf and, in the background, the
			// logbook's batches): the figure GC's share follows.
			b.ReportMetric(ga, "governed-allocs/stmt")
		})
	}
}

func processCPUNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func machineBusyOrZero() time.Duration {
	d, _ := machineBusy()
	return d
}
