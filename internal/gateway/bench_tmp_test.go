package gateway_test

import (
	"math/rand/v2"
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

)

// BenchmarkGovernedVsDirect measures what Harbormaster adds to a Tier A
// single-row UPDATE: the same statement through POST /v1/statements and
// directly with pgx, side by side in one run. It reports the p50 and p99
// latency added at one client and the throughput ratio at 16 clients.
//
//	go test -run '^$' -bench GovernedVsDirect -benchtime 400x ./internal/gateway/
func BenchmarkTmpNewLiterals(b *testing.B) {
	srv, pool, client := benchSystem(b, benchDelegation, 64)

	governed := func(id int) error {
		return postStatement(client, srv.URL, fmt.Sprintf("UPDATE orders SET updated_at = now() WHERE id = %d AND id <> %d", id, 1000+rand.Int64N(1<<40)))
	}
	direct := func(id int) error {
		_, err := pool.Exec(context.Background(), fmt.Sprintf("UPDATE orders SET updated_at = now() WHERE id = %d AND id <> %d", id, 1000+rand.Int64N(1<<40)), pgx.QueryExecModeExec)
		return err
	}

	// One client, interleaved, so both see the same machine state.
	var gLat, dLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := 1 + i%40
		t0 := time.Now()
		if err := direct(id); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := governed(id); err != nil {
			b.Fatal(err)
		}
		dLat = append(dLat, t1.Sub(t0))
		gLat = append(gLat, time.Since(t1))
	}
	b.StopTimer()
	p := func(xs []time.Duration, q float64) time.Duration {
		s := append([]time.Duration(nil), xs...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(q*float64(len(s)-1))]
	}
	b.ReportMetric(float64(p(dLat, 0.5).Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64((p(gLat, 0.5)-p(dLat, 0.5)).Microseconds())/1000, "added-p50-ms")
	b.ReportMetric(float64((p(gLat, 0.99)-p(dLat, 0.99)).Microseconds())/1000, "added-p99-ms")

	// Sixteen clients, each for a fixed time. Alongside: the whole
	// machine's CPU time per statement (every process: PostgreSQL, the
	// control plane, the benchmark's own clients), which is what bounds
	// throughput when they share the machine's cores.
	var cpuPer [2]float64
	phase := 0
	through := func(f func(int) error) float64 {
		busy0, ok0 := machineBusy()
		defer func() { phase++ }()
		var n atomic.Int64
		var wg sync.WaitGroup
		stop := time.Now().Add(3 * time.Second)
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					// Each client owns rows so clients do not queue on row locks.
					if err := f(1 + (c+16*i)%40); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}(c)
		}
		wg.Wait()
		if busy1, ok1 := machineBusy(); ok0 && ok1 && n.Load() > 0 {
			cpuPer[phase] = float64((busy1 - busy0).Microseconds()) / float64(n.Load())
		}
		return float64(n.Load()) / 3
	}
	d16 := through(direct)
	g16 := through(governed)
	b.ReportMetric(d16, "direct-16c-stmt/s")
	b.ReportMetric(g16, "governed-16c-stmt/s")
	b.ReportMetric(g16/d16, "throughput-ratio-16c")
	if cpuPer[0] > 0 && cpuPer[1] > 0 {
		b.ReportMetric(cpuPer[0], "direct-machine-cpu-µs/stmt")
		b.ReportMetric(cpuPer[1], "governed-machine-cpu-µs/stmt")
	}
}

