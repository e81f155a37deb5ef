// Package gatewaytest wires a whole control plane for end-to-end tests: the
// SQLite store, the logbook writer, one Pilot (in process, or with
// Options.RemotePilot behind a remote server over mutual TLS), the gateway
// and the HTTP API, from explicit parts, the way node.Start wires them
// from a config file. The target is a real PostgreSQL database (see
// pgtmptest) loaded with the demo schema and data from examples.
//
// A test can stop the logbook writer (StopLogbook) to make every later
// append fail, close the whole system, and start a new one over the same
// store and target (a restart).
package gatewaytest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// Names the helpers use.
const (
	// Target is the demo target's name.
	Target = "shop"
	// Agent is the grantee of the example delegations.
	Agent = "agent:demo"
	// Other is a second agent with a token and no delegation.
	Other = "agent:other"
	// AgentToken and OtherToken are their bearer tokens.
	AgentToken = "demo-token-0123456789"
	OtherToken = "other-token-0123456789"
	// Examples are the example delegation files.
	Orders    = "unstick-orders.yaml" // Tier A
	Customers = "fix-name-typos.yaml" // Tier B
)

// Keys are the keys of one deployment: they outlive a restart.
type Keys struct {
	// ControlPlane signs marques and logbook checkpoints.
	ControlPlane ed25519.PrivateKey
	// Grantor is alice@shop, allowed to sign delegations for shop, and as an
	// operator revocations, switches, Surveyor enablement and sessions.
	Grantor *signing.PrivateKey
	// Approver is bob@shop: approvals, denials, reviews and sessions.
	Approver *signing.PrivateKey
	// ApproverPub is bob's public key line (for ssh-keygen interop tests).
	ApproverPub []byte
	// ApproverPEM is bob's private key in OpenSSH PEM form, for signing
	// with the real ssh-keygen (written to a 0600 file).
	ApproverPEM []byte
	// Stranger is a well-formed key that is not in the signers file.
	Stranger *signing.PrivateKey
	// Signers is the allowed-signers file: Grantor only.
	Signers *signing.AllowedSigners
	// SignersFile is its text.
	SignersFile []byte
}

// NewKeys makes fresh keys.
func NewKeys(t testing.TB) *Keys {
	t.Helper()
	_, cp, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := &Keys{ControlPlane: cp}
	gpriv, gpub, err := signing.GenerateEd25519("alice@test")
	if err != nil {
		t.Fatal(err)
	}
	if k.Grantor, err = signing.ParsePrivateKey(gpriv); err != nil {
		t.Fatal(err)
	}
	bpriv, bpub, err := signing.GenerateEd25519("bob@test")
	if err != nil {
		t.Fatal(err)
	}
	if k.Approver, err = signing.ParsePrivateKey(bpriv); err != nil {
		t.Fatal(err)
	}
	k.ApproverPub, k.ApproverPEM = bpub, bpriv
	spriv, _, err := signing.GenerateEd25519("mallory@test")
	if err != nil {
		t.Fatal(err)
	}
	if k.Stranger, err = signing.ParsePrivateKey(spriv); err != nil {
		t.Fatal(err)
	}
	line, err := signing.AllowedSignersLine([]string{"alice@" + Target},
		[]string{signing.NamespaceDelegation, signing.NamespaceRevocation, signing.NamespaceSwitch, signing.NamespaceEnable, signing.NamespaceSession}, gpub)
	if err != nil {
		t.Fatal(err)
	}
	bline, err := signing.AllowedSignersLine([]string{"bob@" + Target},
		[]string{signing.NamespaceApproval, signing.NamespaceDenial, signing.NamespaceReview, signing.NamespaceSession}, bpub)
	if err != nil {
		t.Fatal(err)
	}
	k.SignersFile = []byte(line + "\n" + bline + "\n")
	if k.Signers, err = signing.ParseAllowedSigners(k.SignersFile); err != nil {
		t.Fatal(err)
	}
	return k
}

// LoadShop loads examples/shop.sql and shop_data.sql into the database at
// dsn and initializes it as a target (receipts, guard function).
func LoadShop(t testing.TB, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, f := range []string{"shop.sql", "shop_data.sql"} {
		b, err := examples.FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(b), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("gatewaytest: loading %s: %v", f, err)
		}
	}
	if err := pilot.InitTarget(ctx, dsn); err != nil {
		t.Fatal(err)
	}
}

// StoreOptions are the options a test opens the system's store with (a
// second handle on it, say): on PostgreSQL, the throwaway server's
// fsync=off allowed.
func (s *System) StoreOptions() []store.Option {
	if store.IsPostgresURL(s.Opts.StorePath) {
		return []store.Option{store.WithUnsafeNoFsync()}
	}
	return nil
}

// Options are the explicit parts of a system. TargetDSN, StorePath and Keys
// are required.
type Options struct {
	// Name is the control plane's name. Defaults to "harbormaster-test".
	Name string
	// TargetDSN is the shop target's database.
	TargetDSN string
	// StorePath is the store's location: a SQLite file, or the URL of a
	// PostgreSQL database on a throwaway server.
	StorePath string
	// Keys are the deployment's keys.
	Keys *Keys
	// Agents maps bearer tokens to principals. Defaults to AgentToken for
	// Agent and OtherToken for Other.
	Agents map[string]string
	// Pilot tunes the Pilot; Target and DSN are filled in.
	Pilot pilot.Config
	// Logbook tunes the logbook; Origin defaults to Name+"/logbook", and
	// Journal to the store's (as a node has it) unless NoJournal.
	Logbook   logbook.Config
	NoJournal bool
	// MarqueTTL defaults to 30s.
	MarqueTTL time.Duration
	// Gateway tunes the gateway (quotas, queue TTL, Surveyor, Auditor, clock);
	// Name, Metrics and Switches are filled in.
	Gateway gateway.Config
	// Switches tunes the switch poller.
	Switches switches.Config
	// Audit, when set, configures a sampled audit (Key defaults to a fixed
	// test key) and sets Gateway.Auditor.
	Audit *audit.Config
	// RemotePilot puts the Pilot in a server of its own (remote.Server,
	// as harbormaster pilot runs it) behind a TCP relay the test can cut
	// (System.Relay), reached over mutual TLS with fresh certificates: the
	// gateway uses a remote.Client instead of the Pilot itself.
	RemotePilot bool
	// SharedQuota takes the fast-path quotas from the buckets in the store
	// (gateway.StoreQuota), as node.Start does on a PostgreSQL store.
	SharedQuota bool
	// WrapExecutor, when set, wraps the Executor the gateway uses, for a
	// test that injects a fault around the real Pilot's calls (a caller
	// going away once the Pilot answered, say).
	WrapExecutor func(pilot.Executor) pilot.Executor
}

// System is a running control plane.
type System struct {
	Opts    Options
	Store   *store.Store
	Logbook *logbook.Logbook
	Pilot   *pilot.Pilot
	// Executor is what the gateway uses: Pilot, or with RemotePilot the
	// client of the server Pilot runs in.
	Executor pilot.Executor
	// Remote and Relay are set with RemotePilot: the client, and the relay
	// between it and the server.
	Remote             *remote.Client
	Relay              *Relay
	Gateway            *gateway.Gateway
	API                *httpapi.Server
	Switches           *switches.Poller
	Auditor            *audit.Auditor
	Metrics            *metrics.Metrics
	CheckpointVerifier note.Verifier

	gatewayConfig gateway.Config
	apiConfig     httpapi.Config
	minter        *marque.Minter

	stopServer     context.CancelFunc
	serverDone     chan error
	stopLB         context.CancelFunc
	lbDone         chan error
	stopBackground context.CancelFunc
	background     sync.WaitGroup
	stopOnce       sync.Once
	closeOnce      sync.Once
}

// Start wires a system and registers its Close with t.Cleanup. It does not
// reconcile: a test that simulates a restart calls Gateway.Reconcile itself
// (node.Start does so with a grace of twice the marque TTL).
func Start(t testing.TB, opt Options) *System {
	t.Helper()
	if opt.Name == "" {
		opt.Name = "harbormaster-test"
	}
	if opt.Agents == nil {
		opt.Agents = map[string]string{AgentToken: Agent, OtherToken: Other}
	}
	if opt.Logbook.Origin == "" {
		opt.Logbook.Origin = opt.Name + "/logbook"
	}
	if opt.MarqueTTL == 0 {
		opt.MarqueTTL = 30 * time.Second
	}
	if opt.TargetDSN == "" || opt.StorePath == "" || opt.Keys == nil {
		t.Fatal("gatewaytest: TargetDSN, StorePath and Keys are required")
	}
	ctx := context.Background()
	s := &System{Opts: opt}
	t.Cleanup(s.Close)
	var err error
	if s.Store, err = store.Open(ctx, opt.StorePath, s.StoreOptions()...); err != nil {
		t.Fatal(err)
	}
	key := opt.Keys.ControlPlane
	pub := key.Public().(ed25519.PublicKey)
	cpSigner, err := logbook.NewCheckpointSigner(opt.Name, key)
	if err != nil {
		t.Fatal(err)
	}
	if s.CheckpointVerifier, err = logbook.NewCheckpointVerifier(opt.Name, pub); err != nil {
		t.Fatal(err)
	}
	if opt.Logbook.Journal == "" && !opt.NoJournal {
		// As a node runs it (node.Start).
		opt.Logbook.Journal = s.Store.LogbookJournal()
	}
	if s.Logbook, err = logbook.New(s.Store, cpSigner, time.Now, nil, opt.Logbook); err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	s.stopLB, s.lbDone = cancel, make(chan error, 1)
	go func() { s.lbDone <- s.Logbook.Run(lctx) }()

	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: opt.Name, Key: pub, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	minter, err := marque.NewMinter(marque.MinterConfig{Issuer: opt.Name, Key: key, TTL: opt.MarqueTTL, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	pc := opt.Pilot
	pc.Target, pc.DSN = Target, opt.TargetDSN
	if s.Pilot, err = pilot.New(ctx, pc, verifier, opt.Keys.Signers); err != nil {
		t.Fatal(err)
	}
	s.Executor = s.Pilot
	if opt.RemotePilot {
		s.startRemote(t)
	}
	s.Switches = switches.New(s.Store, opt.Switches)
	_ = s.Switches.Poll(ctx)
	m := metrics.New([]string{Target}, func(ctx context.Context) (int, time.Duration, error) { return s.Gateway.QueueStats(ctx) }, s.Switches)
	gc := opt.Gateway
	gc.Name, gc.Metrics, gc.Switches = opt.Name, m, s.Switches
	if opt.Audit != nil {
		ac := *opt.Audit
		if ac.Key == nil {
			ac.Key = []byte("gatewaytest audit sampling key")
		}
		if s.Auditor, err = audit.New(ac, s.Store, s.Logbook); err != nil {
			t.Fatal(err)
		}
		gc.Auditor = s.Auditor
	}
	s.Metrics = m
	if opt.SharedQuota {
		gc.SharedQuota = gateway.StoreQuota(s.Store)
	}
	s.gatewayConfig, s.minter = gc, minter
	exec := s.Executor
	if opt.WrapExecutor != nil {
		exec = opt.WrapExecutor(exec)
	}
	s.Gateway, err = gateway.New(ctx, gc, s.Store, s.Logbook, minter, opt.Keys.Signers, []pilot.Executor{exec})
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithCancel(ctx)
	s.stopBackground = bcancel
	s.background.Add(2)
	go func() { defer s.background.Done(); _ = s.Switches.Run(bctx) }()
	go func() { defer s.background.Done(); _ = s.Gateway.Run(bctx) }()
	var agents []httpapi.Agent
	for token, principal := range opt.Agents {
		agents = append(agents, httpapi.Agent{Principal: principal, TokenSHA256: httpapi.HashToken(token)})
	}
	s.apiConfig = httpapi.Config{Agents: agents, Signers: opt.Keys.Signers, Switches: s.Switches, ClaimRequest: node.ClaimRequest(s.Store), Idempotency: s.Store}
	if s.API, err = httpapi.New(s.Gateway, s.apiConfig); err != nil {
		t.Fatal(err)
	}
	return s
}

// startRemote serves s.Pilot from a remote.Server on a loopback port,
// behind a relay, and connects a client to it through the relay.
func (s *System) startRemote(t testing.TB) {
	t.Helper()
	dir := t.TempDir()
	files, err := remote.WriteCerts(dir, []string{"127.0.0.1", "localhost"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stls, err := remote.ServerTLS(files.PilotCert, files.PilotKey, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := remote.NewServer(remote.ServerConfig{TLS: stls}, s.Pilot)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	s.stopServer, s.serverDone = cancel, make(chan error, 1)
	go func() { s.serverDone <- srv.Serve(sctx, ln) }()
	s.Relay = NewRelay(t, ln.Addr().String())
	ctls, err := remote.ClientTLS(files.CA, files.ClientCert, files.ClientKey, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Remote, err = remote.Connect(context.Background(), remote.ClientConfig{Target: Target, URL: "https://" + s.Relay.Addr(), TLS: ctls}); err != nil {
		t.Fatal(err)
	}
	s.Executor = s.Remote
}

// Relay forwards TCP connections to an address until cut: a network
// between a client and a server that a test can break.
type Relay struct {
	ln     net.Listener
	to     string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// NewRelay listens on a loopback port and forwards to addr; t.Cleanup
// closes it.
func NewRelay(t testing.TB, addr string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{ln: ln, to: addr, conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.Close)
	return r
}

// Addr is the relay's address.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.to)
		if err != nil {
			c.Close()
			continue
		}
		if !r.track(c, up) {
			return
		}
		r.wg.Add(2)
		go r.pipe(c, up)
		go r.pipe(up, c)
	}
}

func (r *Relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = true
	}
	return true
}

func (r *Relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	r.mu.Lock()
	delete(r.conns, dst)
	delete(r.conns, src)
	r.mu.Unlock()
}

// Cut closes every connection through the relay (with a reset where the
// system allows it); later connections go through.
func (r *Relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
		delete(r.conns, c)
	}
}

// Conns is how many connections are open through the relay (each counted
// once, with its upstream).
func (r *Relay) Conns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns) / 2
}

// Close stops the relay and cuts every connection.
func (r *Relay) Close() {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if already {
		return
	}
	r.ln.Close()
	r.Cut()
	r.wg.Wait()
}

// Previewed asks for a referred request's preview as a human does (the
// console, queue show) and returns the request as a human sees it; its
// PreviewSHA256 is empty, and PreviewError says why, when it cannot be
// previewed.
func (s *System) Previewed(t testing.TB, id string) *gateway.RequestView {
	t.Helper()
	v, err := s.Gateway.Preview(context.Background(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// RefreshCatalog makes the Pilot read the target's catalog again (after a
// test created tables).
func (s *System) RefreshCatalog(t testing.TB) {
	t.Helper()
	if err := s.Pilot.RefreshCatalog(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// StopLogbook stops the logbook writer and waits for it: every later
// append fails with logbook.ErrClosed, as when its store is lost.
func (s *System) StopLogbook(t testing.TB) {
	t.Helper()
	s.stopOnce.Do(func() {
		s.Gateway.Drain()
		s.stopLB()
		if err := <-s.lbDone; err != nil {
			t.Errorf("gatewaytest: logbook run: %v", err)
		}
	})
}

// Close stops everything; it is idempotent. The store and the target stay
// on disk for a restart.
func (s *System) Close() {
	s.closeOnce.Do(func() {
		if s.stopBackground != nil {
			s.stopBackground()
			s.background.Wait()
		}
		if s.Remote != nil {
			s.Remote.Close()
		}
		if s.stopServer != nil {
			s.stopServer()
			<-s.serverDone
		}
		if s.Relay != nil {
			s.Relay.Close()
		}
		if s.Pilot != nil {
			s.Pilot.Close()
		}
		if s.stopLB != nil {
			s.stopOnce.Do(func() {
				s.stopLB()
				<-s.lbDone
			})
		}
		if s.Store != nil {
			_ = s.Store.Close()
		}
	})
}

// Verify checks the logbook (chain and checkpoints) after signing a
// checkpoint of the head if the writer still runs, and fails t unless it
// is intact and signed as the writer leaves it (logbook.Report.TailTooLong).
func (s *System) Verify(t testing.TB) logbook.Report {
	t.Helper()
	ctx := context.Background()
	_, _ = s.Logbook.Checkpoint(ctx) // best effort: the writer may be stopped
	rep, err := s.Logbook.Verify(ctx, s.CheckpointVerifier)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.TailTooLong {
		t.Fatalf("logbook does not verify: %s", rep)
	}
	return rep
}

var expiresRE = regexp.MustCompile(`(?m)^expires: .*$`)

// WithExpiry rewrites a delegation's expires line.
func WithExpiry(yaml []byte, exp time.Time) []byte {
	return expiresRE.ReplaceAll(yaml, []byte("expires: "+exp.UTC().Format(time.RFC3339)))
}

// Example returns an example delegation file, expiring a week from now (the
// files' own expiry is a fixed date).
func Example(t testing.TB, name string) []byte {
	t.Helper()
	b, err := examples.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return WithExpiry(b, time.Now().Add(7*24*time.Hour).Truncate(time.Hour))
}

// Canonical compiles a delegation against cat, ignoring the expiry (so an
// expired delegation can still be signed), and returns the bytes a grantor
// signs.
func Canonical(t testing.TB, yaml []byte, cat *sqlcheck.Catalog) []byte {
	t.Helper()
	d, err := bound.Parse(yaml, "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, rep := bound.Compile(d, cat, bound.Options{})
	if !rep.Signable {
		t.Fatalf("gatewaytest: delegation not signable: %v", rep.Problems)
	}
	c, err := b.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Sign signs a delegation's canonical bytes with key.
func Sign(t testing.TB, key *signing.PrivateKey, canonical []byte) []byte {
	t.Helper()
	sig, err := key.Sign(signing.NamespaceDelegation, canonical)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// SignedExample returns an example delegation (expiring in a week) and the
// grantor's signature over its canonical bytes.
func (s *System) SignedExample(t testing.TB, name string) (yaml, sig []byte) {
	t.Helper()
	yaml = Example(t, name)
	return yaml, Sign(t, s.Opts.Keys.Grantor, Canonical(t, yaml, s.Pilot.Catalog()))
}

// AddExamples adds both example delegations, signed by the grantor, and
// returns them by file name.
func (s *System) AddExamples(t testing.TB) map[string]*gateway.Delegation {
	t.Helper()
	out := map[string]*gateway.Delegation{}
	for _, name := range []string{Orders, Customers} {
		y, sig := s.SignedExample(t, name)
		d, _, err := s.Gateway.AddDelegation(context.Background(), y, sig, name)
		if err != nil {
			t.Fatalf("gatewaytest: add %s: %v", name, err)
		}
		out[name] = d
	}
	return out
}

// Snapshot renders a whole table of the target, ordered by id: equal
// snapshots mean nothing changed.
func Snapshot(t testing.TB, dsn, table string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s *string
	q := fmt.Sprintf("SELECT string_agg(t::text, E'\\n' ORDER BY id) FROM %s t", pgx.Identifier{table}.Sanitize())
	if err := conn.QueryRow(ctx, q).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if s == nil {
		return ""
	}
	return *s
}

// Receipts counts the target's receipts.
func Receipts(t testing.TB, dsn string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM harbormaster.receipts WHERE NOT void").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Ran counts the statements that ran against the target: its receipts
// (Receipts) and the reads run in the node's process, which write none
// and whose execution entries say so (ledger.DecideExecuted).
func Ran(t testing.TB, dsn string, lb *logbook.Logbook) int {
	t.Helper()
	return Receipts(t, dsn) + Receiptless(t, lb)
}

// Receiptless counts the executions lb records as reads with no receipt.
func Receiptless(t testing.TB, lb *logbook.Logbook) int {
	t.Helper()
	es, err := lb.Find(context.Background(), logbook.Query{Kind: logbook.KindExecution})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		var p struct {
			Outcome string `json:"outcome"`
			Receipt *bool  `json:"receipt"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Outcome == string(pilot.Executed) && p.Receipt != nil && !*p.Receipt {
			n++
		}
	}
	return n
}

// Act signs a canonical act (acts.Canonical) with key in namespace.
func Act(t testing.TB, key *signing.PrivateKey, namespace string, act any) (canonical, sig []byte) {
	t.Helper()
	c, err := acts.Canonical(act)
	if err != nil {
		t.Fatal(err)
	}
	sig, err = key.Sign(namespace, c)
	if err != nil {
		t.Fatal(err)
	}
	return c, sig
}

// EnableTierB does what the humans do to open the surveyed path for one
// residual rule: switch Tier B on for the deployment and the target, have
// the reviewer (bob) mark the rule auditable and the operator (alice)
// enable the Surveyor for it. The gateway must have a Surveyor.
func (s *System) EnableTierB(t testing.TB, d *gateway.Delegation, rule int, surveyorID, bundle string) {
	t.Helper()
	ctx := context.Background()
	for _, scope := range []string{switches.Deployment, switches.TargetScope(Target)} {
		if err := s.Gateway.SetSwitch(ctx, switches.Key{Name: switches.TierB, Scope: scope}, true, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	act, sig := Act(t, s.Opts.Keys.Approver, signing.NamespaceReview,
		acts.Auditable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindAuditable, DelegationID: d.ID, Rule: rule, Note: "auditable from the evidence"})
	if err := s.Gateway.MarkAuditable(ctx, act, sig); err != nil {
		t.Fatal(err)
	}
	act, sig = Act(t, s.Opts.Keys.Grantor, signing.NamespaceEnable,
		acts.Enable{Time: acts.Stamp(time.Now()), Version: 1, Kind: acts.KindEnable, DelegationID: d.ID, Rule: rule, Surveyor: surveyorID, Bundle: bundle, On: true})
	if err := s.Gateway.EnableSurveyor(ctx, act, sig); err != nil {
		t.Fatal(err)
	}
}

// OtherNode starts another gateway over the same store, logbook and Pilot,
// with the same config and fresh in-memory state (delegations, quotas,
// caches), as a second node sharing the store would have. Its background
// services run until t ends.
func (s *System) OtherNode(t testing.TB) *gateway.Gateway {
	t.Helper()
	ctx := context.Background()
	g, err := gateway.New(ctx, s.gatewayConfig, s.Store, s.Logbook, s.minter, s.Opts.Keys.Signers, []pilot.Executor{s.Executor})
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(bctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

// OtherAPI is the HTTP API of another node (OtherNode) on the same store.
func (s *System) OtherAPI(t testing.TB) *httpapi.Server {
	t.Helper()
	api, err := httpapi.New(s.OtherNode(t), s.apiConfig)
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// NodeWithTarget is another node of the deployment (as OtherNode) that
// also serves a second target, name, on dsn (initialized as a target
// here, with the same Pilot settings). Its humans are those of the
// signers file: alice and bob hold keys for the shop target only.
func (s *System) NodeWithTarget(t testing.TB, name, dsn string) *gateway.Gateway {
	t.Helper()
	ctx := context.Background()
	if err := pilot.InitTarget(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: s.Opts.Name, Key: s.Opts.Keys.ControlPlane.Public().(ed25519.PublicKey), Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	pc := s.Opts.Pilot
	pc.Target, pc.DSN = name, dsn
	p, err := pilot.New(ctx, pc, verifier, s.Opts.Keys.Signers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	g, err := gateway.New(ctx, s.gatewayConfig, s.Store, s.Logbook, s.minter, s.Opts.Keys.Signers, []pilot.Executor{s.Executor, p})
	if err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(bctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return g
}
