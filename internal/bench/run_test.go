package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// system starts a control plane over a fresh demo target with the example
// delegations, and the benchmark's if withBench, its API on an HTTP server.
func system(t *testing.T, withBench bool) (api, dsn string) {
	t.Helper()
	dsn = pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: gatewaytest.NewKeys(t)})
	sys.AddExamples(t)
	if withBench {
		y := bench.Delegation(gatewaytest.Agent, gatewaytest.Target, time.Now().Add(time.Hour), "test")
		sig := gatewaytest.Sign(t, sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, y, sys.Pilot.Catalog()))
		if _, _, err := sys.Gateway.AddDelegation(context.Background(), y, sig, "bench"); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(sys.API.Handler())
	t.Cleanup(srv.Close)
	return srv.URL, dsn
}

// TestRun runs a short benchmark. It checks that the figures are there and
// consistent, never how fast anything was.
func TestRun(t *testing.T) {
	t.Parallel()
	api, dsn := system(t, true)
	res, err := bench.Run(t.Context(), bench.Config{API: api, Token: gatewaytest.AgentToken, DSN: dsn,
		Statements: 10, Warmup: 2, Duration: 200 * time.Millisecond, Clients: 4, NodePID: os.Getpid(), StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	t.Logf("result: %s", out)
	if f := res.StoreFsync; f == nil || f.Samples == 0 || !(f.P50Us > 0) {
		t.Errorf("store_fsync %+v: want the probe's figures (StoreDir was set)", f)
	}
	for name, v := range map[string]float64{
		"direct_p50_ms": res.DirectP50Ms, "direct_p99_ms": res.DirectP99Ms, "governed_p50_ms": res.GovernedP50Ms,
		"governed_p99_ms": res.GovernedP99Ms, "direct_tps_16": res.DirectTPS16, "governed_tps_16": res.GovernedTPS16, "ratio_16": res.Ratio16,
	} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s = %v, want a positive number", name, v)
		}
	}
	if res.DirectStatements16 < 4 || res.GovernedStatements16 < 4 || res.Statements != 10 || res.Clients != 4 {
		t.Errorf("counts: %+v", res)
	}
	if got, want := res.Ratio16, res.GovernedTPS16/res.DirectTPS16; math.Abs(got-want) > 1e-9*want {
		t.Errorf("ratio_16 %v, want %v", got, want)
	}
	if got, want := res.AddedP50Ms, res.GovernedP50Ms-res.DirectP50Ms; math.Abs(got-want) > 1e-9 {
		t.Errorf("added_p50_ms %v, want %v", got, want)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		if res.Note == "" {
			t.Error("no note that the node and the clients share a process")
		}
		if res.PIDs.Postgres == 0 || res.PIDs.Harbormaster != os.Getpid() || res.PIDs.Clients != os.Getpid() {
			t.Errorf("pids %+v", res.PIDs)
		}
		for _, c := range []bench.CPU{res.CPU.Direct, res.CPU.Governed} {
			// The node runs in this process, so it has no part of its own.
			if c.Postgres == nil || c.Harbormaster != nil || c.Clients == nil || c.Machine == nil || c.Other != nil {
				t.Errorf("CPU split incomplete: %+v", c)
			} else if *c.Postgres < 0 || *c.Machine < 0 {
				t.Errorf("negative CPU time: %+v", c)
			}
		}
	}
}

// TestRunFailsOnReferral: without the benchmark's delegation the demo's own
// do not let the statement read total_cents, so it is referred, and the
// run stops with the node's reasons.
func TestRunFailsOnReferral(t *testing.T) {
	t.Parallel()
	api, dsn := system(t, false)
	_, err := bench.Run(t.Context(), bench.Config{API: api, Token: gatewaytest.AgentToken, DSN: dsn, Statements: 2, Warmup: -1, Clients: 2})
	var ne *bench.NotExecutedError
	if !errors.As(err, &ne) || !ne.Governed || ne.Outcome != "referred" || ne.RequestID == "" {
		t.Fatalf("error %v, want a referred governed statement", err)
	}
	if !strings.Contains(err.Error(), "total_cents") {
		t.Errorf("error %q does not give the reason", err)
	}
}

// TestRunFailsOnBadToken: a refused request is a failure too.
func TestRunFailsOnBadToken(t *testing.T) {
	t.Parallel()
	api, dsn := system(t, true)
	_, err := bench.Run(t.Context(), bench.Config{API: api, Token: "not-a-token", DSN: dsn, Statements: 2, Warmup: -1, Clients: 2})
	var ne *bench.NotExecutedError
	if !errors.As(err, &ne) || !strings.Contains(ne.Outcome, "401") {
		t.Fatalf("error %v, want HTTP 401", err)
	}
}
