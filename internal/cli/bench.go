package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/bench"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

func runBench(e *env, args []string) (code int) {
	fs := e.flags("harbormaster bench (--info FILE | --api URL --token TOKEN --dsn DSN) [--json] [flags]",
		"Measures what a running node adds to a single-row UPDATE of the demo's orders, against\n"+
			"the same kind of statement sent straight to the target with pgx: at one client,\n"+
			"direct and governed interleaved (latency p50 and p99), then --clients clients direct\n"+
			"and governed for --duration each (statements/s, their ratio, and CPU time per\n"+
			"statement of PostgreSQL, the node and this process). Every statement is a new text.\n"+
			"With a grantor key (a demo's --info file has one) it signs and uploads a delegation\n"+
			"for the workload and revokes it at the end; without, the node's delegations must\n"+
			"cover it. Every governed statement must execute, or the run fails with the reason.\n"+
			"See docs/performance.md.")
	info := fs.String("info", "", "a demo's --info `FILE`: API, token, target, DSN, grantor key and the node's pid")
	api := fs.String("api", "", "the node's HTTP API `URL`; several nodes on one store as URL,URL,... (clients are spread over them)")
	token := fs.String("token", "", "the agent's bearer `TOKEN`")
	target := fs.String("target", "shop", "the target's `NAME` on the node")
	dsn := fs.String("dsn", "", "the target database's `DSN`, for the direct run")
	agent := fs.String("agent", "agent:demo", "the token's `PRINCIPAL`, grantee of the benchmark's delegation")
	grantorKey := fs.String("grantor-key", "", "sign the benchmark's delegation with this grantor's SSH private key `FILE`")
	noDelegation := fs.Bool("no-delegation", false, "upload no delegation, even with a grantor key: the node's own must cover the workload")
	delegationOnly := fs.Bool("delegation-only", false, "upload the benchmark's delegation, print its id and stop, leaving it in force\n(for another load generator: make bench's pgbench; revoke it when done)")
	nodePID := fs.Int("node-pid", 0, "the node's process `ID`, for the CPU split")
	pgPID := fs.Int("postgres-pid", 0, "the target's postmaster process `ID` (default: found from the direct connection if the server is local)")
	statements := fs.Int("statements", 1000, "statements of each kind at one client")
	duration := fs.Duration("duration", 3*time.Second, "the length of each many-client phase")
	clients := fs.Int("clients", 16, "clients in the many-client phases")
	ids := fs.String("ids", fmt.Sprintf("%d-%d", bench.DefaultFirstID, bench.DefaultLastID), "the orders the statements update, `FROM-TO`, split between the clients")
	asJSON := fs.Bool("json", false, "print JSON")
	wire := fs.String("wire", "", "send the governed statements over the PostgreSQL wire front at this connection `URL`\n(with --info, \"demo\" uses its pg_url) instead of POST /v1/statements")
	reads := fs.Bool("read", true, "also measure the read workload (a single-row SELECT by key, a new literal each), after the update's")
	pgbouncer := fs.String("pgbouncer", "", "start the PgBouncer binary at `PATH` in front of the same target and send each workload's\ndirect statements through it too: a proxy's cost beside the node's")
	bouncerOnly := fs.Bool("pgbouncer-only", false, "start PgBouncer (--pgbouncer) in front of the target, print its connection URL and keep it\nrunning until interrupted, for another load generator (make bench's pgbench)")
	storeDir := fs.String("store-dir", "", "the node's store `DIR`, on this machine: its device's fsync is measured first\n(with --info of a demo on a store file, its directory)")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	var otherPIDs []int
	if *info != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		inf, err := readDemoInfo(*info)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		// Flags given explicitly win over the file.
		fill := func(name string, p *string, v string) {
			if !set[name] && v != "" {
				*p = v
			}
		}
		fill("api", api, inf.APIURL)
		fill("token", token, inf.AgentToken)
		fill("target", target, inf.Target)
		fill("dsn", dsn, inf.TargetDSN)
		fill("agent", agent, inf.Agent)
		fill("grantor-key", grantorKey, inf.GrantorKey)
		if *wire == "demo" {
			*wire = inf.PGURL
		}
		if !set["store-dir"] && inf.Store != "" && !store.IsPostgresURL(inf.Store) {
			*storeDir = filepath.Dir(inf.Store)
		}
		if !set["node-pid"] {
			*nodePID = inf.PID
		}
		if len(inf.Nodes) > 1 && !set["api"] {
			// A demo of several nodes: the clients are spread over them,
			// and every node's and the Pilot's CPU counts as Harbormaster's.
			urls := make([]string, len(inf.Nodes))
			for i, n := range inf.Nodes {
				urls[i] = n.APIURL
				if n.PID != inf.PID && !set["node-pid"] {
					otherPIDs = append(otherPIDs, n.PID)
				}
			}
			*api = strings.Join(urls, ",")
			if inf.PilotPID > 0 && !set["node-pid"] {
				otherPIDs = append(otherPIDs, inf.PilotPID)
			}
		}
	}
	if *api == "" || *token == "" || *dsn == "" {
		return e.usageErr(fs, "--info, or --api, --token and --dsn, are required")
	}
	first, last, err := parseIDRange(*ids)
	if err != nil {
		return e.usageErr(fs, "--ids: %v", err)
	}
	apis := strings.Split(*api, ",")
	cfg := bench.Config{API: apis[0], APIs: apis, Token: *token, Target: *target, DSN: *dsn, Statements: *statements, Duration: *duration,
		Clients: *clients, FirstID: first, LastID: last, NodePID: *nodePID, OtherPIDs: otherPIDs, PostgresPID: *pgPID, Wire: *wire,
		StoreDir: *storeDir}
	if *wire == "demo" || *wire != "" && !strings.HasPrefix(*wire, "postgres") {
		return e.usageErr(fs, "--wire: want a postgres:// URL (or demo, with --info of a demo that serves the wire front)")
	}
	if *statements < 1 || *duration <= 0 || *clients < 1 {
		return e.usageErr(fs, "--statements and --clients must be at least 1, --duration more than 0")
	}
	cfg.Reads = *reads
	if *pgbouncer != "" {
		url, stop, err := bench.StartPgBouncer(e.ctx, *pgbouncer, cfg.DSN, cfg.Clients)
		if err != nil {
			e.errorf("%v", err)
			return exitFail
		}
		defer stop()
		cfg.PgBouncer = url
		if *bouncerOnly {
			fmt.Fprintln(e.stdout, url)
			<-e.ctx.Done()
			return exitOK
		}
	} else if *bouncerOnly {
		return e.usageErr(fs, "--pgbouncer-only needs --pgbouncer PATH")
	}
	var uploaded string
	if *delegationOnly && (*grantorKey == "" || *noDelegation) {
		return e.usageErr(fs, "--delegation-only needs a grantor key (--grantor-key, or a demo's --info file) and no --no-delegation")
	}
	if *grantorKey != "" && !*noDelegation {
		c, id, err := uploadBenchDelegation(e.ctx, cfg, *agent, *grantorKey)
		if err != nil {
			e.errorf("uploading the benchmark's delegation: %v", err)
			return exitFail
		}
		uploaded = id
		if *delegationOnly {
			fmt.Fprintln(e.stdout, id)
			return exitOK
		}
		defer func() {
			// The run is over, even if interrupted (the client does not use e.ctx).
			err := e.postAct(c, "/v1/delegations/"+id+"/revoke", signing.NamespaceRevocation, acts.Revocation{Version: 1,
				Kind: acts.KindRevocation, DelegationID: id, Target: cfg.Target, Reason: "harbormaster bench: the run is over",
				Time: time.Now().UTC().Format(time.RFC3339)}, nil)
			if err != nil {
				e.errorf("revoking the benchmark's delegation %s: %v", id, err)
				e.hintf("revoke it with 'harbormaster delegation revoke %s --target %s --server %s --key %s --reason ...'", id, cfg.Target, cfg.API, *grantorKey)
				code = exitFail
			}
		}()
		if !*asJSON {
			fmt.Fprintf(e.stdout, "harbormaster bench: uploaded delegation %s for the workload (revoked when the run ends)\n", id)
		}
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "harbormaster bench: running (%d statements of each kind at one client, then %d clients for %s direct and %s governed)...\n",
			*statements, *clients, *duration, *duration)
	}
	res, err := bench.Run(e.ctx, cfg)
	if err != nil {
		e.errorf("%v", err)
		var ne *bench.NotExecutedError
		if errors.As(err, &ne) && ne.Outcome == "referred" && uploaded == "" {
			e.hintf("the node's delegations must let %s run the workload; give a grantor key (--grantor-key, or a demo's --info file) to upload the benchmark's", *agent)
		}
		return exitFail
	}
	if *asJSON {
		writeJSONLine(e, res)
		return exitOK
	}
	printBench(e.stdout, res, *duration)
	return exitOK
}

// readDemoInfo reads a demo's --info file.
func readDemoInfo(path string) (demoInfo, error) {
	var inf demoInfo
	b, err := config.ReadFileLimited(path, 1<<20)
	if err != nil {
		return inf, err
	}
	if err := json.Unmarshal(b, &inf); err != nil {
		return inf, fmt.Errorf("%s: not a demo's --info file: %w", path, err)
	}
	return inf, nil
}

func parseIDRange(s string) (first, last int64, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		first, err = strconv.ParseInt(a, 10, 64)
		if err == nil {
			last, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil || first < 1 || last < first {
		return 0, 0, fmt.Errorf("%q is not FROM-TO with 1 <= FROM <= TO", s)
	}
	return first, last, nil
}

// uploadBenchDelegation signs the benchmark's delegation with the grantor
// key, compiled against the target's live catalog, and uploads it. It
// returns the client (for the revocation) and the delegation's id.
func uploadBenchDelegation(ctx context.Context, cfg bench.Config, agent, keyPath string) (*humanClient, string, error) {
	key, err := signing.LoadPrivateKey(keyPath)
	if err != nil {
		return nil, "", err
	}
	cat, err := pilot.LoadCatalogDSN(ctx, cfg.DSN, nil)
	if err != nil {
		return nil, "", err
	}
	var run [6]byte
	_, _ = rand.Read(run[:]) // never fails
	// An hour, or longer for a long run.
	expires := time.Now().Add(time.Hour + 2*cfg.Duration).Truncate(time.Second)
	y := bench.Delegation(agent, cfg.Target, expires, hex.EncodeToString(run[:]))
	d, err := bound.Parse(y, "bench.yaml")
	if err != nil {
		return nil, "", err
	}
	b, rep := bound.Compile(d, cat, bound.Options{Now: time.Now})
	if !rep.Signable {
		var ps []string
		for _, p := range rep.Problems {
			ps = append(ps, problemString(p))
		}
		return nil, "", fmt.Errorf("it does not compile against the target: %s", strings.Join(ps, "; "))
	}
	canon, err := b.Canonical()
	if err != nil {
		return nil, "", err
	}
	sig, err := key.Sign(signing.NamespaceDelegation, canon)
	if err != nil {
		return nil, "", err
	}
	c := &humanClient{server: strings.TrimRight(cfg.API, "/"), key: key, http: &http.Client{Timeout: time.Minute}}
	var out struct {
		Delegation struct {
			ID string `json:"id"`
		} `json:"delegation"`
	}
	if err := c.do(http.MethodPost, "/v1/delegations", "", map[string]string{"yaml": string(y), "signature": string(sig)}, &out); err != nil {
		return nil, "", err
	}
	return c, out.Delegation.ID, nil
}

// printBench prints a run's figures as a short table.
func printBench(w io.Writer, r *bench.Result, d time.Duration) {
	fmt.Fprintf(w, "\nworkload: %s\ndirect:   %s\n", r.Statement, r.DirectMode)
	fmt.Fprintf(w, "\none client, %d statements of each kind, interleaved\n", r.Statements)
	fmt.Fprintf(w, "  %-22s %10s %10s %10s\n", "", "direct", "governed", "added")
	fmt.Fprintf(w, "  %-22s %10.2f %10.2f %10.2f\n", "p50 (ms)", r.DirectP50Ms, r.GovernedP50Ms, r.AddedP50Ms)
	fmt.Fprintf(w, "  %-22s %10.2f %10.2f %10.2f\n", "p99 (ms)", r.DirectP99Ms, r.GovernedP99Ms, r.AddedP99Ms)
	fmt.Fprintf(w, "\n%d clients, %s each, back to back\n", r.Clients, d)
	fmt.Fprintf(w, "  %-22s %10s %10s %10s\n", "", "direct", "governed", "ratio")
	fmt.Fprintf(w, "  %-22s %10.0f %10.0f %10.3f\n", "statements/s", r.DirectTPS16, r.GovernedTPS16, r.Ratio16)
	fmt.Fprintf(w, "  CPU µs per statement\n")
	row := func(name string, a, b *float64) {
		f := func(v *float64) string {
			if v == nil {
				return "-"
			}
			return strconv.FormatFloat(*v, 'f', 0, 64)
		}
		if a != nil || b != nil {
			fmt.Fprintf(w, "  %-22s %10s %10s\n", "  "+name, f(a), f(b))
		}
	}
	dc, gc := r.CPU.Direct, r.CPU.Governed
	row(fmt.Sprintf("postgres (%d)", r.PIDs.Postgres), dc.Postgres, gc.Postgres)
	row(fmt.Sprintf("harbormaster (%d)", r.PIDs.Harbormaster), dc.Harbormaster, gc.Harbormaster)
	row(fmt.Sprintf("clients (%d)", r.PIDs.Clients), dc.Clients, gc.Clients)
	row("machine", dc.Machine, gc.Machine)
	row("other", dc.Other, gc.Other)
	if p := r.PgBouncer; p != nil {
		printProxy(w, "PgBouncer, the same statements", p)
	}
	if rd := r.Read; rd != nil {
		fmt.Fprintf(w, "\nread workload: %s\n", rd.Statement)
		fmt.Fprintf(w, "  %-22s %10s %10s %10s\n", "", "direct", "governed", "added")
		fmt.Fprintf(w, "  %-22s %10.2f %10.2f %10.2f\n", "p50 (ms)", rd.DirectP50Ms, rd.GovernedP50Ms, rd.AddedP50Ms)
		fmt.Fprintf(w, "  %-22s %10.2f %10.2f %10.2f\n", "p99 (ms)", rd.DirectP99Ms, rd.GovernedP99Ms, rd.AddedP99Ms)
		fmt.Fprintf(w, "  %-22s %10.0f %10.0f %10.3f\n", fmt.Sprintf("statements/s, %d", r.Clients), rd.DirectTPS16, rd.GovernedTPS16, rd.Ratio16)
		if v := rd.CPU.Governed.Harbormaster; v != nil {
			fmt.Fprintf(w, "  %-22s %10s %10.0f\n", "harbormaster CPU µs", "", *v)
		}
		if p := rd.PgBouncer; p != nil {
			printProxy(w, "PgBouncer, the same reads", p)
		}
	}
	if f := r.StoreFsync; f != nil {
		fmt.Fprintf(w, "\nstore fsync (%s, %d samples): p50 %.0f µs, p90 %.0f µs\n", f.Dir, f.Samples, f.P50Us, f.P90Us)
		fmt.Fprintf(w, "  each governed statement waits for one durable commit of the store that a direct one does not\n")
	}
	if r.Note != "" {
		fmt.Fprintf(w, "\nnote: %s\n", r.Note)
	}
	if r.PIDs.Harbormaster == 0 {
		fmt.Fprintf(w, "\nno node pid (--node-pid): the node's CPU time is in machine\n")
	}
	if r.PIDs.Postgres == 0 {
		fmt.Fprintf(w, "no local PostgreSQL found (--postgres-pid): its CPU time is in machine\n")
	}
}

// printProxy prints a workload sent through a proxy against the same
// direct statements.
func printProxy(w io.Writer, title string, p *bench.Figures) {
	fmt.Fprintf(w, "\n%s\n", title)
	fmt.Fprintf(w, "  %-22s %10s %10s %10s\n", "", "direct", "proxied", "added/ratio")
	fmt.Fprintf(w, "  %-22s %10.2f %10.2f %10.2f\n", "p50 (ms)", p.DirectP50Ms, p.GovernedP50Ms, p.AddedP50Ms)
	fmt.Fprintf(w, "  %-22s %10.0f %10.0f %10.3f\n", "statements/s", p.DirectTPS16, p.GovernedTPS16, p.Ratio16)
}
