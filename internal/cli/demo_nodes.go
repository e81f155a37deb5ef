package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// demoNodes is the demo with n control-plane nodes, as a deployment of
// several runs them: one throwaway PostgreSQL server holds the target shop
// and, in a database of its own, the control store; the Pilot runs in a
// process of its own (harbormaster pilot, holding the target's only
// credentials) behind mutual TLS; each node is its own harbormaster serve
// process on the shared store. The tour goes round robin across the nodes,
// then the steps only several nodes have: a switch flipped through one
// node seen by another, a referral decided on one node approved through
// another, and the one logbook chain they all wrote, verified.
func demoNodes(e *env, listen, infoPath, dir string, once bool, sv demoSurveyor, n int) error {
	ctx, out := e.ctx, e.stdout
	keep := dir != ""
	dir, cleanup, err := demoDir(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, demoStateFile)); keep && err == nil {
		return fmt.Errorf("--dir %s holds a one-node demo with its own store; with --nodes or --postgres the store is a throwaway PostgreSQL "+
			"and the keys are made anew: give another --dir", dir)
	}
	defer cleanup()
	fmt.Fprintf(out, "harbormaster demo: starting a throwaway PostgreSQL (the target shop, and the control store the %d nodes share)...\n", n)
	pg, err := pgtmp.Start(ctx, pgtmp.Config{StartTimeout: 2 * time.Minute}) // durable: the store refuses fsync=off
	if err != nil {
		return err
	}
	defer pg.Stop()
	dsn, err := pg.CreateDatabase(ctx, "shop")
	if err != nil {
		return err
	}
	if err := loadShop(ctx, dsn); err != nil {
		return err
	}
	storeURL, err := pg.CreateDatabase(ctx, "harbormaster")
	if err != nil {
		return err
	}
	inf, err := writeDemoKeys(ctx, dir, dsn)
	if err != nil {
		return err
	}
	inf.Store = storeURL
	pilotCfg, err := writeDemoPilot(dir, inf)
	if err != nil {
		return err
	}

	// Children stop in reverse order: the nodes, then the Pilot.
	var procs []*demoProc
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	}()
	fmt.Fprintf(out, "harbormaster demo: starting the Pilot in its own process...\n")
	pp, err := startDemoProc(ctx, "pilot", filepath.Join(dir, "pilot.log"), "pilot", "--config", pilotCfg)
	if err != nil {
		return err
	}
	procs = append(procs, pp)
	inf.PilotURL, inf.PilotPID = "https://"+pp.addr, pp.cmd.Process.Pid
	certs := filepath.Join(dir, "certs")
	target := fmt.Sprintf("    pilot:\n      url: %s\n      ca: %q\n      cert: %q\n      key: %q\n", inf.PilotURL,
		filepath.Join(certs, remote.FileCA), filepath.Join(certs, remote.FileClientCert), filepath.Join(certs, remote.FileClientKey))
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		nd := demoNode{Name: name, Config: filepath.Join(dir, name+".yaml"), Log: filepath.Join(dir, name+".log")}
		if err := writeDemoConfig(nd.Config, inf, sv, demoNodeListen(out, listen, i), demoNodeMetrics(listen, i), target); err != nil {
			return err
		}
		fmt.Fprintf(out, "harbormaster demo: starting %s (harbormaster serve --config %s)...\n", name, nd.Config)
		p, err := startDemoProc(ctx, name, nd.Log, "serve", "--config", nd.Config)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		nd.APIURL, nd.PID = "http://"+p.addr, p.cmd.Process.Pid
		nd.MetricsURL = "http://" + logAddr(nd.Log, "serving /metrics") + "/metrics"
		inf.Nodes = append(inf.Nodes, nd)
	}
	inf.APIURL, inf.PID, inf.Config, inf.MetricsURL = inf.Nodes[0].APIURL, inf.Nodes[0].PID, inf.Nodes[0].Config, inf.Nodes[0].MetricsURL
	inf.ConsoleURL = inf.APIURL + console.Prefix
	if infoPath != "" {
		b, _ := json.MarshalIndent(inf, "", "  ")
		if err := os.WriteFile(infoPath, append(b, '\n'), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nHarbormaster is running %d nodes on one control store:\n", n)
	apis := make([]string, n)
	for i, nd := range inf.Nodes {
		apis[i] = nd.APIURL
		fmt.Fprintf(out, "  %-15s %s (pid %d, log %s, metrics %s)\n", nd.Name+":", nd.APIURL, nd.PID, nd.Log, nd.MetricsURL)
	}
	fmt.Fprintf(out, "  %-15s %s (pid %d, its own process: the only holder of shop's credentials)\n", "pilot:", inf.PilotURL, inf.PilotPID)
	fmt.Fprintf(out, "  store:          %s (PostgreSQL: switches, delegations, queue, logbook)\n", storeURL)
	fmt.Fprintf(out, "  target shop:    %s\n", dsn)
	fmt.Fprintf(out, "  agent:          %s, token %s\n", inf.Agent, inf.AgentToken)
	fmt.Fprintf(out, "  keys:           grantor %s, approver %s\n", inf.GrantorKey, inf.ApproverKey)
	printConsole(out, inf)

	fmt.Fprintf(out, "\nThe scripted agent's tour, round robin across the nodes:\n")
	failed := runTour(ctx, out, apis, inf.AgentToken, false)
	failed = append(failed, surfaceTour(ctx, out, inf.APIURL, inf.AgentToken, inf.MetricsURL)...)
	fmt.Fprintf(out, "\nWhat several nodes share:\n")
	failed = append(failed, demoNodeSteps(ctx, out, inf)...)

	// Nothing to try once --once returns: the nodes, the Pilot and the
	// throwaway store are gone.
	if !once {
		fmt.Fprintf(out, "\nTry it yourself (any node answers):\n  curl -s %s/v1/statements -H 'Authorization: Bearer %s' \\\n    -H 'Content-Type: application/json' -d '{\"target\":\"shop\",\"sql\":\"SELECT id, status FROM orders WHERE id = 3\"}'\n", apis[n-1], inf.AgentToken)
		fmt.Fprintf(out, "  kill -9 %d   # a node dies; the others keep serving, and the store keeps every decision\n", inf.Nodes[n-1].PID)
		fmt.Fprintf(out, "  harbormaster logbook verify --store '%s' --vkey '%s' --checkpoint-every %d\n", storeURL, inf.VerifierKey, demoCheckpointEvery)
	}
	if once {
		if len(failed) > 0 {
			return &tourError{failed: failed}
		}
		fmt.Fprintf(out, "\nEvery outcome was as expected.\n")
		return nil
	}
	if keep {
		fmt.Fprintf(out, "\nFiles are kept in %s.\n", dir)
	}
	fmt.Fprintf(out, "\nServing until interrupted (Ctrl-C)...\n")
	demoServeNodes(ctx, out, pp, procs[1:], inf.Nodes)
	fmt.Fprintf(out, "\nstopped; the throwaway databases are gone.\n")
	return nil
}

// demoServeNodes waits for Ctrl-C while the nodes serve. A node that exits
// (killed) leaves the others, the Pilot, the store and the target running,
// as a deployment of several nodes does: the demo says which node exited
// and which still answer. It returns on Ctrl-C, when the Pilot exits (no
// statement can run without it), or when no node is left.
func demoServeNodes(ctx context.Context, out io.Writer, pilot *demoProc, procs []*demoProc, nodes []demoNode) {
	exited := make(chan int, len(procs))
	for i, p := range procs {
		go func() { <-p.exited; exited <- i }()
	}
	gone := make([]bool, len(procs))
	left := len(procs)
	for {
		select {
		case <-ctx.Done():
			return
		case <-pilot.exited:
			fmt.Fprintf(out, "\nthe Pilot exited (%v); no statement can run without it: stopping the demo.\n", pilot.err)
			return
		case i := <-exited:
			gone[i] = true
			left--
			fmt.Fprintf(out, "\n%s (pid %d) exited (%v).\n", nodes[i].Name, nodes[i].PID, procs[i].err)
			if left == 0 {
				fmt.Fprintf(out, "No node is left; stopping the demo.\n")
				return
			}
			var answer, silent []string
			for j, nd := range nodes {
				if gone[j] {
					continue
				}
				if demoNodeAnswers(ctx, nd.APIURL) {
					answer = append(answer, fmt.Sprintf("%s (%s)", nd.Name, nd.APIURL))
				} else {
					silent = append(silent, nd.Name)
				}
			}
			if len(answer) > 0 {
				fmt.Fprintf(out, "Still answering on the same store, Pilot and target: %s. Serving until interrupted (Ctrl-C)...\n", strings.Join(answer, ", "))
			}
			if len(silent) > 0 {
				fmt.Fprintf(out, "Not answering now: %s (its log says why).\n", strings.Join(silent, ", "))
			}
		}
	}
}

// demoNodeAnswers is whether the node at api answers /readyz: it reaches
// its store and the Pilot.
func demoNodeAnswers(ctx context.Context, api string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// demoNodeListen is node i's address: the demo's --listen for node 1 and
// the next ports for the others, each if free; a free port otherwise.
func demoNodeListen(out io.Writer, listen string, i int) string {
	host, port, err := net.SplitHostPort(listen)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p == 0 {
		return "127.0.0.1:0"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(p+i-1))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(out, "harbormaster demo: %s is not free; node-%d serves on a free port instead (--listen picks the address)\n", addr, i)
		return "127.0.0.1:0"
	}
	ln.Close()
	return addr
}

// demoNodeMetrics is node i's metrics_listen: config.DefaultMetricsListen's
// port and the next ones for the others, each if free; a free loopback
// port otherwise, or when the API's port is any.
func demoNodeMetrics(listen string, i int) string {
	host, port, _ := net.SplitHostPort(config.DefaultMetricsListen)
	p, _ := strconv.Atoi(port)
	addr := net.JoinHostPort(host, strconv.Itoa(p+i-1))
	if strings.HasSuffix(listen, ":0") {
		return "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	ln.Close()
	return addr
}

// writeDemoPilot writes what the Pilot's own process needs, as an operator
// would with harbormaster pilot certs: the channel's certificates, the
// control plane's public key, and its config with the target's DSN.
func writeDemoPilot(dir string, inf demoInfo) (string, error) {
	certs := filepath.Join(dir, "certs")
	if _, err := remote.WriteCerts(certs, []string{"127.0.0.1", "localhost"}, time.Now(), 7*24*time.Hour); err != nil {
		return "", err
	}
	key, err := config.LoadControlPlaneKey(inf.ControlPlane)
	if err != nil {
		return "", err
	}
	pub, err := config.ControlPlanePublicKeyPEM(node.PublicKey(key))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(certs, "control-plane.pub"), pub, 0o644); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`# Written by harbormaster demo. See docs/operations.md, "A Pilot in its own process".
listen: 127.0.0.1:0
tls:
  cert: %q
  key: %q
  client_ca: %q
control_plane:
  name: harbormaster-demo
  public_key: %q
signers: %q
targets:
  - name: shop
    dsn: %q
`, filepath.Join(certs, remote.FilePilotCert), filepath.Join(certs, remote.FilePilotKey), filepath.Join(certs, remote.FileCA),
		filepath.Join(certs, "control-plane.pub"), inf.Signers, inf.TargetDSN)
	path := filepath.Join(dir, "pilot.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// demoNodeSteps shows what the nodes share, through different nodes, and
// returns what did not go as expected.
func demoNodeSteps(ctx context.Context, out io.Writer, inf demoInfo) []string {
	var failed []string
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failed = append(failed, msg)
		fmt.Fprintf(out, "   ! %s\n", msg)
	}
	nodes := inf.Nodes
	other := nodes[min(1, len(nodes)-1)]
	last := nodes[len(nodes)-1]

	// 1. Switches: flipped through one node, read by the others from the store.
	others := func(skip int) []demoNode {
		var o []demoNode
		for i, nd := range nodes {
			if i != skip {
				o = append(o, nd)
			}
		}
		return o
	}
	for _, sw := range []struct {
		from int
		on   bool
	}{{0, true}, {min(1, len(nodes)-1), false}} {
		word := map[bool]string{true: "on", false: "off"}[sw.on]
		fmt.Fprintf(out, "\n1. alice switches Tier B %s through %s; the other nodes read it from the store\n", word, nodes[sw.from].Name)
		for _, r := range demoSwitch(ctx, inf, nodes[sw.from], others(sw.from), sw.on) {
			if r.err != nil {
				fail("switch %s: %v", word, r.err)
				continue
			}
			fmt.Fprintf(out, "   -> %s saw Tier B %s for shop after %v\n", r.node, word, r.after.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(out, "   (every node reads the switches at least every second; one that cannot for three intervals treats Tier B as off)\n")

	// 2. The queue: referred on node 1, approved by bob through another node.
	const sql = "UPDATE orders SET status = 'failed' WHERE id = 45"
	fmt.Fprintf(out, "\n2. the agent sends a statement outside the fence to %s; bob approves it through %s\n   %s\n", nodes[0].Name, other.Name, sql)
	if err := demoApproveElsewhere(ctx, out, inf, sql, nodes[0], other, last); err != nil {
		fail("approval through another node: %v", err)
	}

	// 3. The logbook: one chain, every node's entries in it.
	fmt.Fprintf(out, "\n3. the logbook the %d nodes wrote is one hash chain; verifying it\n", len(nodes))
	if rep, err := demoVerifyLogbook(ctx, inf); err != nil {
		fail("logbook verify: %v", err)
	} else {
		fmt.Fprintf(out, "   -> %s\n", rep)
	}
	return failed
}

// switchSeen is how long one node took to read a switch change.
type switchSeen struct {
	node  string
	after time.Duration
	err   error
}

// demoSwitch sets tier_b through from (the deployment's, and with on the
// target's too) and returns how long each of readers took to follow.
func demoSwitch(ctx context.Context, inf demoInfo, from demoNode, readers []demoNode, on bool) []switchSeen {
	alice, err := newHumanClient(from.APIURL, inf.GrantorKey)
	if err != nil {
		return []switchSeen{{node: from.Name, err: err}}
	}
	scopes := []string{"", "shop"}
	if !on {
		scopes = []string{""}
	}
	for _, target := range scopes {
		if err := alice.do(http.MethodPost, "/v1/switches", signing.NamespaceSwitch, map[string]any{"name": "tier_b", "target": target, "on": on}, nil); err != nil {
			return []switchSeen{{node: from.Name, err: err}}
		}
	}
	set := time.Now()
	var seen []switchSeen
	for _, to := range readers {
		seen = append(seen, switchSeen{node: to.Name})
		r := &seen[len(seen)-1]
		reader, err := newHumanClient(to.APIURL, inf.GrantorKey)
		if err != nil {
			r.err = err
			continue
		}
		for {
			var v struct {
				TierB map[string]bool `json:"tier_b"`
			}
			if err := reader.do(http.MethodGet, "/v1/switches", "", nil, &v); err != nil {
				r.err = err
				break
			}
			if v.TierB["shop"] == on {
				r.after = time.Since(set)
				break
			}
			if time.Since(set) > 10*time.Second {
				r.err = fmt.Errorf("%s still reads Tier B %v %v later", to.Name, !on, time.Since(set).Round(time.Millisecond))
				break
			}
			select {
			case <-ctx.Done():
				r.err = ctx.Err()
				return seen
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return seen
}

// demoApproveElsewhere sends sql through decide (it must refer), has bob
// approve it through approve (which previews it then), and checks through
// check that it ran once and cannot be approved again.
func demoApproveElsewhere(ctx context.Context, out io.Writer, inf demoInfo, sql string, decide, approve, check demoNode) error {
	agent := &http.Client{Timeout: 30 * time.Second}
	body, _ := json.Marshal(map[string]string{"target": "shop", "sql": sql})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, decide.APIURL+"/v1/statements", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+inf.AgentToken)
	resp, err := agent.Do(req)
	if err != nil {
		return err
	}
	var a struct {
		Outcome   string `json:"outcome"`
		RequestID string `json:"request_id"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&a)
	resp.Body.Close()
	if a.Outcome != gateway.OutcomeReferred {
		return fmt.Errorf("%s answered %q, want referred", decide.Name, a.Outcome)
	}
	fmt.Fprintf(out, "   -> referred by %s, request %s\n", decide.Name, a.RequestID)
	bob, err := newHumanClient(approve.APIURL, inf.ApproverKey)
	if err != nil {
		return err
	}
	// Asking for the proposed approval is a human asking for the preview:
	// the approving node computes it then (nothing of a referred statement
	// ran before), and the approval binds its digest.
	var prop struct {
		Approval string              `json:"approval"`
		Request  gateway.RequestView `json:"request"`
	}
	if err := bob.do(http.MethodGet, "/v1/requests/"+a.RequestID+"/approval", signing.NamespaceSession, nil, &prop); err != nil {
		return fmt.Errorf("the proposed approval through %s: %w", approve.Name, err)
	}
	ap, err := acts.ParseApproval([]byte(prop.Approval))
	if err != nil || ap.RequestID != a.RequestID || ap.StatementSHA256 != marque.StatementHash(prop.Request.CanonicalSQL) ||
		ap.PreviewSHA256 == "" || ap.PreviewSHA256 != prop.Request.PreviewSHA256 {
		return errors.New("the proposed approval does not match the request; not signing")
	}
	sig, err := bob.key.Sign(signing.NamespaceApproval, []byte(prop.Approval))
	if err != nil {
		return err
	}
	act := map[string]string{"act": prop.Approval, "signature": string(sig)}
	var v gateway.RequestView
	if err := bob.do(http.MethodPost, "/v1/requests/"+a.RequestID+"/approve", "", act, &v); err != nil {
		return err
	}
	if v.Status != gateway.StatusExecuted {
		return fmt.Errorf("approved through %s, the request is %s: %v", approve.Name, v.Status, v.Reasons)
	}
	fmt.Fprintf(out, "   -> approved by bob through %s: executed, %d row(s) affected\n", approve.Name, v.RowsAffected)
	again, err := newHumanClient(check.APIURL, inf.ApproverKey)
	if err != nil {
		return err
	}
	var ae *apiError
	if err := again.do(http.MethodPost, "/v1/requests/"+a.RequestID+"/approve", "", act, &v); !errors.As(err, &ae) {
		return fmt.Errorf("the same approval sent again through %s: %v, want it refused", check.Name, err)
	}
	fmt.Fprintf(out, "   -> the same signed approval sent again through %s is refused (%s): it ran once\n", check.Name, ae.Message)
	return nil
}

// demoVerifyLogbook verifies the store's logbook as harbormaster logbook
// verify does, waiting (up to 15s) for a node to sign a checkpoint over a
// chain that has none yet.
func demoVerifyLogbook(ctx context.Context, inf demoInfo) (string, error) {
	v, err := note.NewVerifier(inf.VerifierKey)
	if err != nil {
		return "", err
	}
	st, lb, err := openLogbook(ctx, inf.Store, "harbormaster-demo", demoCheckpointEvery)
	if err != nil {
		return "", err
	}
	defer st.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rep, err := lb.Verify(ctx, v)
		if err != nil {
			return "", err
		}
		if !rep.OK {
			return "", errors.New(rep.String())
		}
		if !rep.TailTooLong {
			return rep.String(), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no checkpoint signs the chain: %s", rep)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// demoProc is a child process of the demo (the Pilot, a node): this very
// binary, run as harbormaster pilot or serve.
type demoProc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	addr   string
	exited chan struct{}
	err    error // valid once exited is closed
}

// startDemoProc runs this binary with args, its log (stderr) to logPath,
// and waits (up to two minutes) for its "serving" log line.
func startDemoProc(ctx context.Context, name, logPath string, args ...string) (*demoProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &demoProc{name: name, log: logPath, exited: make(chan struct{})}
	// argv[0] is the command's name: the binary ignores it, and a test
	// binary standing in for harbormaster dispatches on it.
	p.cmd = &exec.Cmd{Path: exe, Args: append([]string{"harbormaster"}, args...), Stdout: logf, Stderr: logf, SysProcAttr: demoSysProcAttr()}
	started := make(chan error, 1)
	go func() {
		// The child is told to stop if this thread dies (Linux), so the
		// thread lives as long as the child.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		logf.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for p.addr == "" {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited at start (%v):\n%s", name, p.err, tail(logPath, 2000))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s did not start serving:\n%s", name, tail(logPath, 2000))
		}
		p.addr = logAddr(logPath, "serving")
	}
	return p, nil
}

// stop asks the process to stop (SIGTERM: calls in flight finish) and
// kills it if it has not within 30s.
func (p *demoProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// logAddr is the address of the log's line whose message is msg, or "".
func logAddr(path, msg string) string {
	f, err := os.Open(path)
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

// tail is the last n bytes of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
