// Package benchtest runs bench.Run as a benchmark's load generator in a
// child process of the test binary, so the load generator's CPU is its own
// and never counted as the control plane's.
//
// A package using it declares
//
//	func TestBenchClient(t *testing.T) { benchtest.ServeChild(t) }
//
// and calls benchtest.Run from its benchmark.
package benchtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
)

// clientEnv carries the child's bench.Config; resultPrefix marks the line
// of its output that holds its bench.Result.
const (
	clientEnv    = "HARBORMASTER_BENCH_CLIENT"
	resultPrefix = "harbormaster-bench-result: "
)

// EnvStoreDir names a directory for a benchmark's SQLite store (StoreDir),
// to measure the path on another device: the device's fsync is on every
// governed statement's path (bench.ProbeFsync). A tmpfs there gives the
// path without that fsync, a bound for apportioning the cost, never a
// durable configuration.
const EnvStoreDir = "HARBORMASTER_BENCH_STORE_DIR"

// StoreDir is a fresh directory for a benchmark's SQLite store: under
// EnvStoreDir if it is set, else a temporary directory of b's. It is
// removed when b ends.
func StoreDir(b *testing.B) string {
	b.Helper()
	parent := os.Getenv(EnvStoreDir)
	if parent == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "harbormaster-bench-store-")
	if err != nil {
		b.Fatalf("%s: %v", EnvStoreDir, err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// ReportFsync reports a result's store fsync as the store-fsync-p50-µs
// metric, if it has one.
func ReportFsync(b *testing.B, prefix string, r *bench.Result) {
	if r.StoreFsync != nil {
		b.ReportMetric(r.StoreFsync.P50Us, prefix+"store-fsync-p50-µs")
	}
}

// Run runs bench.Run with cfg in a child process (the test binary's
// TestBenchClient) and returns its result.
func Run(b *testing.B, cfg bench.Config) *bench.Result {
	b.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(b.Context(), os.Args[0], "-test.run=^TestBenchClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), clientEnv+"="+string(raw))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("load generator: %v\n%s", err, out.String())
	}
	for line := range strings.Lines(out.String()) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), resultPrefix); ok {
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

// ServeChild is the body of TestBenchClient: in the child process Run
// starts, it runs the load and prints its result; anywhere else it skips.
func ServeChild(t *testing.T) {
	raw := os.Getenv(clientEnv)
	if raw == "" {
		t.Skip("a benchmark's load generator: runs only as the child process of benchtest.Run")
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
	fmt.Printf("%s%s\n", resultPrefix, out)
}
