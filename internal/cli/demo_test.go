package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

// needPostgres skips a test that starts its own PostgreSQL when the server
// binaries are missing, except under CI, where it fails.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := pgtmp.FindBinDir(); err != nil {
		if errors.Is(err, pgtmp.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skipf("demo: %v", err)
		}
		t.Fatal(err)
	}
}

// TestDemoOnce runs the whole demo in process, as a user would: a
// throwaway PostgreSQL, the control plane over HTTP and the scripted agent,
// whose every outcome must be as expected.
func TestDemoOnce(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	info := filepath.Join(t.TempDir(), "info.json")
	var out, errb bytes.Buffer
	code := cli.Do([]string{"demo", "--once", "--info", info, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("demo --once: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "Every outcome was as expected") {
		t.Fatalf("demo --once did not report every outcome as expected:\n%s", out.String())
	}
	if errb.Len() != 0 {
		t.Errorf("demo --once wrote to stderr on success:\n%s", errb.String())
	}
	raw, err := os.ReadFile(info)
	if err != nil {
		t.Fatalf("--info file: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("--info file is not JSON: %v\n%s", err, raw)
	}
	for _, k := range []string{"api_url", "agent_token", "pg_url", "target_dsn", "store", "approver_key"} {
		if v, _ := m[k].(string); v == "" {
			t.Errorf("--info lacks %s: %s", k, raw)
		}
	}
	if u, _ := m["api_url"].(string); !strings.HasPrefix(u, "http://127.0.0.1:") || strings.HasSuffix(u, ":0") {
		t.Errorf("api_url %q is not the address actually served", u)
	}
	if u, _ := m["pg_url"].(string); !strings.HasPrefix(u, "postgres://agent%3Ademo:") || strings.Contains(u, ":0/") {
		t.Errorf("pg_url %q is not the wire front actually served, with the agent's token", u)
	}
	if u, _ := m["metrics_url"].(string); !strings.HasPrefix(u, "http://127.0.0.1:") || strings.Contains(u, ":0/") || !strings.HasSuffix(u, "/metrics") ||
		strings.HasPrefix(u, m["api_url"].(string)+"/") {
		t.Errorf("metrics_url %q is not /metrics on a loopback listener of its own", u)
	}
	if c, _ := m["console_url"].(string); c != m["api_url"].(string)+"/console/" {
		t.Errorf("console_url %q is not the console on the served address", c)
	}
	if c, _ := m["console_url"].(string); !strings.Contains(out.String(), "  console:        "+c+"\n") ||
		!strings.Contains(out.String(), c+"login/link?c=") {
		t.Errorf("the demo does not print the console and a login link:\n%s", out.String())
	}
	// The tour printed each step with its outcome, the wire front's too.
	for _, want := range []string{"-> executed on the compiled path", "-> referred to a human", "-> executed on the compiled path: order 3 is",
		"-> 404 on each, as for any unknown path: nothing of the process is served where agents connect"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tour output lacks %q", want)
		}
	}
}

// TestDemoNodes runs demo --nodes 3 --once as a newcomer would: three
// serve processes on a throwaway PostgreSQL store, the Pilot in its own
// process, the tour round robin across the nodes and the steps that need
// several (a switch seen on another node, an approval through another
// node, one logbook chain verified); every outcome must be as expected,
// and --info must name every node and the Pilot.
func TestDemoNodes(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	info := filepath.Join(t.TempDir(), "info.json")
	var out, errb bytes.Buffer
	code := cli.Do([]string{"demo", "--nodes", "3", "--once", "--info", info, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
	t.Logf("demo --nodes 3 --once:\n%s", out.String())
	if code != 0 {
		t.Fatalf("demo --nodes 3 --once: exit %d\nstderr:\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "Every outcome was as expected") {
		t.Fatal("demo --nodes 3 --once did not report every outcome as expected")
	}
	if errb.Len() != 0 {
		t.Errorf("demo --nodes 3 --once wrote to stderr on success:\n%s", errb.String())
	}
	raw, err := os.ReadFile(info)
	if err != nil {
		t.Fatalf("--info file: %v", err)
	}
	var m struct {
		APIURL   string `json:"api_url"`
		Store    string `json:"store"`
		PID      int    `json:"pid"`
		PilotURL string `json:"pilot_url"`
		PilotPID int    `json:"pilot_pid"`
		Nodes    []struct {
			Name       string `json:"name"`
			APIURL     string `json:"api_url"`
			MetricsURL string `json:"metrics_url"`
			PID        int    `json:"pid"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("--info file is not JSON: %v\n%s", err, raw)
	}
	if len(m.Nodes) != 3 {
		t.Fatalf("--info lists %d nodes, want 3: %s", len(m.Nodes), raw)
	}
	pids := map[int]bool{os.Getpid(): true, m.PilotPID: true}
	for _, n := range m.Nodes {
		if !strings.HasPrefix(n.APIURL, "http://127.0.0.1:") || strings.HasSuffix(n.APIURL, ":0") {
			t.Errorf("%s: api_url %q is not an address served", n.Name, n.APIURL)
		}
		if !strings.HasPrefix(n.MetricsURL, "http://127.0.0.1:") || strings.Contains(n.MetricsURL, ":0/") || strings.HasPrefix(n.MetricsURL, n.APIURL+"/") {
			t.Errorf("%s: metrics_url %q is not /metrics on a loopback listener of its own", n.Name, n.MetricsURL)
		}
		if pids[n.PID] {
			t.Errorf("%s: pid %d is not a process of its own", n.Name, n.PID)
		}
		pids[n.PID] = true
	}
	if m.APIURL != m.Nodes[0].APIURL || m.PID != m.Nodes[0].PID {
		t.Errorf("api_url and pid (%s, %d) are not the first node's", m.APIURL, m.PID)
	}
	if !strings.HasPrefix(m.Store, "postgres://") || !strings.HasPrefix(m.PilotURL, "https://127.0.0.1:") {
		t.Errorf("store %q or pilot_url %q is not a shared PostgreSQL store and a Pilot over TLS", m.Store, m.PilotURL)
	}
	for _, want := range []string{"(through node-2,", "(through node-3,", "nothing of the process is served where agents connect", "node-2 saw Tier B on", "node-3 saw Tier B off", "approved by bob through node-2: executed",
		"it ran once", "signed through entry"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// The children are gone: the demo stopped them.
	for pid := range pids {
		if pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after the demo exited", pid)
		}
	}
}

// TestDemoRestartSameDir starts the demo twice on one --dir, as a user who
// stops it and starts it again: the second start reuses the keys, the
// agent token and the store, so the logbook verify command the demo prints
// passes over both starts' entries and the delegations signed at the first
// still load. Their ids are the ones delegation compile prints for the
// examples. A directory that holds something else is refused.
func TestDemoRestartSameDir(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	dir := filepath.Join(t.TempDir(), "demo")
	start := func(n int) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := cli.Do([]string{"demo", "--once", "--dir", dir, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "Every outcome was as expected") {
			t.Fatalf("start %d: demo --once --dir: exit %d\nstdout:\n%s\nstderr:\n%s", n, code, out.String(), errb.String())
		}
		return out.String()
	}
	first := start(1)
	alice1, err := os.ReadFile(filepath.Join(dir, "keys", "alice"))
	if err != nil {
		t.Fatal(err)
	}
	second := start(2)
	if !strings.Contains(second, "reusing the keys, delegations, agent token and store kept in "+dir) {
		t.Errorf("the second start does not say it reuses %s:\n%s", dir, second)
	}
	alice2, _ := os.ReadFile(filepath.Join(dir, "keys", "alice"))
	if !bytes.Equal(alice1, alice2) {
		t.Error("the second start made a new grantor key")
	}
	verifyLine := func(out string) []string {
		for _, l := range strings.Split(out, "\n") {
			if i := strings.Index(l, "harbormaster logbook verify "); i >= 0 {
				return strings.Fields(strings.ReplaceAll(l[i+len("harbormaster "):], "'", ""))
			}
		}
		t.Fatalf("no logbook verify line in:\n%s", out)
		return nil
	}
	if v1, v2 := strings.Join(verifyLine(first), " "), strings.Join(verifyLine(second), " "); v1 != v2 {
		t.Errorf("the printed verify commands differ between starts:\n%s\n%s", v1, v2)
	}
	var out, errb bytes.Buffer
	if code := cli.Do(verifyLine(second), strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("the printed %q after a restart: exit %d\n%s%s", verifyLine(second), code, out.String(), errb.String())
	}
	// Both starts loaded the delegations; their ids are the examples'.
	log, err := os.ReadFile(filepath.Join(dir, "harbormaster.log"))
	if err != nil {
		t.Fatal(err)
	}
	ex := exampleDir(t)
	for _, f := range []string{"unstick-orders.yaml", "fix-name-typos.yaml"} {
		stdout, stderr, code := run(t, ex, nil, "delegation", "compile", f, "--schema", "shop.sql", "--json")
		var rep struct {
			ID string `json:"delegation_id"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || rep.ID == "" {
			t.Fatalf("delegation compile %s: exit %d, %v\n%s", f, code, err, stderr)
		}
		if n := strings.Count(string(log), `"delegation loaded","id":"`+rep.ID+`"`); n != 2 {
			t.Errorf("%s (%s) was loaded %d times over two starts, want 2: the demo's id differs from the example's", f, rep.ID, n)
		}
	}
	// A directory holding something else is refused before anything starts.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := cli.Do([]string{"demo", "--once", "--dir", other}, strings.NewReader(""), &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), "is not empty and holds no demo kept by harbormaster demo") {
		t.Errorf("demo --dir on a foreign directory: exit %d\n%s", code, errb.String())
	}
}

// syncBuffer is a bytes.Buffer a child process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDemoNodesKill runs demo --nodes 3 as the README's tour does, without
// --once, kills one node's process (SIGKILL, as kill -9 would), and checks
// what the demo promises: the others keep answering (a statement through
// each runs), the demo says which node exited and which still answer, and
// it stops everything only when interrupted.
func TestDemoNodesKill(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	info := filepath.Join(t.TempDir(), "info.json")
	var out syncBuffer
	cmd := exec.Command("harbormaster", "demo", "--nodes", "3", "--info", info, "--listen", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = &out, &out
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
		}
	})
	waitOut := func(what string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !strings.Contains(out.String(), what) {
			select {
			case err := <-done:
				t.Fatalf("the demo exited (%v) before printing %q:\n%s", err, what, out.String())
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("the demo did not print %q within %v:\n%s", what, within, out.String())
			}
		}
	}
	waitOut("Serving until interrupted (Ctrl-C)", 5*time.Minute)
	raw, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		AgentToken string `json:"agent_token"`
		PilotPID   int    `json:"pilot_pid"`
		Nodes      []struct {
			Name   string `json:"name"`
			APIURL string `json:"api_url"`
			PID    int    `json:"pid"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || len(m.Nodes) != 3 {
		t.Fatalf("--info: %v, want 3 nodes: %s", err, raw)
	}
	if err := syscall.Kill(m.Nodes[1].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOut(fmt.Sprintf("node-2 (pid %d) exited", m.Nodes[1].PID), time.Minute)
	waitOut("Still answering", time.Minute)
	said := out.String()[strings.LastIndex(out.String(), "Still answering"):]
	said = said[:strings.Index(said, "\n")]
	if !strings.Contains(said, "node-1 (") || !strings.Contains(said, "node-3 (") || strings.Contains(said, "node-2") {
		t.Errorf("after node-2 was killed the demo says %q, want node-1 and node-3 still answering", said)
	}
	t.Logf("after the kill the demo said:\n%s", out.String()[strings.Index(out.String(), "Serving until"):])
	client := &http.Client{Timeout: 30 * time.Second}
	for _, i := range []int{0, 2} {
		nd := m.Nodes[i]
		a, err := servetest.Post(t.Context(), client, strings.TrimPrefix(nd.APIURL, "http://"), m.AgentToken, "shop", "SELECT id, status FROM orders WHERE id = 3")
		if err != nil || a.Outcome != gateway.OutcomeExecuted {
			t.Errorf("a statement through %s after node-2 was killed: %+v, %v\n%s", nd.Name, a, err, out.String())
		}
	}
	for _, pid := range []int{m.Nodes[0].PID, m.Nodes[2].PID, m.PilotPID} {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d is gone after node-2 was killed: %v", pid, err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the demo exited (%v) when one node was killed:\n%s", err, out.String())
	default:
	}
	// Ctrl-C stops the rest.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the demo, interrupted: %v\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the demo did not stop on Ctrl-C:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stopped; the throwaway databases are gone") {
		t.Errorf("the demo did not say it stopped:\n%s", out.String())
	}
	for _, pid := range []int{m.Nodes[0].PID, m.Nodes[2].PID, m.PilotPID} {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after the demo was interrupted", pid)
		}
	}
}
