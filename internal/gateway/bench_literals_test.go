package gateway_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/bench/benchtest"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// BenchmarkHonestGovernedVsDirect is the honest benchmark (package bench)
// over a node in this process: the demo's target and delegations plus the
// benchmark's, the API on an HTTP server. The clients run in a child
// process (this test binary again, TestBenchClient), so the CPU split per
// statement is exact: PostgreSQL (the shared test server's processes),
// Harbormaster (this process) and the clients (the child). Every statement
// is a new text. b.N is the statements of each kind at one client; the
// 16-client phases last 3 s each (0.1 s in the framework's first, b.N = 1,
// probe run). The target runs with durability off (pgtmptest), unlike the
// demo's.
//
//	go test -run '^$' -bench HonestGovernedVsDirect -benchtime 1000x ./internal/gateway/
func BenchmarkHonestGovernedVsDirect(b *testing.B) {
	storeDir := benchtest.StoreDir(b)
	sys, dsn := benchNodeIn(b, "gateway", filepath.Join(storeDir, "store.db"))
	srv := httptest.NewServer(sys.API.Handler())
	defer srv.Close()

	cfg := bench.Config{API: srv.URL, Token: gatewaytest.AgentToken, Target: gatewaytest.Target, DSN: dsn,
		Statements: b.N, Duration: 3 * time.Second, Clients: 16, NodePID: os.Getpid(), StoreDir: storeDir}
	if b.N == 1 {
		cfg.Duration, cfg.Warmup = 100*time.Millisecond, -1
	}
	b.ResetTimer()
	res := benchtest.Run(b, cfg)
	b.StopTimer()

	b.ReportMetric(res.DirectP50Ms, "direct-p50-ms")
	b.ReportMetric(res.GovernedP50Ms, "governed-p50-ms")
	b.ReportMetric(res.AddedP50Ms, "added-p50-ms")
	b.ReportMetric(res.AddedP99Ms, "added-p99-ms")
	b.ReportMetric(res.DirectTPS16, "direct-16c-stmt/s")
	b.ReportMetric(res.GovernedTPS16, "governed-16c-stmt/s")
	b.ReportMetric(res.Ratio16, "throughput-ratio-16c")
	benchtest.ReportFsync(b, "", res)
	for phase, c := range map[string]bench.CPU{"direct": res.CPU.Direct, "governed": res.CPU.Governed} {
		for part, v := range map[string]*float64{"postgres": c.Postgres, "harbormaster": c.Harbormaster, "clients": c.Clients, "machine": c.Machine} {
			if v != nil {
				b.ReportMetric(*v, phase+"-"+part+"-cpu-µs/stmt")
			}
		}
	}
}

// benchNode starts a node over a fresh demo target with the two example
// delegations and the honest benchmark's (bench.Delegation, for run).
func benchNode(b *testing.B, run string) (*gatewaytest.System, string) {
	b.Helper()
	return benchNodeIn(b, run, storeLocation(b))
}

// benchNodeIn is benchNode with its store at storePath.
func benchNodeIn(b *testing.B, run, storePath string) (*gatewaytest.System, string) {
	b.Helper()
	dsn := pgtmptestDatabase(b)
	sys := gatewaytest.Start(b, gatewaytest.Options{TargetDSN: dsn, StorePath: storePath, Keys: gatewaytest.NewKeys(b)})
	sys.AddExamples(b)
	y := bench.Delegation(gatewaytest.Agent, gatewaytest.Target, time.Now().Add(24*time.Hour), run)
	sig := gatewaytest.Sign(b, sys.Opts.Keys.Grantor, gatewaytest.Canonical(b, y, sys.Pilot.Catalog()))
	if _, _, err := sys.Gateway.AddDelegation(context.Background(), y, sig, "bench"); err != nil {
		b.Fatal(err)
	}
	return sys, dsn
}

// TestBenchClient is BenchmarkHonestGovernedVsDirect's load generator (benchtest.Run).
func TestBenchClient(t *testing.T) { benchtest.ServeChild(t) }
