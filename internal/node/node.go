// Package node starts one control-plane node: the store, the logbook
// writer, the Pilots (in this process or remote), the switches, the
// Surveyor and the audit, the gateway with its background services, and
// the HTTP API with MCP. serve, the demo and the system tests all start a
// node through Start.
package node

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/buildinfo"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Node is every subsystem of a running control-plane node, wired in one
// place.
type Node struct {
	cfg     *config.Config
	log     *slog.Logger
	store   *store.Store
	logbook *logbook.Logbook
	pilots  []pilot.Executor
	gateway *gateway.Gateway
	api     *httpapi.Server
	pg      *pgwire.Server  // nil unless listen_pg is set
	shadow  *shadow.Manager // the wire front's catalogs; nil when off

	switches *switches.Poller
	metrics  *metrics.Metrics
	leadsman *leadsman.Leadsman // nil when off
	notes    *leadsman.Reader

	stopLogbook    context.CancelFunc
	lbDone         chan error
	stopBackground context.CancelFunc
	background     sync.WaitGroup
	closeOnce      sync.Once
}

// Start opens the store, starts the logbook writer, connects the Pilots,
// loads delegations, reconciles anything a crash left running and starts
// the background services. Close stops it all.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (n *Node, err error) {
	s := &Node{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	key, err := config.LoadControlPlaneKey(cfg.Path(cfg.ControlPlaneKey))
	if err != nil {
		return nil, err
	}
	signers, err := signing.LoadAllowedSigners(cfg.Path(cfg.Signers))
	if err != nil {
		return nil, err
	}
	if s.store, err = store.Open(ctx, cfg.StoreLocation()); err != nil {
		return nil, err
	}
	cpSigner, err := logbook.NewCheckpointSigner(cfg.Name, key)
	if err != nil {
		return nil, err
	}
	s.logbook, err = logbook.New(s.store, cpSigner, time.Now, log, logbook.Config{
		Origin:             cfg.Name + "/logbook",
		CheckpointEvery:    int64(cfg.Logbook.CheckpointEvery),
		CheckpointInterval: cfg.Logbook.CheckpointInterval.D(),
		Journal:            s.store.LogbookJournal(),
	})
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopLogbook, s.lbDone = cancel, make(chan error, 1)
	go func() { s.lbDone <- s.logbook.Run(lctx) }()

	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: cfg.Name, Key: PublicKey(key), Clock: time.Now})
	if err != nil {
		return nil, err
	}
	minter, err := marque.NewMinter(marque.MinterConfig{Issuer: cfg.Name, Key: key, TTL: cfg.MarqueTTL.D(), Clock: time.Now})
	if err != nil {
		return nil, err
	}
	for _, t := range cfg.Targets {
		p, err := connectPilot(ctx, cfg, t, verifier, signers, log.With("target", t.Name))
		if err != nil {
			return nil, err
		}
		s.pilots = append(s.pilots, p)
	}
	s.switches = switches.New(s.store, switches.Config{Interval: cfg.SwitchPoll.D(), Logger: log})
	_ = s.switches.Poll(ctx)
	pq := map[string]quota.Rate{}
	for _, a := range cfg.Agents {
		if a.Quota != "" {
			r, err := quota.ParseRate(a.Quota)
			if err != nil {
				return nil, err
			}
			pq[a.Principal] = r
		}
	}
	targetNames := make([]string, len(cfg.Targets))
	for i, t := range cfg.Targets {
		targetNames[i] = t.Name
	}
	s.metrics = metrics.New(targetNames, func(ctx context.Context) (int, time.Duration, error) { return s.gateway.QueueStats(ctx) }, s.switches)
	panel, err := NewPanel(cfg.Surveyor, os.Getenv)
	if err != nil {
		return nil, err
	}
	auditor, err := newAuditor(cfg.Audit, key, s.store, s.logbook, log)
	if err != nil {
		return nil, err
	}
	s.metrics.RegisterAudit(auditor.Stats)
	s.metrics.InitFramings([]string{string(surveyor.Certify), string(surveyor.Refute), string(surveyor.Shape)})
	bi := buildinfo.Read()
	s.metrics.RegisterBuildInfo(metrics.BuildInfo{Version: bi.Version, Commit: bi.Commit, GoVersion: bi.GoVersion,
		Compiler: bi.Compiler, Checker: bi.Checker, Bundle: bi.Bundle})
	if b := cfg.Surveyor.ShapeDissentBand; len(b) == 2 {
		s.metrics.RegisterShapeBand(b[0], b[1])
	}
	referrals, err := cfg.Queue.Referrals()
	if err != nil {
		return nil, err
	}
	s.gateway, err = gateway.New(ctx, gateway.Config{Name: cfg.Name, Logger: log, QueueTTL: cfg.Queue.TTL.D(), Metrics: s.metrics,
		ReferralRate: referrals, MaxWaiting: cfg.Queue.MaxWaiting, MaxTransactions: cfg.PGTransactions.MaxOpen,
		Surveyor: panel, Auditor: auditor,
		ApprovalTTL: cfg.Queue.ApprovalTTL.D(), ReconcileAfter: 2 * cfg.MarqueTTL.D(), Webhook: cfg.Queue.Webhook, PrincipalQuota: pq, Switches: s.switches,
		Services: gateway.Services{QueueExpiry: cfg.Services.QueueExpiry.D(), DelegationExpiry: cfg.Services.DelegationExpiry.D(),
			Reconcile: cfg.Services.Reconcile.D(), Delegations: cfg.Services.Delegations.D(), DelegationsStale: cfg.Services.DelegationsStale.D(),
			Clock: cfg.Services.Clock.D(), Retention: retention(cfg), RetentionEvery: cfg.Logbook.PruneEvery.D()},
		ClockLeeway: cfg.Services.ClockLeeway.D(),
		StoreClock:  s.store.Clock(), SharedQuota: sharedQuota(s.store)},
		s.store, s.logbook, minter, signers, s.pilots)
	if err != nil {
		return nil, err
	}
	// What a previous stop left is reconciled before anything else runs.
	if n, err := s.gateway.Reconcile(ctx, 2*cfg.MarqueTTL.D()); err != nil {
		return nil, err
	} else if n > 0 {
		log.Warn("reconciled requests left running by a previous stop", "count", n)
	}
	bctx, bcancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopBackground = bcancel
	s.background.Add(2)
	go func() { defer s.background.Done(); _ = s.switches.Run(bctx) }()
	go func() { defer s.background.Done(); _ = s.gateway.Run(bctx) }()
	// The Leadsman, when configured, runs beside the statement path and
	// never on it: it reads the queue from the store.
	if s.leadsman, err = newLeadsman(ctx, cfg, s.store, s.logbook, s.metrics, log); err != nil {
		return nil, err
	}
	if s.leadsman != nil {
		s.background.Add(1)
		go func() { defer s.background.Done(); _ = s.leadsman.Run(bctx) }()
		log.Info("leadsman on", "principal", s.leadsman.Identity(), "provider", cfg.Leadsman.Provider.Name)
	}
	s.notes = leadsman.NewReader(s.store)
	if cfg.Delegations != "" {
		if err := s.loadDelegationDir(ctx, cfg.Path(cfg.Delegations)); err != nil {
			return nil, err
		}
	}
	agents := make([]httpapi.Agent, len(cfg.Agents))
	for i, a := range cfg.Agents {
		agents[i] = httpapi.Agent{Principal: a.Principal, TokenSHA256: a.TokenSHA256}
	}
	if s.api, err = httpapi.New(s.gateway, httpapi.Config{Agents: agents, Logger: log, Signers: signers, Switches: s.switches,
		ClaimRequest: ClaimRequest(s.store), Idempotency: s.store}); err != nil {
		return nil, err
	}
	httpapi.RegisterTables(s.api)
	httpapi.RegisterNotes(s.api, s.notes)
	mcpserver.RegisterWith(s.api, s.gateway, s.api.Authenticate, mcpserver.Config{Logger: log,
		AllowedHosts: cfg.MCP.AllowedHosts, AllowedOrigins: cfg.MCP.AllowedOrigins})
	if cfg.ListenPG != "" {
		if s.shadow, err = newShadow(cfg, log); err != nil {
			return nil, err
		}
		if s.pg, err = newPGFront(cfg, s.gateway, s.shadow, log); err != nil {
			return nil, err
		}
	}
	cpVerifier, err := logbook.NewCheckpointVerifier(cfg.Name, PublicKey(key))
	if err != nil {
		return nil, err
	}
	con, err := console.New(console.Config{Gateway: s.gateway, Signers: signers, Logbook: s.logbook, Key: console.SessionKey(key),
		CheckpointVerifier: cpVerifier, Switches: s.switches, Auditor: auditor, Surveyor: panel, Claim: ClaimRequest(s.store), Claimed: Claimed(s.store), Logger: log,
		Secure: cfg.Console.SecureCookies, SessionTTL: cfg.Console.SessionTTL.D(), AuditAlert: cfg.Console.AuditAlert.D(),
		Notes: console.LeadsmanNotes(s.notes)})
	if err != nil {
		return nil, err
	}
	con.Register(s.api.Mux())
	return s, nil
}

// retention is what the node's retention service removes: nothing with
// logbook.keep_all.
func retention(cfg *config.Config) ledger.Retention {
	if cfg.Logbook.KeepAll {
		return ledger.Retention{}
	}
	r := ledger.Retention{Retain: cfg.Logbook.Retain.D()}
	if cfg.Logbook.Archive != "" {
		r.ArchiveDir = cfg.Path(cfg.Logbook.Archive)
	}
	return r
}

// newPGFront builds the wire front (listen_pg) with the agents' tokens and
// verifiers and the configured certificate.
func newPGFront(cfg *config.Config, gw *gateway.Gateway, catalogs *shadow.Manager, log *slog.Logger) (*pgwire.Server, error) {
	pc := pgwire.Config{Logger: log.With("front", "pgwire"), Timeouts: map[string]pgwire.Timeouts{},
		TransactionIdle: cfg.PGTransactions.IdleTimeout.D(), TransactionMax: cfg.PGTransactions.MaxDuration.D()}
	if catalogs != nil {
		pc.Catalog = catalogs
	}
	idle := pc.TransactionIdle
	if idle == 0 {
		idle = pgwire.DefaultTransactionIdle
	}
	for _, t := range cfg.Targets {
		if !t.Remote() {
			// A remote Pilot's limits are in its own config.
			pc.Timeouts[t.Name] = pgwire.Timeouts{Statement: t.StatementTimeout.D(), Lock: t.LockTimeout.D(), IdleInTransaction: idle}
		}
	}
	for _, a := range cfg.Agents {
		pc.Agents = append(pc.Agents, pgwire.Agent{Principal: a.Principal, TokenSHA256: a.TokenSHA256, SCRAM: a.PGSCRAM})
	}
	if cfg.PGTLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.Path(cfg.PGTLS.Cert), cfg.Path(cfg.PGTLS.Key))
		if err != nil {
			return nil, fmt.Errorf("pg_tls: %w", err)
		}
		pc.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return pgwire.New(gw, pc)
}

// newShadow is the wire front's shadow catalogs (pg_catalog), or nil when
// they are off: "auto" without server binaries is off, said in the log.
func newShadow(cfg *config.Config, log *slog.Logger) (*shadow.Manager, error) {
	c := cfg.PGCatalog
	if c.Shadow == "off" {
		return nil, nil
	}
	binDir := c.BinDir
	if binDir != "" {
		binDir = cfg.Path(binDir)
	}
	m, err := shadow.New(shadow.Config{BinDir: binDir, MaxServers: c.MaxServers, IdleStop: c.IdleStop.D(),
		StatementTimeout: c.StatementTimeout.D(), Logger: log.With("front", "pgwire", "part", "shadow")})
	switch {
	case err == nil:
		return m, nil
	case c.Shadow == "on":
		return nil, fmt.Errorf("pg_catalog: %w", err)
	}
	log.Warn("pg_catalog: no PostgreSQL server binaries, so catalog queries on the wire front are refused", "err", err)
	return nil, nil
}

// PG is the node's wire front, or nil when listen_pg is not set.
func (s *Node) PG() *pgwire.Server { return s.pg }

// ServeMetrics serves /metrics alone on ln until ctx ends: ln is the
// metrics_listen address, never one agents connect to (the API's
// listener has no /metrics at all).
func (s *Node) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// ServePG runs the wire front on ln until ctx ends.
func (s *Node) ServePG(ctx context.Context, ln net.Listener) error {
	if s.pg == nil {
		return errors.New("the wire front is not configured (listen_pg)")
	}
	return s.pg.Serve(ctx, ln)
}

// connectPilot starts the target's Pilot in this process, or connects to
// the Pilot in its own process that the target names.
func connectPilot(ctx context.Context, cfg *config.Config, t config.Target, verifier *marque.Verifier,
	signers *signing.AllowedSigners, log *slog.Logger) (pilot.Executor, error) {
	if !t.Remote() {
		return pilot.New(ctx, pilot.Config{Target: t.Name, DSN: t.ResolveDSN(os.Getenv), Role: t.Role,
			SearchPath: t.SearchPath, StatementTimeout: t.StatementTimeout.D(), LockTimeout: t.LockTimeout.D(),
			Logger: log}, verifier, signers)
	}
	r := t.Pilot
	tlsCfg, err := remote.ClientTLS(cfg.Path(r.CA), cfg.Path(r.Cert), cfg.Path(r.Key), r.ServerName)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	c, err := remote.Connect(ctx, remote.ClientConfig{Target: t.Name, URL: r.URL, TLS: tlsCfg, Timeout: r.Timeout.D(), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("target %s: the Pilot at %s could not be reached: %w", t.Name, r.URL, err)
	}
	log.Info("remote pilot connected", "url", r.URL)
	return c, nil
}

// loadDelegationDir adds every NAME.yaml with a NAME.yaml.sig.
func (s *Node) loadDelegationDir(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		y, err := config.ReadFileLimited(f, 1<<20)
		if err != nil {
			return err
		}
		sig, err := config.ReadFileLimited(f+".sig", 64<<10)
		if err != nil {
			return fmt.Errorf("delegation %s has no signature %s.sig: %w", f, f, err)
		}
		d, _, err := s.gateway.AddDelegation(ctx, y, sig, f)
		if errors.Is(err, gateway.ErrDelegationRevoked) {
			// Revoked since it was loaded: it stays revoked, and the file
			// left in the directory must not stop the server starting.
			s.log.Warn("delegation file not loaded: the delegation was revoked", "file", f, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("delegation %s: %w", f, err)
		}
		s.log.Info("delegation loaded", "id", d.ID, "grantee", d.Grantee, "target", d.Target, "tier", d.Bound.Tier(), "file", f)
	}
	return nil
}

// Serve runs the HTTP server on ln until ctx ends, then shuts down
// gracefully. With tls in the config it serves HTTPS.
func (s *Node) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.api.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	tlsCfg, err := serverTLS(s.cfg)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	if tlsCfg != nil {
		// ServeTLS (not a TLS listener) so HTTP/2 is set up too; the
		// certificate comes from GetCertificate.
		srv.TLSConfig = tlsCfg
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Close stops the background services, the Pilots and the logbook
// writer, and closes the store.
func (s *Node) Close() {
	s.closeOnce.Do(func() {
		if s.stopBackground != nil {
			s.stopBackground()
			s.background.Wait()
		}
		if s.leadsman != nil {
			_ = s.leadsman.Close()
		}
		for _, p := range s.pilots {
			p.Close()
		}
		if s.shadow != nil {
			_ = s.shadow.Close()
		}
		if s.stopLogbook != nil {
			s.stopLogbook()
			<-s.lbDone
		}
		if s.store != nil {
			_ = s.store.Close()
		}
	})
}

// PublicKey is the public half of a control-plane key.
func PublicKey(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// Gateway is the node's statement path.
func (s *Node) Gateway() *gateway.Gateway { return s.gateway }

// API is the node's HTTP API.
func (s *Node) API() *httpapi.Server { return s.api }

// Store is the node's control store.
func (s *Node) Store() *store.Store { return s.store }

// Notes reads the Leadsman's advisory notes (for the fronts that show
// them to humans; none when the Leadsman is off).
func (s *Node) Notes() *leadsman.Reader { return s.notes }

// newLeadsman builds the Leadsman from the config, or nil when no
// provider is configured.
func newLeadsman(ctx context.Context, cfg *config.Config, st *store.Store, lb *logbook.Logbook, m *metrics.Metrics, log *slog.Logger) (*leadsman.Leadsman, error) {
	lc := cfg.Leadsman
	if !lc.On() {
		return nil, nil
	}
	p := lc.Provider
	w, err := llm.NewWriter(llm.ProviderConfig{Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, Model: p.Model, APIKeyEnv: p.APIKeyEnv,
		Timeout: p.Timeout.D(), Proxy: p.Proxy}, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("leadsman provider %s: %w", p.Name, err)
	}
	return leadsman.New(ctx, leadsman.Config{Identity: lc.Identity, Poll: lc.Poll.D(),
		Logger: log.With("principal", lc.Identity), Metrics: m}, w, st, lb)
}

// Logbook is the node's logbook.
func (s *Node) Logbook() *logbook.Logbook { return s.logbook }

// sharedQuota is the store's quota buckets on a PostgreSQL store, which
// every node on it shares; nil (each node its own, exact for one node) for
// SQLite.
func sharedQuota(st *store.Store) func(ctx context.Context, now time.Time, wants []quota.Want) (string, error) {
	if st.Driver() != store.Postgres {
		return nil
	}
	return gateway.StoreQuota(st)
}

// ClaimRequest claims signed requests in the store, once for every node on
// it (httpapi.Config.ClaimRequest).
func ClaimRequest(st *store.Store) func(ctx context.Context, digest string, until time.Time) (bool, error) {
	return func(ctx context.Context, digest string, until time.Time) (bool, error) {
		return st.ClaimRequest(ctx, digest, time.Now().UnixNano(), until.UnixNano())
	}
}

// Claimed is store.Claimed at the time of the call, for the console.
func Claimed(st *store.Store) func(ctx context.Context, digest string) (bool, error) {
	return func(ctx context.Context, digest string) (bool, error) {
		return st.Claimed(ctx, digest, time.Now().UnixNano())
	}
}
