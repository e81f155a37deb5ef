package pgwire_test

import (
	"context"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/bench/benchtest"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// BenchmarkWireGovernedVsDirect is the honest benchmark (package bench)
// twice over one node in this process, side by side: governed over HTTP
// (POST /v1/statements) against direct, then governed over the wire front
// (pgconn ExecParams, as the direct statements go) against direct. Every
// statement is a new text. b.N is the statements of each kind at one
// client; the 16-client phases last 3 s each. The clients run in a child
// process (this test binary again, TestBenchClient), so the CPU split is
// exact.
//
//	go test -run '^$' -bench WireGovernedVsDirect -benchtime 1000x ./internal/pgwire/
func BenchmarkWireGovernedVsDirect(b *testing.B) {
	dsn := pgtmptest.NewDatabase(b, shared.Server(b))
	gatewaytest.LoadShop(b, dsn)
	storeDir := benchtest.StoreDir(b)
	sys := gatewaytest.Start(b, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(storeDir, "store.db"), Keys: gatewaytest.NewKeys(b)})
	sys.AddExamples(b)
	y := bench.Delegation(gatewaytest.Agent, gatewaytest.Target, time.Now().Add(24*time.Hour), "pgwire")
	sig := gatewaytest.Sign(b, sys.Opts.Keys.Grantor, gatewaytest.Canonical(b, y, sys.Pilot.Catalog()))
	if _, _, err := sys.Gateway.AddDelegation(context.Background(), y, sig, "bench"); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(sys.API.Handler())
	defer srv.Close()
	front, err := pgwire.New(sys.Gateway, pgwire.Config{Agents: []pgwire.Agent{{Principal: gatewaytest.Agent,
		TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken), SCRAM: pgwire.NewVerifier(gatewaytest.AgentToken)}}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- front.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	wireURL := (&url.URL{Scheme: "postgres", User: url.UserPassword(gatewaytest.Agent, gatewaytest.AgentToken), Host: ln.Addr().String(),
		Path: "/" + gatewaytest.Target, RawQuery: "sslmode=disable"}).String()

	base := bench.Config{Token: gatewaytest.AgentToken, Target: gatewaytest.Target, DSN: dsn,
		Statements: b.N, Duration: 3 * time.Second, Clients: 16, NodePID: os.Getpid(), StoreDir: storeDir}
	if b.N == 1 {
		base.Duration, base.Warmup = 100*time.Millisecond, -1
	}
	b.ResetTimer()
	httpCfg := base
	httpCfg.API = srv.URL
	res := map[string]*bench.Result{"http": benchtest.Run(b, httpCfg)}
	wireCfg := base
	wireCfg.Wire = wireURL
	res["wire"] = benchtest.Run(b, wireCfg)
	b.StopTimer()
	for front, r := range res {
		b.ReportMetric(r.DirectP50Ms, front+"-direct-p50-ms")
		b.ReportMetric(r.AddedP50Ms, front+"-added-p50-ms")
		b.ReportMetric(r.AddedP99Ms, front+"-added-p99-ms")
		b.ReportMetric(r.DirectTPS16, front+"-direct-16c-stmt/s")
		b.ReportMetric(r.GovernedTPS16, front+"-governed-16c-stmt/s")
		b.ReportMetric(r.Ratio16, front+"-ratio-16c")
		benchtest.ReportFsync(b, front+"-", r)
		for phase, c := range map[string]bench.CPU{"direct": r.CPU.Direct, "governed": r.CPU.Governed} {
			for part, v := range map[string]*float64{"postgres": c.Postgres, "harbormaster": c.Harbormaster, "clients": c.Clients} {
				if v != nil {
					b.ReportMetric(*v, front+"-"+phase+"-"+part+"-cpu-µs/stmt")
				}
			}
		}
	}
}

// TestBenchClient is BenchmarkWireGovernedVsDirect's load generator (benchtest.Run).
func TestBenchClient(t *testing.T) { benchtest.ServeChild(t) }
