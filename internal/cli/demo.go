package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// demoCheckpointEvery is the demo config's logbook.checkpoint_every, which
// the printed logbook verify command repeats.
const demoCheckpointEvery = 100

// demoInfo is what --info writes once the demo is ready.
type demoInfo struct {
	APIURL     string `json:"api_url"`
	ConsoleURL string `json:"console_url"`
	AgentToken string `json:"agent_token"`
	// PGURL is the wire front's connection URL, with the agent's token.
	PGURL string `json:"pg_url"`
	// MetricsURL is /metrics on the metrics listener (metrics_listen),
	// apart from where agents connect; the first node's with --nodes.
	MetricsURL   string `json:"metrics_url,omitempty"`
	Agent        string `json:"agent"`
	TargetDSN    string `json:"target_dsn"`
	Target       string `json:"target"`
	Store        string `json:"store"`
	Config       string `json:"config"`
	Dir          string `json:"dir"`
	GrantorKey   string `json:"grantor_key"`
	ApproverKey  string `json:"approver_key"`
	Signers      string `json:"signers"`
	VerifierKey  string `json:"logbook_vkey"`
	ControlPlane string `json:"control_plane_key"`
	PID          int    `json:"pid"` // the node's process, for harbormaster bench's CPU split
	// Nodes are every node's API, with --nodes N > 1 (api_url and pid are
	// the first's); PilotURL is then the Pilot's own process.
	Nodes    []demoNode `json:"nodes,omitempty"`
	PilotURL string     `json:"pilot_url,omitempty"`
	PilotPID int        `json:"pilot_pid,omitempty"`

	tokenHash string // the agent token's hash, for the configs
	scram     string // the agent token's SCRAM verifier, for the configs
}

// demoNode is one control-plane node of the demo.
type demoNode struct {
	Name       string `json:"name"`
	APIURL     string `json:"api_url"`
	MetricsURL string `json:"metrics_url"`
	PID        int    `json:"pid"`
	Config     string `json:"config"`
	Log        string `json:"log"`
}

type tourStep struct {
	title   string
	sql     string
	outcome string // executed or referred
	want    string // a substring the reasons must carry (referred)
}

// demoTour shows each outcome. The data is examples/shop_data.sql.
var demoTour = []tourStep{
	{"read the stuck orders (inside the select rule)",
		"SELECT id, status, created_at FROM orders WHERE status = 'pending' AND created_at < now() - interval '1 day' ORDER BY created_at LIMIT 5",
		"executed", ""},
	{"unstick one order (inside the update rule)",
		"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3",
		"executed", ""},
	{"read a column no rule lists: referred by column",
		"SELECT id, total_cents FROM orders WHERE id = 3",
		"referred", "total_cents"},
	{"touch an order pending for only an hour: referred by fence",
		"UPDATE orders SET status = 'failed' WHERE id = 45",
		"referred", "fence"},
	{"unstick every stuck order at once: referred by row cap",
		"UPDATE orders SET status = 'retrying' WHERE status = 'pending' AND created_at < now() - interval '1 day'",
		"referred", "max_rows"},
	{"set a status the check does not allow: referred by check",
		"UPDATE orders SET status = 'shipped' WHERE id = 4",
		"referred", "check"},
	{"smuggle a second statement: refused at once (no human could approve it)",
		"UPDATE orders SET status = 'failed' WHERE id = 5; DROP TABLE orders",
		"rejected", "statements"},
	{"fix a typo in an EU name (Tier B, needs the Surveyor): referred",
		"UPDATE customers SET name = 'John Smith' WHERE id = 3",
		"referred", "Tier B"},
}

func runDemo(e *env, args []string) int {
	fs := e.flags("harbormaster demo [--listen ADDR] [--info FILE] [--once] [--dir DIR]",
		"Runs the whole system on this machine: a throwaway PostgreSQL as target \"shop\"\n"+
			"(from the local server binaries), the embedded store, demo keys (grantor alice,\n"+
			"approver bob), two signed delegations for agent:demo, the HTTP API, and a scripted\n"+
			"agent that shows each outcome. It keeps serving until interrupted.")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP `ADDR` (a free port is used if it is taken)")
	info := fs.String("info", "", "write connection details as JSON to `FILE` once ready")
	once := fs.Bool("once", false, "run the tour and exit: 0 if every outcome was as expected")
	dir := fs.String("dir", "", "keep keys, config and store in `DIR` (default: a temporary directory, removed at exit)")
	pgStore := fs.Bool("postgres", false, "with --nodes 1: the node on a PostgreSQL store with the Pilot in its own process, as with several (the layout harbormaster bench compares)")
	nodes := fs.Int("nodes", 1, "run `N` control-plane nodes, each its own serve process, on one PostgreSQL store,\nwith the Pilot in a process of its own; the tour goes round robin across them")
	var sv demoSurveyor
	fs.StringVar(&sv.url, "surveyor-url", "", "a model server's base `URL` for the Surveyor, e.g. http://127.0.0.1:11434/v1 (Ollama),\nhttp://127.0.0.1:8000/v1 (vLLM), http://127.0.0.1:8080/v1 (llama.cpp server)")
	fs.StringVar(&sv.model, "surveyor-model", "", "the `MODEL` name on that server")
	fs.StringVar(&sv.kind, "surveyor-kind", "openai", "the server's API: openai (OpenAI-compatible) or anthropic")
	fs.StringVar(&sv.keyEnv, "surveyor-key-env", "", "the environment `VARIABLE` holding the API key, if the server needs one")
	fs.BoolVar(&sv.tierB, "tier-b", false, "switch Tier B on for shop and enable the Surveyor for the typo rule (needs --surveyor-url and --surveyor-model)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	if sv.tierB && (sv.url == "" || sv.model == "") {
		return e.usageErr(fs, "--tier-b needs --surveyor-url and --surveyor-model")
	}
	if host, _, err := net.SplitHostPort(*listen); err != nil || !config.LoopbackHost(host) {
		// The demo serves plain HTTP with a printed agent token and demo keys.
		return e.usageErr(fs, "--listen %s: the demo serves plain HTTP, so only on a loopback address such as 127.0.0.1:8080", *listen)
	}
	if *nodes < 1 || *nodes > 9 {
		return e.usageErr(fs, "--nodes must be between 1 and 9")
	}
	if (*nodes > 1 || *pgStore) && sv.tierB {
		return e.usageErr(fs, "--tier-b runs with one node only (--nodes 1)")
	}
	run := func() error { return demo(e, *listen, *info, *dir, *once, sv) }
	if *nodes > 1 || *pgStore {
		run = func() error { return demoNodes(e, *listen, *info, *dir, *once, sv, *nodes) }
	}
	if err := run(); err != nil {
		var tourErr *tourError
		if errors.As(err, &tourErr) {
			e.errorf("%v", err)
			return exitFail
		}
		e.errorf("%v", err)
		if errors.Is(err, pgtmp.ErrNotInstalled) {
			e.hintf("install the PostgreSQL server binaries (Debian: apt-get install postgresql), or put initdb and postgres on PATH")
		}
		return exitFail
	}
	return exitOK
}

type tourError struct{ failed []string }

// demoSurveyor is the model server the demo's Surveyor uses, if any.
type demoSurveyor struct {
	url, model, kind, keyEnv string
	tierB                    bool
}

func (t *tourError) Error() string {
	return fmt.Sprintf("%d tour step(s) did not go as expected: %s", len(t.failed), strings.Join(t.failed, "; "))
}

// demoDir is the demo's directory: dir, created if need be and kept, or a
// temporary one that cleanup removes.
func demoDir(dir string) (string, func(), error) {
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", nil, err
		}
		return abs, func() {}, os.MkdirAll(abs, 0o700)
	}
	d, err := os.MkdirTemp("", "harbormaster-demo-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

func demo(e *env, listen, infoPath, dir string, once bool, sv demoSurveyor) error {
	ctx := e.ctx
	out := e.stdout
	keep := dir != ""
	dir, cleanup, err := demoDir(dir)
	if err != nil {
		return err
	}
	defer cleanup()
	var kept *demoInfo
	var inf demoInfo
	if keep {
		if kept, err = keptDemo(dir); err != nil {
			return err
		}
		if kept != nil {
			fmt.Fprintf(out, "harbormaster demo: reusing the keys, delegations, agent token and store kept in %s (the target is a new throwaway database)\n", dir)
		}
	}
	fmt.Fprintf(out, "harbormaster demo: starting a throwaway PostgreSQL...\n")
	pg, err := pgtmp.Start(ctx, pgtmp.Config{StartTimeout: 2 * time.Minute})
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
	var cfgPath string
	if kept != nil {
		inf = *kept
		inf.TargetDSN, inf.tokenHash, inf.scram = dsn, config.HashToken(inf.AgentToken), pgwire.NewVerifier(inf.AgentToken)
		if err := writeDemoConfig(inf.Config, inf, sv, "", "", fmt.Sprintf("    dsn: %q\n", dsn)); err != nil {
			return err
		}
		cfgPath = inf.Config
	} else {
		if cfgPath, inf, err = writeDemoFiles(ctx, dir, dsn, sv); err != nil {
			return err
		}
		if keep {
			if err := saveDemoState(dir, inf); err != nil {
				return err
			}
		}
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	// The wire front, on 6432 unless taken (or the API's port is any).
	pgListen := "127.0.0.1:6432"
	if strings.HasSuffix(listen, ":0") {
		pgListen = "127.0.0.1:0"
	}
	pln, err := net.Listen("tcp", pgListen)
	if err != nil {
		if pln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		fmt.Fprintf(out, "harbormaster demo: %s is not free; the wire front serves on %s instead\n", pgListen, pln.Addr())
	}
	defer pln.Close()
	cfg.ListenPG = pln.Addr().String()
	// /metrics, on loopback apart from the API and the wire front.
	mln, err := demoMetricsListener(out, cfg.MetricsAddr(), listen)
	if err != nil {
		return err
	}
	defer mln.Close()
	logPath := filepath.Join(dir, "harbormaster.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // a kept demo's log grows
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := newLogger(logFile, "info")
	log.Info("go collector", "gogc", node.TuneGC())
	sys, err := node.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer sys.Close()
	ln, err := listenOrFree(out, listen)
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- sys.Serve(sctx, ln) }()
	pgServed, metricsServed := make(chan error, 1), make(chan error, 1)
	go func() { pgServed <- sys.ServePG(sctx, pln) }()
	go func() { metricsServed <- sys.ServeMetrics(sctx, mln) }()
	defer func() { stop(); <-pgServed; <-metricsServed }()
	inf.APIURL, inf.PID = "http://"+ln.Addr().String(), os.Getpid()
	inf.MetricsURL = "http://" + mln.Addr().String() + "/metrics"
	inf.PGURL = demoPGURL(inf.Agent, inf.AgentToken, pln.Addr().String(), inf.Target)
	inf.ConsoleURL = inf.APIURL + console.Prefix
	if infoPath != "" {
		b, _ := json.MarshalIndent(inf, "", "  ")
		if err := os.WriteFile(infoPath, append(b, '\n'), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nHarbormaster is serving %s\n", inf.APIURL)
	fmt.Fprintf(out, "  target shop:    %s\n", dsn)
	fmt.Fprintf(out, "  agent:          %s, token %s\n", inf.Agent, inf.AgentToken)
	fmt.Fprintf(out, "  wire front:     postgres://%s (docs/pgwire.md)\n", pln.Addr().String())
	fmt.Fprintf(out, "  metrics:        %s (metrics_listen: loopback, never where agents connect)\n", inf.MetricsURL)
	fmt.Fprintf(out, "  delegations:    %s (signed by alice)\n", filepath.Join(dir, "delegations"))
	fmt.Fprintf(out, "  keys:           grantor %s, approver %s\n", inf.GrantorKey, inf.ApproverKey)
	fmt.Fprintf(out, "  store:          %s (log: %s)\n", inf.Store, logPath)
	printConsole(out, inf)
	if sv.tierB {
		if err := demoTierB(sys, inf); err != nil {
			return fmt.Errorf("switching Tier B on: %w", err)
		}
		fmt.Fprintf(out, "  Tier B:         on for shop; the Surveyor (%s at %s) judges the typo rule\n", sv.model, sv.url)
	}
	fmt.Fprintf(out, "\nThe scripted agent's tour:\n")
	failed := runTour(ctx, out, []string{inf.APIURL}, inf.AgentToken, sv.tierB)
	failed = append(failed, wireTour(ctx, out, inf.PGURL)...)
	failed = append(failed, surfaceTour(ctx, out, inf.APIURL, inf.AgentToken, inf.MetricsURL)...)
	// What to try next names only what outlives this command: with --once
	// the server stops and a store not kept in --dir is removed.
	verify := fmt.Sprintf("  harbormaster logbook verify --store %s --vkey '%s' --checkpoint-every %d\n", inf.Store, inf.VerifierKey, demoCheckpointEvery)
	switch {
	case !once:
		fmt.Fprintf(out, "\nTry it yourself:\n  curl -s %s/v1/statements -H 'Authorization: Bearer %s' \\\n    -H 'Content-Type: application/json' -d '{\"target\":\"shop\",\"sql\":\"SELECT id, status FROM orders WHERE id = 3\"}'\n", inf.APIURL, inf.AgentToken)
		fmt.Fprintf(out, "  psql '%s' \\\n    -c 'SELECT id, status FROM orders WHERE id = 3'\n", inf.PGURL)
		fmt.Fprint(out, verify)
	case keep:
		fmt.Fprintf(out, "\nThe store is kept in %s; its logbook verifies with:\n%s", dir, verify)
	}
	if once {
		stop()
		<-served
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
	select {
	case <-ctx.Done():
		stop()
		<-served
	case err := <-served:
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nstopped; the throwaway database is gone.\n")
	return nil
}

// listenOrFree listens on addr, or, when it is taken, on a free port of
// 127.0.0.1, saying so.
func listenOrFree(out io.Writer, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	ln, ferr := net.Listen("tcp", "127.0.0.1:0")
	if ferr != nil {
		return nil, err
	}
	fmt.Fprintf(out, "harbormaster demo: %s is not free (%v); serving on %s instead (--listen picks the address)\n", addr, errors.Unwrap(err), ln.Addr())
	return ln, nil
}

// demoStateFile, in a --dir, records what the first start made (the
// agent token, the keys' and files' paths, the logbook verifier key) so a
// second start reuses them with the store they signed.
const demoStateFile = "demo.json"

func saveDemoState(dir string, inf demoInfo) error {
	b, err := json.MarshalIndent(inf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, demoStateFile), append(b, '\n'), 0o600)
}

// keptDemo reads the demo an earlier start kept in dir: the same keys,
// signers file, signed delegations, agent token and store are then reused,
// with the config pointed at this start's throwaway target. It returns nil
// for a new (empty) dir, and refuses a directory it cannot reuse whole.
func keptDemo(dir string) (*demoInfo, error) {
	raw, err := os.ReadFile(filepath.Join(dir, demoStateFile))
	if errors.Is(err, os.ErrNotExist) {
		entries, rerr := os.ReadDir(dir)
		if rerr != nil {
			return nil, rerr
		}
		if len(entries) > 0 {
			return nil, fmt.Errorf("--dir %s is not empty and holds no demo kept by harbormaster demo (no %s): "+
				"give an empty or new directory, or remove this one to start afresh", dir, demoStateFile)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var inf demoInfo
	if err := json.Unmarshal(raw, &inf); err != nil || inf.AgentToken == "" {
		return nil, fmt.Errorf("--dir %s: %s is unreadable (%v): remove the directory to start afresh", dir, demoStateFile, err)
	}
	if filepath.Clean(inf.Dir) != filepath.Clean(dir) {
		return nil, fmt.Errorf("--dir %s holds a demo made in %s: a kept demo cannot be moved; remove it to start afresh", dir, inf.Dir)
	}
	for _, f := range []string{inf.ControlPlane, inf.GrantorKey, inf.ApproverKey, inf.Signers, filepath.Join(inf.Dir, "delegations"), inf.Store} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("--dir %s holds a demo from an earlier start, but %v: "+
				"remove the directory to start afresh (its logbook cannot be verified without the keys it was signed with)", dir, err)
		}
	}
	inf.APIURL, inf.PID, inf.Nodes, inf.PilotURL, inf.PilotPID = "", 0, nil, "", 0
	return &inf, nil
}

// demoPGURL is the wire front's connection URL for the agent. Its token
// is the password; SCRAM-SHA-256 keeps it off the network.
func demoPGURL(principal, token, addr, target string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(principal, token), Host: addr, Path: "/" + target, RawQuery: "sslmode=disable"}
	return u.String()
}

// wireTour reads an order over the wire front, as a PostgreSQL client
// would, and returns the step when it did not go as expected.
func wireTour(ctx context.Context, out io.Writer, pgURL string) []string {
	const step = "read an order over the PostgreSQL wire front"
	fmt.Fprintf(out, "\n  %s\n    SELECT id, status FROM orders WHERE id = $1  ($1 = 3)\n", step)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, pgURL)
	if err != nil {
		fmt.Fprintf(out, "    -> UNEXPECTED: %v\n", err)
		return []string{step}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var id int64
	var status string
	if err := conn.QueryRow(cctx, "SELECT id, status FROM orders WHERE id = $1", 3).Scan(&id, &status); err != nil || id != 3 {
		fmt.Fprintf(out, "    -> UNEXPECTED: %v\n", err)
		return []string{step}
	}
	fmt.Fprintf(out, "    -> executed on the compiled path: order %d is %s\n", id, status)
	return nil
}

// demoMetricsListener listens for /metrics on addr (the config's
// metrics_listen), on a free loopback port when the API's port is any, or
// when addr is taken, saying so.
func demoMetricsListener(out io.Writer, addr, listen string) (net.Listener, error) {
	if addr == "" || strings.HasSuffix(listen, ":0") {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "harbormaster demo: %s is not free; /metrics serves on %s instead\n", addr, ln.Addr())
	return ln, nil
}

// surfaceTour asks, as the agent would, for what a Go server commonly
// serves of its process on the API where agents connect (none of it is
// there), then scrapes /metrics on the metrics listener as Prometheus
// would.
func surfaceTour(ctx context.Context, out io.Writer, apiURL, token, metricsURL string) []string {
	const step = "ask the API for the process's metrics and debug endpoints"
	fmt.Fprintf(out, "\n  %s\n    GET /metrics, /debug/pprof/, /debug/vars (with the agent's token)\n", step)
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(url, token string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, p := range []string{"/metrics", "/debug/pprof/", "/debug/vars"} {
		if st, err := get(apiURL+p, token); err != nil || st != http.StatusNotFound {
			fmt.Fprintf(out, "    -> UNEXPECTED: %s answered %d %v\n", p, st, err)
			return []string{step}
		}
	}
	if st, err := get(metricsURL, ""); err != nil || st != http.StatusOK {
		fmt.Fprintf(out, "    -> UNEXPECTED: the metrics listener answered %d %v\n", st, err)
		return []string{step}
	}
	fmt.Fprintf(out, "    -> 404 on each, as for any unknown path: nothing of the process is served where agents connect (/metrics is on %s)\n", metricsURL)
	return nil
}

// printConsole prints the console's URL and a one-time login link for the
// grantor (alice), and how to get another for bob.
func printConsole(out io.Writer, inf demoInfo) {
	fmt.Fprintf(out, "  console:        %s\n", inf.ConsoleURL)
	link, err := consoleLoginLink(inf.APIURL, inf.GrantorKey)
	if err != nil {
		fmt.Fprintf(out, "  console login:  (no link: %v)\n", err)
		return
	}
	fmt.Fprintf(out, "  console login:  harbormaster console login --server %s --key %s (bob: --key %s)\n", inf.APIURL, inf.GrantorKey, inf.ApproverKey)
	fmt.Fprintf(out, "  alice's login link (one use, 5 minutes):\n    %s\n", link)
}

func loadShop(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, f := range []string{"shop.sql", "shop_data.sql"} {
		b, err := examples.FS.ReadFile(f)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, string(b), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("loading %s: %w", f, err)
		}
	}
	// The demo's throwaway target arms the catalog generation (its user
	// is a superuser), as an operator may with --catalog-generation.
	_, err = pilot.InitTargetArmed(ctx, dsn, true)
	return err
}

// writeDemoFiles makes keys, the signers file, signed delegations and the
// serve config, exactly as an operator would by hand.
func writeDemoFiles(ctx context.Context, dir, dsn string, sv demoSurveyor) (string, demoInfo, error) {
	inf, err := writeDemoKeys(ctx, dir, dsn)
	if err != nil {
		return "", inf, err
	}
	inf.Store = filepath.Join(dir, "store.db")
	inf.Config = filepath.Join(dir, "harbormaster.yaml")
	if err := writeDemoConfig(inf.Config, inf, sv, "", "", fmt.Sprintf("    dsn: %q\n", dsn)); err != nil {
		return "", inf, err
	}
	return inf.Config, inf, nil
}

// writeDemoKeys makes keys, the signers file and signed delegations.
func writeDemoKeys(ctx context.Context, dir, dsn string) (demoInfo, error) {
	var inf demoInfo
	keys := filepath.Join(dir, "keys")
	dels := filepath.Join(dir, "delegations")
	for _, d := range []string{keys, dels} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return inf, err
		}
	}
	var signersFile bytes.Buffer
	humans := map[string][]string{
		"alice": {signing.NamespaceDelegation, signing.NamespaceRevocation, signing.NamespaceSession, signing.NamespaceSwitch, signing.NamespaceEnable},
		"bob":   {signing.NamespaceApproval, signing.NamespaceDenial, signing.NamespaceSession, signing.NamespaceReview},
	}
	privs := map[string][]byte{}
	for _, name := range []string{"alice", "bob"} {
		priv, pub, err := signing.GenerateEd25519(name + "@demo")
		if err != nil {
			return inf, err
		}
		privs[name] = priv
		if err := os.WriteFile(filepath.Join(keys, name), priv, 0o600); err != nil {
			return inf, err
		}
		if err := os.WriteFile(filepath.Join(keys, name+".pub"), pub, 0o644); err != nil {
			return inf, err
		}
		line, err := signing.AllowedSignersLine([]string{name + "@shop"}, humans[name], pub)
		if err != nil {
			return inf, err
		}
		signersFile.WriteString(line + "\n")
	}
	signersPath := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signersPath, signersFile.Bytes(), 0o644); err != nil {
		return inf, err
	}
	cpPEM, cpKey, err := config.NewControlPlaneKey()
	if err != nil {
		return inf, err
	}
	cpPath := filepath.Join(keys, "control-plane.pem")
	if err := os.WriteFile(cpPath, cpPEM, 0o600); err != nil {
		return inf, err
	}
	vkey, err := logbook.CheckpointVerifierKey("harbormaster-demo", node.PublicKey(cpKey))
	if err != nil {
		return inf, err
	}
	token, tokenHash := config.NewAgentToken()
	scram := pgwire.NewVerifier(token)

	cat, err := pilot.LoadCatalogDSN(ctx, dsn, nil)
	if err != nil {
		return inf, err
	}
	alice, err := signing.ParsePrivateKey(privs["alice"])
	if err != nil {
		return inf, err
	}
	for _, f := range []string{"unstick-orders.yaml", "fix-name-typos.yaml"} {
		y, err := examples.FS.ReadFile(f)
		if err != nil {
			return inf, err
		}
		d, err := bound.Parse(y, f)
		if err != nil {
			return inf, err
		}
		// The demo signs the examples as they are, so their ids are the ones
		// harbormaster delegation compile prints for examples/ (the id is the
		// hash of the signed bytes). Only once the examples' expiry is past
		// do they expire a year from now instead, and the ids differ.
		if d.Expires == nil || !d.Expires.After(time.Now().Add(24*time.Hour)) {
			exp := time.Now().UTC().AddDate(1, 0, 0).Truncate(time.Hour)
			if d.Expires != nil {
				y = bytes.Replace(y, []byte("expires: "+d.Expires.UTC().Format(time.RFC3339)), []byte("expires: "+exp.Format(time.RFC3339)), 1)
			}
			d.Expires = &exp
		}
		b, rep := bound.Compile(d, cat, bound.Options{})
		if !rep.Signable {
			return inf, fmt.Errorf("demo delegation %s is not signable: %v", f, rep.Problems)
		}
		canon, err := b.Canonical()
		if err != nil {
			return inf, err
		}
		sig, err := alice.Sign(signing.NamespaceDelegation, canon)
		if err != nil {
			return inf, err
		}
		if err := os.WriteFile(filepath.Join(dels, f), y, 0o644); err != nil {
			return inf, err
		}
		if err := os.WriteFile(filepath.Join(dels, f+".sig"), sig, 0o644); err != nil {
			return inf, err
		}
	}
	inf = demoInfo{AgentToken: token, Agent: "agent:demo", TargetDSN: dsn, Target: "shop",
		Dir: dir, GrantorKey: filepath.Join(keys, "alice"), ApproverKey: filepath.Join(keys, "bob"), Signers: signersPath,
		VerifierKey: vkey, ControlPlane: cpPath, tokenHash: tokenHash, scram: scram}
	return inf, nil
}

// writeDemoConfig writes a serve config to path: the store inf.Store, the
// target shop reached as target says (a dsn, or a Pilot in its own
// process), listen unless "" and metrics_listen unless "".
func writeDemoConfig(path string, inf demoInfo, sv demoSurveyor, listen, metrics, target string) error {
	cfg := fmt.Sprintf(`# Written by harbormaster demo. See docs/operations.md.
name: harbormaster-demo
store: %q
control_plane_key: %q
signers: %q
delegations: %q
targets:
  - name: shop
%sagents:
  - principal: agent:demo
    token_sha256: %s
    pg_scram: %s
logbook:
  checkpoint_every: %d
  checkpoint_interval: 5s
`, inf.Store, inf.ControlPlane, inf.Signers, filepath.Join(inf.Dir, "delegations"), target, inf.tokenHash, inf.scram, demoCheckpointEvery)
	if listen != "" {
		cfg += fmt.Sprintf("listen: %s\n", listen)
	}
	if metrics != "" {
		cfg += fmt.Sprintf("metrics_listen: %s\n", metrics)
	}
	if sv.url != "" {
		cfg += fmt.Sprintf(`surveyor:
  jurors: 3
  timeout: 120s
  providers:
    - name: demo
      kind: %s
      base_url: %q
      model: %q
      api_key_env: %q
      timeout: 60s
`, sv.kind, sv.url, sv.model, sv.keyEnv)
	}
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// runTour plays the scripted agent over HTTP and returns the steps that
// did not go as expected.
//
// With several APIs (nodes), step i goes to apis[i mod len(apis)].
func runTour(ctx context.Context, out io.Writer, apis []string, token string, tierB bool) []string {
	client := &http.Client{Timeout: 30 * time.Second}
	var failed []string
	for i, st := range demoTour {
		body, _ := json.Marshal(map[string]string{"target": "shop", "sql": st.sql})
		api := apis[i%len(apis)]
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/statements", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		fmt.Fprintf(out, "\n%d. %s\n   %s\n", i+1, st.title, st.sql)
		if len(apis) > 1 {
			fmt.Fprintf(out, "   (through node-%d, %s)\n", i%len(apis)+1, api)
		}
		resp, err := client.Do(req)
		if err != nil {
			failed = append(failed, fmt.Sprintf("step %d: %v", i+1, err))
			fmt.Fprintf(out, "   ! %v\n", err)
			continue
		}
		var r struct {
			Outcome      string           `json:"outcome"`
			RequestID    string           `json:"request_id"`
			RowsAffected int64            `json:"rows_affected"`
			Rows         []map[string]any `json:"rows"`
			Reasons      []string         `json:"reasons"`
			Path         string           `json:"path"`
			Error        struct {
				Code, Message string
				RequestID     string `json:"request_id"`
			} `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&r)
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnprocessableEntity && r.Error.RequestID != "" {
			r.Outcome, r.RequestID, r.Reasons = "rejected", r.Error.RequestID, []string{r.Error.Message + " [" + r.Error.Code + "]"}
		}
		switch r.Outcome {
		case "executed":
			if len(r.Rows) > 0 {
				fmt.Fprintf(out, "   -> executed on the %s path: %d row(s) returned, request %s\n", r.Path, len(r.Rows), r.RequestID)
			} else {
				fmt.Fprintf(out, "   -> executed on the %s path: %d row(s) affected, request %s\n", r.Path, r.RowsAffected, r.RequestID)
			}
		case "rejected":
			fmt.Fprintf(out, "   -> refused at once, HTTP %d, request %s:\n      - %s\n", resp.StatusCode, r.RequestID, strings.Join(r.Reasons, "; "))
		case "referred":
			fmt.Fprintf(out, "   -> referred to a human, request %s:\n", r.RequestID)
			for _, why := range r.Reasons {
				fmt.Fprintf(out, "      - %s\n", why)
			}
		default:
			fmt.Fprintf(out, "   -> HTTP %d\n", resp.StatusCode)
		}
		ok := r.Outcome == st.outcome
		if ok && st.want != "" {
			ok = strings.Contains(strings.Join(r.Reasons, " "), st.want)
		}
		if tierB && st.want == "Tier B" {
			// With the Surveyor on, either outcome is correct: a unanimous panel
			// runs it inside the bound, anything else refers.
			ok = r.Outcome == "executed" && r.Path == "surveyed" || r.Outcome == "referred"
		}
		if !ok {
			failed = append(failed, fmt.Sprintf("step %d (%s): got %q %v", i+1, st.title, r.Outcome, r.Reasons))
		}
	}
	return failed
}

// demoTierB does what the humans would: alice switches Tier B on for the
// deployment and shop, bob (a reviewer) marks the typo rule auditable, and
// alice enables the Surveyor for it. Each is a signed act over the API.
func demoTierB(sys *node.Node, inf demoInfo) error {
	alice, err := newHumanClient(inf.APIURL, inf.GrantorKey)
	if err != nil {
		return err
	}
	bob, err := newHumanClient(inf.APIURL, inf.ApproverKey)
	if err != nil {
		return err
	}
	for _, target := range []string{"", "shop"} {
		if err := alice.do(http.MethodPost, "/v1/switches", signing.NamespaceSwitch, map[string]any{"name": "tier_b", "target": target, "on": true}, nil); err != nil {
			return err
		}
	}
	var typos *gateway.Delegation
	for _, d := range sys.Gateway().Registry().Delegations(inf.Agent) {
		if d.Bound.Tier() == "B" {
			typos = d
		}
	}
	if typos == nil {
		return errors.New("no Tier B delegation")
	}
	rule := -1
	for i, r := range typos.Bound.Rules {
		if r.Residual != "" {
			rule = i
		}
	}
	e := &env{}
	if err := e.postAct(bob, "/v1/delegations/"+typos.ID+"/auditable", signing.NamespaceReview,
		acts.Auditable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindAuditable, DelegationID: typos.ID, Rule: rule,
			Note: "a reviewer can tell a typo fix from the before/after names"}, nil); err != nil {
		return err
	}
	return e.postAct(alice, "/v1/delegations/"+typos.ID+"/surveyor", signing.NamespaceEnable,
		acts.Enable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindEnable, DelegationID: typos.ID, Rule: rule, Surveyor: "surveyor:default",
			Bundle: surveyor.DefaultBundle().Version, On: true}, nil)
}
