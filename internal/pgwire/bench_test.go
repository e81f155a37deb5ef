package pgwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// benchClientEnv carries the load generator's bench.Config (JSON) to the
// child process that runs TestBenchClient.
const benchClientEnv = "HARBORMASTER_PGWIRE_BENCH_CLIENT"

const benchResultPrefix = "harbormaster-bench-result: "

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
	sys := gatewaytest.Start(b, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(b.TempDir(), "store.db"), Keys: gatewaytest.NewKeys(b)})
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
		Statements: b.N, Duration: 3 * time.Second, Clients: 16, NodePID: os.Getpid()}
	if b.N == 1 {
		base.Duration, base.Warmup = 100*time.Millisecond, -1
	}
	b.ResetTimer()
	httpCfg := base
	httpCfg.API = srv.URL
	res := map[string]*bench.Result{"http": runLoadGenerator(b, httpCfg)}
	wireCfg := base
	wireCfg.Wire = wireURL
	res["wire"] = runLoadGenerator(b, wireCfg)
	b.StopTimer()
	for front, r := range res {
		b.ReportMetric(r.DirectP50Ms, front+"-direct-p50-ms")
		b.ReportMetric(r.AddedP50Ms, front+"-added-p50-ms")
		b.ReportMetric(r.AddedP99Ms, front+"-added-p99-ms")
		b.ReportMetric(r.DirectTPS16, front+"-direct-16c-stmt/s")
		b.ReportMetric(r.GovernedTPS16, front+"-governed-16c-stmt/s")
		b.ReportMetric(r.Ratio16, front+"-ratio-16c")
		for phase, c := range map[string]bench.CPU{"direct": r.CPU.Direct, "governed": r.CPU.Governed} {
			for part, v := range map[string]*float64{"postgres": c.Postgres, "harbormaster": c.Harbormaster, "clients": c.Clients} {
				if v != nil {
					b.ReportMetric(*v, front+"-"+phase+"-"+part+"-cpu-µs/stmt")
				}
			}
		}
	}
}

// runLoadGenerator runs bench.Run with cfg in a child process and returns
// its result.
func runLoadGenerator(b *testing.B, cfg bench.Config) *bench.Result {
	b.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(b.Context(), os.Args[0], "-test.run=^TestBenchClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), benchClientEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("load generator: %v\n%s", err, out.String())
	}
	for line := range strings.Lines(out.String()) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), benchResultPrefix); ok {
			var res bench.Result
			if err := json.Unmarshal([]byte(rest), &res); err != nil {
				b.Fatal(err)
			}
			return &res
		}
	}
	b.Fatalf("load generator gave no result:\n%s", out.String())
	return nil
}

// TestBenchClient is BenchmarkWireGovernedVsDirect's load generator. It
// runs only in the child process the benchmark starts.
func TestBenchClient(t *testing.T) {
	raw := os.Getenv(benchClientEnv)
	if raw == "" {
		t.Skip("the load generator of BenchmarkWireGovernedVsDirect: runs only as its child process")
	}
	var cfg bench.Config
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	res, err := bench.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", benchResultPrefix, out)
}
