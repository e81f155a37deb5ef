package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"harbormaster/internal/config"
	"harbormaster/internal/gateway"
	"harbormaster/internal/httpapi"
	"harbormaster/internal/logbook"
	"harbormaster/internal/marque"
	"harbormaster/internal/mcpserver"
	"harbormaster/internal/metrics"
	"harbormaster/internal/pilot"
	"harbormaster/internal/quota"
	"harbormaster/internal/signing"
	"harbormaster/internal/store"
	"harbormaster/internal/switches"
)

// system is every subsystem of a running control plane, wired in one place.
type system struct {
	cfg     *config.Config
	log     *slog.Logger
	store   *store.Store
	logbook *logbook.Logbook
	pilots  []pilot.Executor
	gateway *gateway.Gateway
	api     *httpapi.Server

	switches *switches.Poller
	metrics  *metrics.Metrics

	stopLogbook    context.CancelFunc
	lbDone         chan error
	stopBackground context.CancelFunc
	background     sync.WaitGroup
	closeOnce      sync.Once
}

// startSystem opens the store, starts the logbook writer, connects the
// Pilots, loads delegations and reconciles anything a crash left running.
func startSystem(ctx context.Context, cfg *config.Config, log *slog.Logger) (sys *system, err error) {
	s := &system{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			s.close()
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
	})
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stopLogbook, s.lbDone = cancel, make(chan error, 1)
	go func() { s.lbDone <- s.logbook.Run(lctx) }()

	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: cfg.Name, Key: publicKey(key), Clock: time.Now})
	if err != nil {
		return nil, err
	}
	minter, err := marque.NewMinter(marque.MinterConfig{Issuer: cfg.Name, Key: key, TTL: cfg.MarqueTTL.D(), Clock: time.Now})
	if err != nil {
		return nil, err
	}
	for _, t := range cfg.Targets {
		p, err := pilot.New(ctx, pilot.Config{Target: t.Name, DSN: t.ResolveDSN(os.Getenv), Role: t.Role,
			SearchPath: t.SearchPath, StatementTimeout: t.StatementTimeout.D(), LockTimeout: t.LockTimeout.D(),
			Logger: log.With("target", t.Name)}, verifier, signers)
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
	panel, err := newPanel(cfg.Surveyor, os.Getenv)
	if err != nil {
		return nil, err
	}
	auditor, err := newAuditor(cfg.Audit, key, s.store, s.logbook, log)
	if err != nil {
		return nil, err
	}
	s.metrics.RegisterAudit(auditor.Stats)
	if b := cfg.Surveyor.ShapeDissentBand; len(b) == 2 {
		s.metrics.RegisterShapeBand(b[0], b[1])
	}
	referrals, err := cfg.Queue.Referrals()
	if err != nil {
		return nil, err
	}
	s.gateway, err = gateway.New(ctx, gateway.Config{Name: cfg.Name, Logger: log, QueueTTL: cfg.Queue.TTL.D(), Metrics: s.metrics,
		ReferralRate: referrals, MaxWaiting: cfg.Queue.MaxWaiting,
		Surveyor: panel, Auditor: auditor,
		ApprovalTTL: cfg.Queue.ApprovalTTL.D(), ReconcileAfter: 2 * cfg.MarqueTTL.D(), Webhook: cfg.Queue.Webhook, PrincipalQuota: pq, Switches: s.switches},
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
	if cfg.Delegations != "" {
		if err := s.loadDelegationDir(ctx, cfg.Path(cfg.Delegations)); err != nil {
			return nil, err
		}
	}
	agents := make([]httpapi.Agent, len(cfg.Agents))
	for i, a := range cfg.Agents {
		agents[i] = httpapi.Agent{Principal: a.Principal, TokenSHA256: a.TokenSHA256}
	}
	if s.api, err = httpapi.New(s.gateway, httpapi.Config{Agents: agents, Logger: log, Signers: signers, Switches: s.switches, Metrics: s.metrics}); err != nil {
		return nil, err
	}
	httpapi.RegisterTables(s.api)
	mcpserver.Register(s.api.Mux(), s.gateway, s.api.Authenticate, log)
	return s, nil
}

// loadDelegationDir adds every NAME.yaml with a NAME.yaml.sig.
func (s *system) loadDelegationDir(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		y, err := readFileLimited(f, 1<<20)
		if err != nil {
			return err
		}
		sig, err := readFileLimited(f+".sig", 64<<10)
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

// serve runs the HTTP server on ln until ctx ends, then shuts down
// gracefully.
func (s *system) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.api.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

func (s *system) close() {
	s.closeOnce.Do(func() {
		if s.stopBackground != nil {
			s.stopBackground()
			s.background.Wait()
		}
		for _, p := range s.pilots {
			p.Close()
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

func newLogger(w io.Writer, level string) *slog.Logger {
	lv := slog.LevelInfo
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv}))
}

func publicKey(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
