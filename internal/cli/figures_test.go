package cli_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// The figures of docs/performance.md, "Issue 11": benchmarks, not run by
// go test unless asked (-bench), against three serve processes on one
// PostgreSQL store with the Pilot in its own process (startNodes).
var (
	soakAgents   = flag.Int("soak.agents", 500, "BenchmarkSoak: concurrent agents")
	soakDuration = flag.Duration("soak.duration", 60*time.Second, "BenchmarkSoak: how long they send")
)

// BenchmarkSwitchPropagation flips Tier B for shop through node 1, b.N
// times, and measures how long nodes 2 and 3 take to read it from the
// store (switch_poll 1s, the default). Run with -benchtime=40x.
func BenchmarkSwitchPropagation(b *testing.B) {
	s := startNodes(b, 3)
	s.setSwitch(b, s.nodes[0].Addr, "", true)
	var delays []time.Duration
	last := map[bool]time.Time{}
	on := false
	for b.Loop() {
		on = !on
		// The same signed body twice in one second is one request (a
		// replay); and a random pause, so flips land at every phase of the
		// nodes' polls, not just after one.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		if wait := time.Second + 50*time.Millisecond - time.Since(last[on]); wait > 0 {
			time.Sleep(wait)
		}
		s.setSwitch(b, s.nodes[0].Addr, gatewaytest.Target, on)
		set := time.Now()
		last[on] = set
		for i, p := range s.nodes[1:] {
			for s.tierB(b, p.Addr) != on {
				if time.Since(set) > time.Minute {
					b.Fatalf("node %d never saw Tier B %v", i+2, on)
				}
				time.Sleep(2 * time.Millisecond)
			}
			delays = append(delays, time.Since(set))
		}
	}
	slices.Sort(delays)
	pct := func(p float64) float64 {
		return delays[min(len(delays)-1, int(p*float64(len(delays))))].Seconds() * 1000
	}
	b.ReportMetric(pct(0.5), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(delays[len(delays)-1].Seconds()*1000, "max_ms")
	b.ReportMetric(float64(len(delays)), "readings")
}

// BenchmarkSoak runs -soak.agents agents (500) for -soak.duration (60s)
// against the three nodes, round robin: reads of single orders with a new
// literal each, and one in ten an increment of a tally row. It reports
// the answers, their latency, the decisions lost (an answer whose request
// the store or the logbook does not hold as answered: faults.Check), and
// each node's peak resident memory. Run with -benchtime=1x.
func BenchmarkSoak(b *testing.B) {
	s := startNodes(b, 3)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: *soakAgents + 16,
		MaxIdleConnsPerHost: *soakAgents + 16, IdleConnTimeout: time.Minute}}
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), *soakDuration)
		var mu sync.Mutex
		answered := map[string]string{}
		var lat []time.Duration
		var errs, referred atomic.Int64
		var wg sync.WaitGroup
		for a := range *soakAgents {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(a), 11))
				var mine []time.Duration
				for i := 0; ctx.Err() == nil; i++ {
					sql := fmt.Sprintf("SELECT id, status FROM orders WHERE id = %d", 1+r.IntN(240))
					if r.IntN(10) == 0 {
						sql = fmt.Sprintf("UPDATE tally SET n = n + 1 WHERE id = %d", 1+r.IntN(20))
					}
					node := (a + i) % len(s.nodes)
					began := time.Now()
					ans, err := servetest.Post(context.WithoutCancel(ctx), client, s.nodes[node].Addr, gatewaytest.AgentToken, gatewaytest.Target, sql)
					if err != nil {
						errs.Add(1)
						continue
					}
					mine = append(mine, time.Since(began))
					if ans.Outcome != gateway.OutcomeExecuted {
						referred.Add(1)
					}
					mu.Lock()
					answered[ans.RequestID] = ans.Outcome
					mu.Unlock()
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		cancel()
		peak := make([]float64, len(s.nodes))
		for i, p := range s.nodes {
			peak[i] = peakRSSMiB(b, p.Cmd.Process.Pid)
		}
		st, err := store.Open(context.Background(), s.store, store.WithUnsafeNoFsync())
		if err != nil {
			b.Fatal(err)
		}
		// Executions are recorded while their agents are answered: wait
		// for the last ones before counting.
		servetest.WaitUntil(b, "no request left running", func() bool {
			var n int
			if err := st.ReadDB().QueryRowContext(context.Background(), "SELECT count(*) FROM requests WHERE status IN ('running', 'deciding')").Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n == 0
		})
		rep, err := faults.Check{Store: st, Origin: s.d.Opts.Name + "/logbook", TargetDSN: s.dsn, Answered: answered}.Run(context.Background())
		st.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range rep.Violations {
			b.Error(v)
		}
		slices.Sort(lat)
		pct := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))].Seconds() * 1000 }
		b.ReportMetric(float64(len(lat)), "answers")
		b.ReportMetric(float64(len(lat))/soakDuration.Seconds(), "answers/s")
		b.ReportMetric(float64(errs.Load()), "errors")
		b.ReportMetric(float64(referred.Load()), "referred")
		b.ReportMetric(float64(len(rep.Violations)), "violations")
		b.ReportMetric(pct(0.5), "p50_ms")
		b.ReportMetric(pct(0.99), "p99_ms")
		for i, mib := range peak {
			b.ReportMetric(mib, fmt.Sprintf("node%d_peak_MiB", i+1))
		}
		b.Logf("%d agents for %s: %s", *soakAgents, *soakDuration, rep.Summary())
	}
}

// peakRSSMiB is a process's peak resident set (VmHWM), in MiB.
func peakRSSMiB(t testing.TB, pid int) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no VmHWM for process %d", pid)
	return 0
}
