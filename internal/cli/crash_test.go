package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"harbormaster/internal/config"
	"harbormaster/internal/gateway/gatewaytest"
	"harbormaster/internal/logbook"
	"harbormaster/internal/pgtmp/pgtmptest"
	"harbormaster/internal/pilot"
	"harbormaster/internal/store"
)

// serveProc is one "harbormaster serve" process.
type serveProc struct {
	cmd  *exec.Cmd
	log  string // its stderr (JSON log lines)
	addr string
	done chan error
}

// startServe runs harbormaster serve (this test binary, as the command; see
// TestMain) and waits until it listens.
func startServe(t *testing.T, cfgPath, logPath string) *serveProc {
	t.Helper()
	return startCommand(t, logPath, "serve", "--config", cfgPath)
}

// startCommand runs a harbormaster command that logs a "serving" line
// with its address (serve, pilot) and waits until it listens.
func startCommand(t *testing.T, logPath string, args ...string) *serveProc {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("harbormaster", args...)
	cmd.Stdout, cmd.Stderr = io.Discard, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for p.addr == "" {
		select {
		case err := <-p.done:
			t.Fatalf("%s exited at start: %v\n%s", args[0], err, p.logText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start listening:\n%s", args[0], p.logText())
		}
		time.Sleep(20 * time.Millisecond)
		p.addr = p.servingAddr()
	}
	return p
}

func (p *serveProc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// servingAddr finds the "serving" log line's address.
func (p *serveProc) servingAddr() string {
	f, err := os.Open(p.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "serving" {
			return l.Addr
		}
	}
	return ""
}

type agentResult struct {
	Outcome   string `json:"outcome"`
	RequestID string `json:"request_id"`
}

func post(ctx context.Context, client *http.Client, addr, token, sql string) (*agentResult, error) {
	body, _ := json.Marshal(map[string]string{"target": gatewaytest.Target, "sql": sql})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/statements", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var r agentResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// TestServeKilledMidLoad kills a real serve process (SIGKILL) while agents
// are sending statements, restarts it, and checks that the logbook
// verifies, every request was resolved by the restart's reconciliation,
// and every statement that ran did so exactly once: one receipt in the
// target per executed request and none for any other.
func TestServeKilledMidLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)

	// Keys, signers, the Tier A delegation (without its quota, so the load
	// stays on the fast path), and the config, as an operator writes them.
	dir := t.TempDir()
	keys := gatewaytest.NewKeys(t)
	cpPEM, cpKey, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	dels := filepath.Join(dir, "delegations")
	if err := os.Mkdir(dels, 0o700); err != nil {
		t.Fatal(err)
	}
	cat, err := pilot.LoadCatalogDSN(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	y := []byte(strings.Replace(string(gatewaytest.Example(t, gatewaytest.Orders)), "quota: 120/hour\n", "", 1))
	sig := gatewaytest.Sign(t, keys.Grantor, gatewaytest.Canonical(t, y, cat))
	files := map[string][]byte{
		"cp.pem":                      cpPEM,
		"allowed_signers":             keys.SignersFile,
		"delegations/orders.yaml":     y,
		"delegations/orders.yaml.sig": sig,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const name = "crash-test"
	storePath := filepath.Join(dir, "store.db")
	cfg := fmt.Sprintf(`name: %s
listen: 127.0.0.1:0
store: %q
control_plane_key: cp.pem
signers: allowed_signers
delegations: delegations
marque_ttl: 1s
targets:
  - name: shop
    dsn: %q
agents:
  - principal: agent:demo
    token_sha256: %s
logbook:
  checkpoint_every: 25
  checkpoint_interval: 1s
`, name, storePath, dsn, config.HashToken(gatewaytest.AgentToken))
	cfgPath := filepath.Join(dir, "harbormaster.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// Load: agents send reads, updates (each stuck order can be unstuck
	// once; after that the fence refuses it) and statements that refer.
	srv := startServe(t, cfgPath, filepath.Join(dir, "serve1.log"))
	lctx, stopLoad := context.WithCancel(ctx)
	client := &http.Client{Timeout: 30 * time.Second}
	var mu sync.Mutex
	answered := map[string]string{} // request id -> outcome the agent saw
	var completed atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for lctx.Err() == nil {
				var sql string
				switch k := rng.IntN(10); {
				case k < 5:
					sql = fmt.Sprintf("SELECT id, status FROM orders WHERE id = %d", 1+rng.IntN(240))
				case k < 8:
					sql = fmt.Sprintf("UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = %d", 1+rng.IntN(50))
				default:
					sql = fmt.Sprintf("SELECT id, total_cents FROM orders WHERE id = %d", 1+rng.IntN(240))
				}
				r, err := post(lctx, client, srv.addr, gatewaytest.AgentToken, sql)
				if err != nil {
					continue // the server is being killed
				}
				mu.Lock()
				answered[r.RequestID] = r.Outcome
				mu.Unlock()
				completed.Add(1)
			}
		}()
	}
	waitUntil(t, "40 answered statements", func() bool { return completed.Load() >= 40 })
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	stopLoad()
	wg.Wait()
	t.Logf("killed serve after %d answered statements", completed.Load())

	// Restart once the marques of the killed process have expired (the
	// restart reconciles requests older than twice the marque TTL).
	time.Sleep(2500 * time.Millisecond)
	srv2 := startServe(t, cfgPath, filepath.Join(dir, "serve2.log"))
	r, err := post(ctx, client, srv2.addr, gatewaytest.AgentToken, "SELECT id, status FROM orders WHERE id = 1")
	if err != nil || r.Outcome != "executed" {
		t.Fatalf("after the restart: %+v, %v\n%s", r, err, srv2.logText())
	}
	answered[r.RequestID] = r.Outcome
	if err := srv2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-srv2.done; err != nil {
		t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, srv2.logText())
	}

	// The logbook verifies, with the command an auditor would run.
	vkey, err := logbook.CheckpointVerifierKey(name, cpKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, dir, nil, "logbook", "verify", "--store", storePath, "--vkey", vkey, "--checkpoint-every", "25")
	if code != 0 {
		t.Fatalf("logbook verify: exit %d\n%s%s", code, out, errOut)
	}

	// Every request is resolved, and ran at most once.
	st, err := store.Open(ctx, storePath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	type reqRow struct{ status, outcome, marque string }
	reqs := map[string]reqRow{}
	rows, err := st.ReadDB().QueryContext(ctx, "SELECT id, status, outcome, marque_id FROM requests")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var r reqRow
		if err := rows.Scan(&id, &r.status, &r.outcome, &r.marque); err != nil {
			t.Fatal(err)
		}
		reqs[id] = r
	}
	rows.Close()
	lb, err := logbook.New(st, nil, nil, nil, logbook.Config{Origin: name + "/logbook"})
	if err != nil {
		t.Fatal(err)
	}
	decisions, err := lb.Find(ctx, logbook.Query{Kind: "decision"})
	if err != nil {
		t.Fatal(err)
	}
	decided := map[string]int{}
	for _, e := range decisions {
		decided[e.Subjects["request"]]++
	}
	executed := map[string]bool{} // marque ids of executed requests
	for id, r := range reqs {
		if r.status == "running" {
			t.Errorf("request %s is still running after the restart", id)
		}
		if decided[id] != 1 {
			t.Errorf("request %s has %d decision entries", id, decided[id])
		}
		if r.status == "executed" {
			executed[r.marque] = true
		}
		if o, ok := answered[id]; ok && o == "executed" && r.status != "executed" {
			t.Errorf("request %s was answered executed but is stored as %s", id, r.status)
		}
	}
	// A kill between a decision entry and the request row it precedes
	// leaves a decision with no request (see the report on Reconcile). No
	// marque is minted before the row exists, so nothing may have run for
	// it: no execution entries and no receipt.
	orphans := map[string]bool{}
	for id := range decided {
		if _, ok := reqs[id]; !ok {
			orphans[id] = true
			es, err := lb.Find(ctx, logbook.Query{SubjectKey: "request", SubjectValue: id})
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 1 {
				t.Errorf("request %s has no row but %d logbook entries", id, len(es))
			}
			t.Logf("request %s: a decision entry with no request row (killed between the two)", id)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	receipts := map[string]bool{}
	rrows, err := conn.Query(ctx, "SELECT marque_id, request_id FROM harbormaster.receipts WHERE NOT void")
	if err != nil {
		t.Fatal(err)
	}
	for rrows.Next() {
		var m, id string
		if err := rrows.Scan(&m, &id); err != nil {
			t.Fatal(err)
		}
		receipts[m] = true
		if !executed[m] || orphans[id] {
			t.Errorf("receipt %s: a statement ran whose request %s is not executed", m, id)
		}
	}
	rrows.Close()
	for m := range executed {
		if !receipts[m] {
			t.Errorf("request with marque %s is executed but the target has no receipt", m)
		}
	}
	// A void receipt is reconciliation burning a marque that never ran: its
	// request is not executed.
	vrows, err := conn.Query(ctx, "SELECT marque_id, request_id FROM harbormaster.receipts WHERE void")
	if err != nil {
		t.Fatal(err)
	}
	voided := 0
	for vrows.Next() {
		var m, id string
		if err := vrows.Scan(&m, &id); err != nil {
			t.Fatal(err)
		}
		voided++
		if executed[m] || reqs[id].status == "executed" {
			t.Errorf("void receipt %s: its request %s is executed", m, id)
		}
	}
	vrows.Close()
	t.Logf("%d marques burned by reconciliation", voided)
	var unstuck int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders WHERE status = 'retrying'").Scan(&unstuck); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests, %d executed, %d orders unstuck", len(reqs), len(executed), unstuck)
	if len(executed) == 0 || len(reqs) < 40 {
		t.Errorf("the load did too little to test anything: %d requests, %d executed", len(reqs), len(executed))
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
