package cli_test

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
)

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startDemo runs harbormaster demo (this test binary as the command, see
// TestMain) in its own process, waits until its tour is over and it
// serves, and returns its --info file. It is interrupted when t ends.
func startDemo(t *testing.T) string {
	t.Helper()
	info := filepath.Join(t.TempDir(), "info.json")
	cmd := exec.Command("harbormaster", "demo", "--info", info, "--listen", "127.0.0.1:0")
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(out.String(), "Serving until interrupted") {
		select {
		case err := <-done:
			t.Fatalf("demo exited at start: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not start serving:\n%s\n%s", out.String(), errb.String())
		}
	}
	return info
}

// TestBenchAgainstDemo runs harbormaster bench briefly against a demo in
// another process, as a user would, and checks the JSON's keys and
// that its figures are consistent. It never asserts on how fast anything
// was.
func TestBenchAgainstDemo(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	info := startDemo(t)
	dir := t.TempDir()
	var inf struct {
		PID   int    `json:"pid"`
		Store string `json:"store"`
	}
	raw, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &inf); err != nil || inf.PID <= 0 {
		t.Fatalf("--info has no pid: %v\n%s", err, raw)
	}

	stdout, stderr, code := run(t, dir, nil, "bench", "--json", "--info", info, "--statements", "20", "--duration", "300ms", "--clients", "4")
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("bench wrote to stderr on success:\n%s", stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, stdout)
	}
	num := func(k string) float64 {
		v, ok := m[k].(float64)
		if !ok {
			t.Errorf("bench --json lacks the number %s: %s", k, stdout)
		}
		return v
	}
	for _, k := range []string{"direct_p50_ms", "governed_p50_ms", "direct_p99_ms", "governed_p99_ms", "direct_tps_16", "governed_tps_16", "ratio_16"} {
		if v := num(k); !(v > 0) {
			t.Errorf("%s = %v, want a positive number", k, v)
		}
	}
	// The added latencies are differences: of either sign at a few
	// statements, but exactly governed less direct.
	if got, want := num("added_p50_ms"), num("governed_p50_ms")-num("direct_p50_ms"); math.Abs(got-want) > 1e-9 {
		t.Errorf("added_p50_ms %v, want %v", got, want)
	}
	if got, want := num("added_p99_ms"), num("governed_p99_ms")-num("direct_p99_ms"); math.Abs(got-want) > 1e-9 {
		t.Errorf("added_p99_ms %v, want %v", got, want)
	}
	if got, want := num("ratio_16"), num("governed_tps_16")/num("direct_tps_16"); math.Abs(got-want) > 1e-9*want {
		t.Errorf("ratio_16 %v, want governed_tps_16/direct_tps_16 = %v", got, want)
	}
	if num("statements_1") != 20 || num("clients") != 4 {
		t.Errorf("counts: %s", stdout)
	}
	// The read workload, measured the same way (every governed read
	// executed and returned its one row, or the run would have failed).
	read, _ := m["read"].(map[string]any)
	if read == nil || read["statement"] != bench.ReadForm {
		t.Fatalf("bench --json has no read workload: %s", stdout)
	}
	if got, want := num("read_added_p50_ms"), read["governed_p50_ms"].(float64)-read["direct_p50_ms"].(float64); math.Abs(got-want) > 1e-9 {
		t.Errorf("read_added_p50_ms %v, want %v", got, want)
	}
	if got, want := num("read_ratio_16"), read["governed_tps_16"].(float64)/read["direct_tps_16"].(float64); !(got > 0) || math.Abs(got-want) > 1e-9*want {
		t.Errorf("read_ratio_16 %v, want %v", got, want)
	}
	// The demo's store is a file: its directory's fsync was measured.
	var fs struct {
		Fsync *struct {
			Dir     string  `json:"dir"`
			Samples int     `json:"samples"`
			P50     float64 `json:"p50_us"`
		} `json:"store_fsync"`
	}
	if err := json.Unmarshal([]byte(stdout), &fs); err != nil || fs.Fsync == nil || fs.Fsync.Dir != filepath.Dir(inf.Store) || fs.Fsync.Samples == 0 || !(fs.Fsync.P50 > 0) {
		t.Errorf("store_fsync %+v (%v): want the probe of %s", fs.Fsync, err, filepath.Dir(inf.Store))
	}

	// Three processes: the demo's node, its PostgreSQL and the bench.
	var r struct {
		PIDs struct{ Postgres, Harbormaster, Clients int } `json:"pids"`
		CPU  map[string]map[string]float64                 `json:"cpu_us_per_stmt"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.PIDs.Harbormaster != inf.PID || r.PIDs.Clients == inf.PID || r.PIDs.Clients == 0 || r.PIDs.Postgres == 0 {
		t.Errorf("pids %+v, want the demo's %d and two others", r.PIDs, inf.PID)
	}
	for _, phase := range []string{"direct", "governed"} {
		for _, part := range []string{"postgres", "harbormaster", "clients", "machine", "other"} {
			v, ok := r.CPU[phase][part]
			if !ok {
				t.Errorf("cpu_us_per_stmt.%s lacks %s: %s", phase, part, stdout)
			}
			if part != "other" && v < 0 {
				t.Errorf("cpu_us_per_stmt.%s.%s = %v", phase, part, v)
			}
		}
	}

	// The human table, and a second run repeating no text of the first.
	stdout, stderr, code = run(t, dir, nil, "bench", "--info", info, "--statements", "5", "--duration", "100ms", "--clients", "2")
	if code != 0 {
		t.Fatalf("bench: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"uploaded delegation dlg_", "p50 (ms)", "statements/s", "harbormaster (", "store fsync ("} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}

	// Both runs revoked their delegations.
	var full struct {
		APIURL     string `json:"api_url"`
		AgentToken string `json:"agent_token"`
	}
	_ = json.Unmarshal(raw, &full)
	req, _ := http.NewRequest(http.MethodGet, full.APIURL+"/v1/delegations", nil)
	req.Header.Set("Authorization", "Bearer "+full.AgentToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Delegations []struct {
			ID       string `json:"id"`
			Sentence string `json:"sentence"`
			Active   bool   `json:"active"`
		} `json:"delegations"`
	}
	err = json.NewDecoder(resp.Body).Decode(&ds)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET /v1/delegations: %v %+v", err, ds)
	}
	n := 0
	for _, d := range ds.Delegations {
		if strings.Contains(d.Sentence, "benchmark run") {
			n++
			if d.Active {
				t.Errorf("the benchmark's delegation %s is still active", d.ID)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d benchmark delegations, want one per run (2)", n)
	}

	// Without the benchmark's delegation the demo's own do not cover the
	// workload: the run fails, with the node's reason.
	stdout, stderr, code = run(t, dir, nil, "bench", "--json", "--info", info, "--no-delegation", "--statements", "2", "--clients", "2")
	if code != 1 || !strings.Contains(stderr, "was referred") || !strings.Contains(stderr, "total_cents") || !strings.Contains(stderr, "hint:") {
		t.Errorf("bench --no-delegation: exit %d, want 1 with the reason and a hint\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestBenchUsage: the command's bad usage is exit 2 with a hint.
// TestBenchThroughPgBouncer: --pgbouncer starts PgBouncer in front of the
// demo's target and sends each workload's direct statements through it
// too, beside the node's figures.
func TestBenchThroughPgBouncer(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	path, err := exec.LookPath("pgbouncer")
	if err != nil {
		if path, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
			}
			t.Skip("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
		}
	}
	info := startDemo(t)
	dir := t.TempDir()
	stdout, stderr, code := run(t, dir, nil, "bench", "--json", "--info", info, "--pgbouncer", path, "--statements", "10", "--duration", "200ms", "--clients", "2")
	if code != 0 {
		t.Fatalf("bench --pgbouncer: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, stdout)
	}
	for name, f := range map[string]*bench.Figures{"update": res.PgBouncer, "read": nil} {
		if name == "read" && res.Read != nil {
			f = res.Read.PgBouncer
		}
		if f == nil || !(f.GovernedTPS16 > 0) || !(f.DirectTPS16 > 0) || !(f.GovernedP50Ms > 0) {
			t.Errorf("%s through PgBouncer: %+v\n%s", name, f, stdout)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"bench"},
		{"bench", "--api", "http://127.0.0.1:1", "--token", "x"},
		{"bench", "--api", "http://127.0.0.1:1", "--token", "x", "--dsn", "postgres://x", "--ids", "9-3"},
		{"bench", "--api", "http://127.0.0.1:1", "--token", "x", "--dsn", "postgres://x", "--clients", "0"},
		{"bench", "extra"},
		{"bench", "--api", "http://127.0.0.1:1", "--token", "x", "--dsn", "postgres://x", "--pgbouncer-only"},
		{"bench", "--api", "http://127.0.0.1:1", "--token", "x", "--dsn", "postgres://x", "--delegation-only"},
	} {
		_, stderr, code := run(t, dir, nil, args...)
		if code != 2 || !strings.Contains(stderr, "harbormaster: error: harbormaster bench:") || !strings.Contains(stderr, "hint:") {
			t.Errorf("%q: exit %d, stderr:\n%s", args, code, stderr)
		}
	}
}
