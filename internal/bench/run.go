package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Config configures Run. API, Token and DSN are required.
type Config struct {
	// API is the node's HTTP API, e.g. http://127.0.0.1:8080.
	API string `json:"api"`
	// APIs, when set, are several nodes' APIs on one store (API first):
	// client c sends its governed statements to APIs[c % len(APIs)]. The
	// one-client phase uses the first.
	APIs []string `json:"apis,omitempty"`
	// Token is the agent's bearer token.
	Token string `json:"token"`
	// Target is the target's name on the node. Defaults to "shop".
	Target string `json:"target"`
	// DSN is the target database, for the direct run.
	DSN string `json:"dsn"`
	// Statements is how many statements of each kind the one-client phase
	// measures. Defaults to 1000.
	Statements int `json:"statements"`
	// Warmup is how many of each kind run first at one client, unmeasured.
	// Defaults to 20; negative means none.
	Warmup int `json:"warmup"`
	// Duration is the length of each many-client phase. Defaults to 3s.
	Duration time.Duration `json:"duration"`
	// Clients is the number of clients in the many-client phases. Defaults
	// to 16.
	Clients int `json:"clients"`
	// FirstID and LastID are the orders the statements update, split
	// between the clients. Default to DefaultFirstID and DefaultLastID.
	FirstID int64 `json:"first_id"`
	LastID  int64 `json:"last_id"`
	// NodePID is the node's process, for the CPU split. Defaults to 0: the
	// split has no Harbormaster part.
	NodePID int `json:"node_pid"`
	// OtherPIDs are further Harbormaster processes whose CPU counts as the
	// node's: the other nodes on the store, a Pilot in its own process.
	OtherPIDs []int `json:"other_pids,omitempty"`
	// PostgresPID is the target's postmaster. Defaults to 0: the parent of
	// the direct connection's backend, if the server is on this machine.
	PostgresPID int `json:"postgres_pid"`
	// Wire, when set, is a connection URL of the node's PostgreSQL wire
	// front (docs/pgwire.md): the governed statements go over it, each
	// client on its own connection, the way the direct ones go to the
	// target (DirectMode), instead of POST /v1/statements. API is then
	// not needed.
	Wire string `json:"wire,omitempty"`
	// StoreDir, when set, is the directory of the node's store, on this
	// machine: the run measures its device's fsync first (ProbeFsync), the
	// one durable commit a governed statement waits for and a direct one
	// does not.
	StoreDir string `json:"store_dir,omitempty"`
	// Reads, when set, also measures the read workload (ReadForm) the
	// same way, after the update's: Result.Read.
	Reads bool `json:"reads,omitempty"`
	// PgBouncer, when set, is the connection URL of a PgBouncer in front
	// of the same target: each workload's direct statements are also sent
	// through it the way they are sent to the target, for a proxy's cost
	// beside the node's (Result.PgBouncer, Result.Read.PgBouncer).
	PgBouncer string `json:"pgbouncer,omitempty"`
	// HTTPClient sends the governed statements. Defaults to a client that
	// keeps a connection per client alive.
	HTTPClient *http.Client `json:"-"`
	// Clock measures latency and phases. Defaults to time.Now.
	Clock func() time.Time `json:"-"`
}

// WithDefaults returns a copy of c with unset fields at their defaults.
func (c Config) WithDefaults() Config {
	c.API = strings.TrimRight(c.API, "/")
	c.APIs = append([]string(nil), c.APIs...)
	if len(c.APIs) == 0 && c.API != "" {
		c.APIs = []string{c.API}
	}
	for i := range c.APIs {
		c.APIs[i] = strings.TrimRight(c.APIs[i], "/")
	}
	if c.API == "" && len(c.APIs) > 0 {
		c.API = c.APIs[0]
	}
	if c.Target == "" {
		c.Target = "shop"
	}
	if c.Statements == 0 {
		c.Statements = 1000
	}
	if c.Warmup == 0 {
		c.Warmup = 20
	}
	if c.Duration == 0 {
		c.Duration = 3 * time.Second
	}
	if c.Clients == 0 {
		c.Clients = 16
	}
	if c.FirstID == 0 && c.LastID == 0 {
		c.FirstID, c.LastID = DefaultFirstID, DefaultLastID
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
			Proxy:               nil, // the node is reached directly
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        c.Clients + 4,
			MaxIdleConnsPerHost: c.Clients + 4,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.API == "" && c.Wire == "":
		return errors.New("bench: API (or Wire) is required")
	case c.Token == "":
		return errors.New("bench: Token is required")
	case c.DSN == "":
		return errors.New("bench: DSN is required")
	case c.Statements < 1:
		return fmt.Errorf("bench: Statements %d, want at least 1", c.Statements)
	case c.Duration <= 0:
		return fmt.Errorf("bench: Duration %s, want more than 0", c.Duration)
	case c.Clients < 1:
		return fmt.Errorf("bench: Clients %d, want at least 1", c.Clients)
	case c.NodePID < 0 || c.PostgresPID < 0:
		return errors.New("bench: NodePID and PostgresPID must not be negative")
	}
	return nil
}

// Result is one run's figures. Latencies are in milliseconds; the _16
// figures are at Clients clients (16 by default).
type Result struct {
	// Figures are the update workload's (StatementForm); PgBouncer among
	// them, the same statements through PgBouncer.
	Figures
	// DirectMode is how the direct run sends it.
	DirectMode string `json:"direct_mode"`
	// Statements is how many of each kind the one-client phase measured.
	Statements int `json:"statements_1"`
	// Clients is the many-client phases' client count.
	Clients int `json:"clients"`
	// PhaseSeconds is the length asked of each many-client phase; the rates
	// divide by each phase's measured length.
	PhaseSeconds float64 `json:"phase_s"`

	// ReadAddedP50Ms and ReadRatio16 are Read's AddedP50Ms and Ratio16
	// (Config.Reads), where a script looks for them.
	ReadAddedP50Ms float64 `json:"read_added_p50_ms,omitempty"`
	ReadRatio16    float64 `json:"read_ratio_16,omitempty"`
	// Read is the read workload's figures (Config.Reads), nil without.
	Read *Figures `json:"read,omitempty"`

	// StoreFsync is the store device's fsync latency (Config.StoreDir),
	// measured before the load; nil without a StoreDir.
	StoreFsync *Fsync `json:"store_fsync,omitempty"`

	// Note says what is unusual about the run, if anything.
	Note string `json:"note,omitempty"`
	// PIDs are the processes the CPU split reads; 0 is one not known.
	PIDs PIDs `json:"pids"`
}

// Figures are one workload's measures: at one client, direct and
// governed interleaved; at Clients clients, each for the phase's length.
// The "governed" side is the node (or PgBouncer, in PgBouncer).
type Figures struct {
	// Statement is the workload's form.
	Statement     string  `json:"statement"`
	DirectP50Ms   float64 `json:"direct_p50_ms"`
	DirectP99Ms   float64 `json:"direct_p99_ms"`
	GovernedP50Ms float64 `json:"governed_p50_ms"`
	GovernedP99Ms float64 `json:"governed_p99_ms"`
	// AddedP50Ms and AddedP99Ms are the governed percentile less the direct
	// one.
	AddedP50Ms           float64 `json:"added_p50_ms"`
	AddedP99Ms           float64 `json:"added_p99_ms"`
	DirectStatements16   int64   `json:"direct_statements_16"`
	GovernedStatements16 int64   `json:"governed_statements_16"`
	DirectTPS16          float64 `json:"direct_tps_16"`
	GovernedTPS16        float64 `json:"governed_tps_16"`
	// Ratio16 is GovernedTPS16 / DirectTPS16.
	Ratio16 float64 `json:"ratio_16"`
	// CPU is the CPU time per statement in each many-client phase.
	CPU struct {
		Direct   CPU `json:"direct"`
		Governed CPU `json:"governed"`
	} `json:"cpu_us_per_stmt"`
	// PgBouncer is this workload's direct statements sent through
	// PgBouncer (Config.PgBouncer) as the "governed" side: a proxy's cost,
	// for comparison; nil without.
	PgBouncer *Figures `json:"pgbouncer,omitempty"`
}

// PIDs are the processes of the CPU split.
type PIDs struct {
	Postgres     int `json:"postgres"`
	Harbormaster int `json:"harbormaster"`
	// Others are the other Harbormaster processes counted with it.
	Others  []int `json:"others,omitempty"`
	Clients int   `json:"clients"`
}

// fsyncSamples is how many fsyncs Run's probe of Config.StoreDir times.
const fsyncSamples = 300

// DirectMode names how the direct run sends its statements.
const DirectMode = "pgconn ExecParams: extended protocol, unnamed statement, one round trip, no statement cache"

// NotExecutedError is a statement that did not execute as the benchmark
// needs: a governed one that was referred or refused, or either kind that
// did not affect exactly one row.
type NotExecutedError struct {
	// Governed is true for a statement sent to the node.
	Governed bool
	SQL      string
	// Outcome is the node's outcome ("referred"), or an HTTP status and
	// error code, or empty for a direct statement.
	Outcome   string
	RequestID string
	Reasons   []string
	Rows      int64
}

func (e *NotExecutedError) Error() string {
	kind := "direct"
	if e.Governed {
		kind = "governed"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "bench: %s statement %q", kind, e.SQL)
	switch {
	case e.Governed && e.Outcome != "executed":
		fmt.Fprintf(&b, " was %s", e.Outcome)
		if e.RequestID != "" {
			fmt.Fprintf(&b, " (request %s)", e.RequestID)
		}
	default:
		fmt.Fprintf(&b, " affected %d rows, want 1", e.Rows)
	}
	if len(e.Reasons) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(e.Reasons, "; "))
	}
	return b.String()
}

// Run runs the benchmark against a node and its target: the one-client
// phase (direct and governed interleaved), then Clients clients direct for
// Duration, then Clients clients governed for Duration.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w, err := NewWorkload(cfg.FirstID, cfg.LastID, cfg.Clients)
	if err != nil {
		return nil, err
	}
	var fsync *Fsync
	if cfg.StoreDir != "" {
		// Before the load, so that nothing else is writing to the device.
		if fsync, err = ProbeFsync(cfg.StoreDir, fsyncSamples); err != nil {
			return nil, err
		}
	}
	r := &runner{cfg: cfg, w: w}
	defer r.close()
	if err := connectEach(ctx, cfg.DSN, cfg.Clients, "the target", &r.conns); err != nil {
		return nil, err
	}
	m := meter{postgres: cfg.PostgresPID, self: os.Getpid()}
	if cfg.NodePID > 0 {
		m.node = append(m.node, cfg.NodePID)
	}
	m.node = append(m.node, cfg.OtherPIDs...)
	if m.postgres == 0 {
		m.postgres = localPostmaster(r.conns[0])
	}
	if m.postgres > 0 {
		if _, err := postgresCPU(m.postgres); err != nil {
			return nil, fmt.Errorf("bench: PostgreSQL process %d: %w", m.postgres, err)
		}
	}
	for _, pid := range m.node {
		if _, err := processCPU(pid); err != nil {
			return nil, fmt.Errorf("bench: node process %d: %w", pid, err)
		}
	}
	if cfg.Wire != "" {
		if err := connectEach(ctx, cfg.Wire, cfg.Clients, "the wire front", &r.wire); err != nil {
			return nil, err
		}
	}
	res := &Result{DirectMode: DirectMode, Statements: cfg.Statements, Clients: cfg.Clients,
		PhaseSeconds: cfg.Duration.Seconds(), PIDs: PIDs{Postgres: m.postgres, Harbormaster: cfg.NodePID, Others: cfg.OtherPIDs, Clients: m.self},
		StoreFsync: fsync}
	if slices.Contains(m.node, m.self) {
		// One process cannot be split: it is all counted as clients.
		m.node = nil
		res.Note = "the node runs in the load generator's process: its CPU time is in clients"
	}
	r.meter = m
	if cfg.PgBouncer != "" {
		if err := connectEach(ctx, cfg.PgBouncer, cfg.Clients, "PgBouncer", &r.bouncer); err != nil {
			return nil, err
		}
	}
	if res.Figures, err = r.workload(ctx, StatementForm, r.w.Statement, false); err != nil {
		return nil, err
	}
	if cfg.Reads {
		rd, err := r.workload(ctx, ReadForm, r.w.Read, true)
		if err != nil {
			return nil, err
		}
		res.Read, res.ReadAddedP50Ms, res.ReadRatio16 = &rd, rd.AddedP50Ms, rd.Ratio16
	}
	return res, nil
}

// workload measures the workload whose statements stmt makes (form names
// it; read: its governed answer counts rows, not rows affected) against
// the node, and through PgBouncer when there is one.
func (r *runner) workload(ctx context.Context, form string, stmt func(int64) string, read bool) (Figures, error) {
	r.stmt, r.read = stmt, read
	f, err := r.measure(ctx, r.governed)
	if err != nil || r.bouncer == nil {
		f.Statement = form
		return f, err
	}
	pb, err := r.measure(ctx, r.viaBouncer)
	pb.Statement, f.Statement, f.PgBouncer = form, form, &pb
	return f, err
}

// connectEach opens n connections to url (what names it in an error),
// appending each to into as it opens, so that the runner closes those
// opened before a failure.
func connectEach(ctx context.Context, url string, n int, what string, into *[]*pgconn.PgConn) error {
	for range n {
		c, err := pgconn.Connect(ctx, url)
		if err != nil {
			return fmt.Errorf("bench: connect to %s: %w", what, err)
		}
		*into = append(*into, c)
	}
	return nil
}

// measure runs the one-client phase and the two many-client phases of
// the current workload (r.stmt), gov as the governed side.
func (r *runner) measure(ctx context.Context, gov stmtFunc) (Figures, error) {
	var f Figures
	if err := r.oneClient(ctx, gov, &f); err != nil {
		return f, err
	}
	// Every client's connections (the node's to the target too) open
	// before the measured phases.
	for _, s := range []stmtFunc{r.direct, gov} {
		if _, err := r.clients(ctx, s, 3, 0); err != nil {
			return f, err
		}
	}
	d, err := r.phase(ctx, r.direct)
	if err != nil {
		return f, err
	}
	g, err := r.phase(ctx, gov)
	if err != nil {
		return f, err
	}
	f.DirectStatements16, f.DirectTPS16, f.CPU.Direct = d.n, d.rate(), d.cpu
	f.GovernedStatements16, f.GovernedTPS16, f.CPU.Governed = g.n, g.rate(), g.cpu
	f.Ratio16 = f.GovernedTPS16 / f.DirectTPS16
	return f, nil
}

type runner struct {
	cfg     Config
	w       *Workload
	conns   []*pgconn.PgConn // one per client
	wire    []*pgconn.PgConn // one per client, to the wire front (Config.Wire)
	bouncer []*pgconn.PgConn // one per client, to PgBouncer (Config.PgBouncer)
	meter   meter

	// stmt makes the current workload's statements; read is set for the
	// read workload (whose governed answer counts rows, not rows affected).
	stmt func(id int64) string
	read bool
}

func (r *runner) close() {
	for _, c := range append(append(r.conns, r.wire...), r.bouncer...) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.Close(ctx)
		cancel()
	}
}

// stmtFunc runs one statement as client c.
type stmtFunc func(ctx context.Context, c int, sql string) error

func (r *runner) direct(ctx context.Context, c int, sql string) error {
	return ExecDirect(ctx, r.conns[c], sql)
}

// ExecDirect runs sql on conn the way the direct run does (DirectMode) and
// fails unless it affected exactly one row.
func ExecDirect(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	res := conn.ExecParams(ctx, sql, nil, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("bench: direct statement %q: %w", sql, res.Err)
	}
	if n := res.CommandTag.RowsAffected(); n != 1 {
		return &NotExecutedError{SQL: sql, Rows: n}
	}
	return nil
}

// viaBouncer runs sql through PgBouncer the way the direct run sends it
// to the target.
func (r *runner) viaBouncer(ctx context.Context, c int, sql string) error {
	return ExecDirect(ctx, r.bouncer[c], sql)
}

// answer is the part of POST /v1/statements' answer the benchmark reads.
type answer struct {
	Outcome      string            `json:"outcome"`
	RequestID    string            `json:"request_id"`
	RowsAffected int64             `json:"rows_affected"`
	Rows         []json.RawMessage `json:"rows"`
	Reasons      []string          `json:"reasons"`
	Error        *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

func (r *runner) governed(ctx context.Context, c int, sql string) error {
	if r.wire != nil {
		// Over the wire front, as the direct statement goes to the target:
		// a referral is an error (HM001) there.
		res := r.wire[c].ExecParams(ctx, sql, nil, nil, nil, nil).Read()
		if res.Err != nil {
			var pe *pgconn.PgError
			if errors.As(res.Err, &pe) {
				return &NotExecutedError{Governed: true, SQL: sql, Outcome: "refused (SQLSTATE " + pe.Code + ")", RequestID: pe.Where, Reasons: []string{pe.Message}}
			}
			return fmt.Errorf("bench: governed statement over the wire: %w", res.Err)
		}
		if n := res.CommandTag.RowsAffected(); n != 1 {
			return &NotExecutedError{Governed: true, SQL: sql, Outcome: "executed", Rows: n}
		}
		return nil
	}
	body, err := json.Marshal(map[string]string{"target": r.cfg.Target, "sql": sql})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.cfg.APIs[c%len(r.cfg.APIs)]+"/v1/statements", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: governed statement: %w", err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&a); err != nil {
		return fmt.Errorf("bench: governed statement: HTTP %d, unreadable answer: %w", resp.StatusCode, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // the rest, so the connection is reused
	switch {
	case resp.StatusCode != http.StatusOK:
		e := &NotExecutedError{Governed: true, SQL: sql, Outcome: fmt.Sprintf("refused (HTTP %d)", resp.StatusCode)}
		if a.Error != nil {
			e.Outcome = fmt.Sprintf("refused (HTTP %d, %s)", resp.StatusCode, a.Error.Code)
			e.RequestID, e.Reasons = a.Error.RequestID, []string{a.Error.Message}
		}
		return e
	case r.read && (a.Outcome != "executed" || len(a.Rows) != 1):
		return &NotExecutedError{Governed: true, SQL: sql, Outcome: a.Outcome, RequestID: a.RequestID, Reasons: a.Reasons, Rows: int64(len(a.Rows))}
	case !r.read && (a.Outcome != "executed" || a.RowsAffected != 1):
		return &NotExecutedError{Governed: true, SQL: sql, Outcome: a.Outcome, RequestID: a.RequestID, Reasons: a.Reasons, Rows: a.RowsAffected}
	}
	return nil
}

// oneClient runs the interleaved one-client phase: statement i of each
// kind on the same row, the direct one first for even i, the governed one
// first for odd i.
func (r *runner) oneClient(ctx context.Context, gov stmtFunc, res *Figures) error {
	warm := max(r.cfg.Warmup, 0)
	direct := make([]time.Duration, 0, r.cfg.Statements)
	governed := make([]time.Duration, 0, r.cfg.Statements)
	timed := func(f stmtFunc, sql string) (time.Duration, error) {
		t0 := r.cfg.Clock()
		err := f(ctx, 0, sql)
		return r.cfg.Clock().Sub(t0), err
	}
	for i := range warm + r.cfg.Statements {
		id := r.w.AnyRow(i)
		ds, gs := r.stmt(id), r.stmt(id)
		var dt, gt time.Duration
		var err error
		if i%2 == 0 {
			if dt, err = timed(r.direct, ds); err == nil {
				gt, err = timed(gov, gs)
			}
		} else {
			if gt, err = timed(gov, gs); err == nil {
				dt, err = timed(r.direct, ds)
			}
		}
		if err != nil {
			return err
		}
		if i >= warm {
			direct, governed = append(direct, dt), append(governed, gt)
		}
	}
	slices.Sort(direct)
	slices.Sort(governed)
	res.DirectP50Ms, res.DirectP99Ms = ms(percentile(direct, 0.50)), ms(percentile(direct, 0.99))
	res.GovernedP50Ms, res.GovernedP99Ms = ms(percentile(governed, 0.50)), ms(percentile(governed, 0.99))
	res.AddedP50Ms = res.GovernedP50Ms - res.DirectP50Ms
	res.AddedP99Ms = res.GovernedP99Ms - res.DirectP99Ms
	return nil
}

// phaseResult is one many-client phase.
type phaseResult struct {
	n       int64
	elapsed time.Duration
	cpu     CPU
}

func (p phaseResult) rate() float64 { return float64(p.n) / p.elapsed.Seconds() }

// phase runs Clients clients for Duration and reads the CPU meter around
// them.
func (r *runner) phase(ctx context.Context, f stmtFunc) (phaseResult, error) {
	before := r.meter.read()
	t0 := r.cfg.Clock()
	n, err := r.clients(ctx, f, 0, r.cfg.Duration)
	elapsed := r.cfg.Clock().Sub(t0)
	after := r.meter.read()
	if err != nil {
		return phaseResult{}, err
	}
	return phaseResult{n: n, elapsed: elapsed, cpu: perStatement(before, after, n)}, nil
}

// clients runs Clients clients, each on its own rows and connection, each
// for perClient statements or, if that is 0, until d has passed. It
// returns the statements run, or the first error (which stops the rest).
func (r *runner) clients(ctx context.Context, f stmtFunc, perClient int, d time.Duration) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		n        atomic.Int64
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	deadline := r.cfg.Clock().Add(d)
	for c := range r.cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if perClient > 0 && i == perClient || perClient == 0 && !r.cfg.Clock().Before(deadline) {
					return
				}
				if err := f(ctx, c, r.stmt(r.w.Row(c, i))); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return n.Load(), firstErr
}

// percentile is the nearest-rank q-quantile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted))-1e-9)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// localPostmaster is the postmaster of conn's server if it runs on this
// machine (a loopback or Unix-socket connection whose backend and its
// parent are postgres processes here), else 0.
func localPostmaster(conn *pgconn.PgConn) int {
	switch a := conn.Conn().RemoteAddr().(type) {
	case *net.TCPAddr:
		if !a.IP.IsLoopback() {
			return 0
		}
	case *net.UnixAddr:
	default:
		return 0
	}
	backend, err := readProcStat(int(conn.PID()))
	if err != nil || backend.comm != "postgres" {
		return 0
	}
	pm, err := readProcStat(backend.ppid)
	if err != nil || pm.comm != "postgres" && pm.comm != "postmaster" {
		return 0
	}
	return backend.ppid
}
