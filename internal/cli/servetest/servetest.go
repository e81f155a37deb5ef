// Package servetest runs real "harbormaster serve" processes for tests that
// need a control plane they can kill: a deployment directory written as an
// operator writes it (keys, signers file, signed delegations, config), the
// process started and found listening from its log, agents' statements
// and approvers' approvals sent over HTTP.
//
// The test binary is the command: its TestMain must put a "harbormaster"
// on $PATH that runs cli.Do, as testscript.Main does:
//
//	func TestMain(m *testing.M) {
//		testscript.Main(m, map[string]func(){
//			"harbormaster": func() { os.Exit(cli.Do(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
//		})
//	}
//
// so the binary is built once, by go test, and every process runs the code
// under test.
package servetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Proc is one "harbormaster serve" (or "harbormaster pilot") process.
type Proc struct {
	Cmd  *exec.Cmd
	Log  string // its stderr (JSON log lines)
	Addr string // host:port it serves on
	// MetricsAddr is the host:port of serve's /metrics (metrics_listen),
	// "" when off or for another command.
	MetricsAddr string
	Done        chan error
}

// Start runs harbormaster serve with the config file and waits (up to two
// minutes) until it listens. The process is killed when t ends if it still
// runs.
func Start(t testing.TB, cfgPath, logPath string) *Proc {
	t.Helper()
	return StartCommand(t, logPath, "serve", "--config", cfgPath)
}

// StartCommand runs a harbormaster command that logs a "serving" line with
// its address (serve, pilot) and waits until it listens, as Start does.
func StartCommand(t testing.TB, logPath string, args ...string) *Proc {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("harbormaster", args...)
	cmd.Stdout, cmd.Stderr = io.Discard, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, Log: logPath, Done: make(chan error, 1)}
	go func() { p.Done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.Done
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for p.Addr == "" {
		select {
		case err := <-p.Done:
			p.Done <- err
			t.Fatalf("%s exited at start: %v\n%s", args[0], err, p.LogText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start listening:\n%s", args[0], p.LogText())
		}
		time.Sleep(20 * time.Millisecond)
		p.Addr = p.logAddr("serving")
	}
	p.MetricsAddr = p.logAddr("serving /metrics") // logged before "serving"
	return p
}

// LogText is the process's log so far.
func (p *Proc) LogText() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// logAddr finds the address of the log line whose message is msg.
func (p *Proc) logAddr(msg string) string {
	f, err := os.Open(p.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg {
			return l.Addr
		}
	}
	return ""
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done
}

// Stop sends SIGTERM and fails t unless the process stops cleanly.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-p.Done; err != nil {
		t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, p.LogText())
	}
}

// Answer is the answer to POST /v1/statements.
type Answer struct {
	Outcome      string   `json:"outcome"`
	RequestID    string   `json:"request_id"`
	Path         string   `json:"path"`
	RowsAffected int64    `json:"rows_affected"`
	Reasons      []string `json:"reasons"`
}

// HTTPError is an answer other than 200: the error body's code and, when
// the statement was recorded, its request id.
type HTTPError struct {
	Status    int
	Code      string
	Message   string
	RequestID string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s (request %q)", e.Status, e.Code, e.Message, e.RequestID)
}

// Post sends one statement as an agent. An answer other than 200 is an
// *HTTPError; a transport failure (the server killed) is returned as is.
func Post(ctx context.Context, client *http.Client, addr, token, target, sql string) (*Answer, error) {
	body, _ := json.Marshal(map[string]string{"target": target, "sql": sql})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/statements", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	var a Answer
	if err := do(client, req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func do(client *http.Client, req *http.Request, out any) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				RequestID string `json:"request_id"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &eb)
		return &HTTPError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, RequestID: eb.Error.RequestID}
	}
	return json.Unmarshal(b, out)
}

// WaitUntil polls cond every 10ms for up to two minutes.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Options describe a deployment. Name and TargetDSN are required.
type Options struct {
	// Name is the control plane's name (marque issuer, logbook origin).
	Name string
	// TargetDSN is the shop target's database, loaded already.
	TargetDSN string
	// Delegations are delegation files by base name ("orders.yaml"); each
	// is signed by the grantor (alice). Defaults to the Tier A example
	// without its quota, so a load stays on the fast path.
	Delegations map[string][]byte
	// MarqueTTL defaults to 1s, so a restart can reconcile soon.
	MarqueTTL time.Duration
	// CheckpointEvery defaults to 25.
	CheckpointEvery int
	// Extra is appended to the config file (YAML).
	Extra string
	// MetricsListen is the config's metrics_listen. Defaults to
	// 127.0.0.1:0 (loopback, a free port: Proc.MetricsAddr), so that
	// deployments side by side do not contend for the default port.
	MetricsListen string
	// Store is the control store's location, e.g. a postgres:// URL that
	// several serve processes share. Defaults to store.db in the
	// deployment directory.
	Store string
	// RemotePilot puts the target's Pilot in a process of its own
	// (StartPilot): the serve config names it, with certificates as
	// "harbormaster pilot certs" writes them, instead of the target's DSN,
	// so only the Pilot's process holds the target's credentials. serve
	// cannot start before StartPilot has.
	RemotePilot bool
}

// Deployment is a deployment directory: everything a restart reuses.
type Deployment struct {
	Opts      Options
	Dir       string
	Config    string // the config file's path
	StorePath string
	Keys      *gatewaytest.Keys
	CPKey     ed25519.PrivateKey
	// PilotURL is the remote Pilot's https://HOST:PORT once StartPilot
	// has started it.
	PilotURL string
}

// NewDeployment writes a deployment directory under t.TempDir(): the
// control-plane key, the signers file (alice grants, bob approves), the
// delegations signed by alice, and the config with the agent token
// gatewaytest.AgentToken for gatewaytest.Agent.
func NewDeployment(t testing.TB, o Options) *Deployment {
	t.Helper()
	if o.MarqueTTL == 0 {
		o.MarqueTTL = time.Second
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = 25
	}
	if o.MetricsListen == "" {
		o.MetricsListen = "127.0.0.1:0"
	}
	if o.Delegations == nil {
		o.Delegations = map[string][]byte{"orders.yaml": []byte(strings.Replace(string(gatewaytest.Example(t, gatewaytest.Orders)), "quota: 120/hour\n", "", 1))}
	}
	d := &Deployment{Opts: o, Dir: t.TempDir(), Keys: gatewaytest.NewKeys(t)}
	cpPEM, cpKey, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	d.CPKey = cpKey
	if err := os.Mkdir(filepath.Join(d.Dir, "delegations"), 0o700); err != nil {
		t.Fatal(err)
	}
	cat, err := pilot.LoadCatalogDSN(t.Context(), o.TargetDSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"cp.pem": cpPEM, "allowed_signers": d.Keys.SignersFile}
	for name, y := range o.Delegations {
		files["delegations/"+name] = y
		files["delegations/"+name+".sig"] = gatewaytest.Sign(t, d.Keys.Grantor, gatewaytest.Canonical(t, y, cat))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(d.Dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d.StorePath = filepath.Join(d.Dir, "store.db")
	if o.Store != "" {
		d.StorePath = o.Store
	}
	d.Config = filepath.Join(d.Dir, "harbormaster.yaml")
	if o.RemotePilot {
		d.writePilotFiles(t)
		return d // the serve config names the Pilot's address: StartPilot writes it
	}
	d.writeConfig(t)
	return d
}

// writeConfig writes the serve config: the target's DSN, or with
// RemotePilot the Pilot at PilotURL.
func (d *Deployment) writeConfig(t testing.TB) {
	t.Helper()
	o := d.Opts
	target := fmt.Sprintf("    dsn: %q\n", o.TargetDSN)
	if o.RemotePilot {
		target = fmt.Sprintf("    pilot:\n      url: %s\n      ca: certs/ca.crt\n      cert: certs/control-plane.crt\n      key: certs/control-plane.key\n", d.PilotURL)
	}
	cfg := fmt.Sprintf(`name: %s
listen: 127.0.0.1:0
metrics_listen: %s
store: %q
control_plane_key: cp.pem
signers: allowed_signers
delegations: delegations
marque_ttl: %s
targets:
  - name: %s
%sagents:
  - principal: %s
    token_sha256: %s
logbook:
  checkpoint_every: %d
  checkpoint_interval: 1s
`, o.Name, o.MetricsListen, d.StorePath, o.MarqueTTL, gatewaytest.Target, target, gatewaytest.Agent, config.HashToken(gatewaytest.AgentToken), o.CheckpointEvery)
	if err := os.WriteFile(d.Config, []byte(cfg+o.Extra), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writePilotFiles writes the channel's certificates (as "harbormaster
// pilot certs" does), the control plane's public key and the Pilot's
// config, which holds the target's DSN.
func (d *Deployment) writePilotFiles(t testing.TB) {
	t.Helper()
	certs := filepath.Join(d.Dir, "certs")
	if _, err := remote.WriteCerts(certs, []string{"127.0.0.1", "localhost"}, time.Now(), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	pub, err := config.ControlPlanePublicKeyPEM(d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certs, "control-plane.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
tls:
  cert: certs/pilot.crt
  key: certs/pilot.key
  client_ca: certs/ca.crt
control_plane:
  name: %s
  public_key: certs/control-plane.pub
signers: allowed_signers
targets:
  - name: %s
    dsn: %q
`, d.Opts.Name, gatewaytest.Target, d.Opts.TargetDSN)
	if err := os.WriteFile(filepath.Join(d.Dir, "pilot.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// StartPilot starts "harbormaster pilot" for a deployment with
// RemotePilot, and (re)writes the serve config to name its address; log
// names its log file.
func (d *Deployment) StartPilot(t testing.TB, log string) *Proc {
	t.Helper()
	if !d.Opts.RemotePilot {
		t.Fatal("servetest: StartPilot needs Options.RemotePilot")
	}
	p := StartCommand(t, filepath.Join(d.Dir, log), "pilot", "--config", filepath.Join(d.Dir, "pilot.yaml"))
	d.PilotURL = "https://" + p.Addr
	d.writeConfig(t)
	return p
}

// Start starts serve on the deployment; log names its log file.
func (d *Deployment) Start(t testing.TB, log string) *Proc {
	t.Helper()
	if d.Opts.RemotePilot && d.PilotURL == "" {
		t.Fatal("servetest: a deployment with RemotePilot starts its Pilot (StartPilot) before serve")
	}
	return Start(t, d.Config, filepath.Join(d.Dir, log))
}

// CheckpointVerifier verifies the deployment's logbook checkpoints.
func (d *Deployment) CheckpointVerifier(t testing.TB) (vkey string) {
	t.Helper()
	vkey, err := logbook.CheckpointVerifierKey(d.Opts.Name, d.CPKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

// VerifyLogbook runs "harbormaster logbook verify" on the store, as an
// auditor would, and returns its error (nil when it exits 0). The store
// may be in use by a running serve.
func (d *Deployment) VerifyLogbook(t testing.TB) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "harbormaster", "logbook", "verify", "--store", d.StorePath,
		"--vkey", d.CheckpointVerifier(t), "--checkpoint-every", fmt.Sprint(d.Opts.CheckpointEvery))
	cmd.Dir = d.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("logbook verify: %w\n%s", err, out)
	}
	return nil
}

// Approve approves a waiting request as bob, the way "harbormaster queue
// approve" does: a signed session fetches the proposed approval, bob signs
// it, and the approval is posted. A request the server cannot approve (not
// waiting, or not previewable) is an *HTTPError.
func (d *Deployment) Approve(ctx context.Context, client *http.Client, addr, id string) (*gateway.RequestView, error) {
	path := "/v1/requests/" + id + "/approval"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	auth, err := d.Keys.Approver.SignRequest(signing.NamespaceSession, http.MethodGet, path, time.Now(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	var prop struct {
		Approval string              `json:"approval"`
		Request  gateway.RequestView `json:"request"`
	}
	if err := do(client, req, &prop); err != nil {
		return nil, err
	}
	ap, err := acts.ParseApproval([]byte(prop.Approval))
	if err != nil || ap.RequestID != id {
		return nil, errors.Join(errors.New("servetest: the proposed approval is not for this request"), err)
	}
	sig, err := d.Keys.Approver.Sign(signing.NamespaceApproval, []byte(prop.Approval))
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]string{"act": prop.Approval, "signature": string(sig)})
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/requests/"+id+"/approve", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var v gateway.RequestView
	if err := do(client, req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
