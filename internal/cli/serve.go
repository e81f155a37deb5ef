package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

func runServe(e *env, args []string) int {
	fs := e.flags("harbormaster serve --config FILE",
		"Runs the control plane: the HTTP API (/v1), the PostgreSQL wire front (listen_pg),\n"+
			"/metrics on a listener of its own (metrics_listen), the statement path, the logbook and an\n"+
			"in-process Pilot per target. Stops gracefully on SIGINT or SIGTERM.\n"+
			"The config file is documented in docs/operations.md.")
	path := fs.String("config", "", "the config `FILE` (YAML)")
	level := fs.String("log-level", "info", "log `LEVEL`: debug, info, warn or error")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *path == "" {
		return e.usageErr(fs, "--config is required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	log := newLogger(e.stderr, *level)
	log.Info("go collector", "gogc", node.TuneGC())
	sys, err := node.Start(e.ctx, cfg, log)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	defer sys.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	pgDone := make(chan error, 1)
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	// /metrics has a listener of its own (metrics_listen), never the
	// API's or the wire front's: nothing of the process reaches agents.
	metricsDone := make(chan error, 1)
	if addr := cfg.MetricsAddr(); addr != "" {
		mln, err := net.Listen("tcp", addr)
		if err != nil {
			e.errorf("metrics_listen: %v", err)
			e.hintf("give metrics_listen a free address of its own, or off")
			return exitFail
		}
		if host, _, _ := net.SplitHostPort(addr); !config.LoopbackHost(host) {
			log.Warn("serving /metrics on an address other than loopback (metrics_listen): no agent must reach it", "addr", addr)
		}
		log.Info("serving /metrics", "addr", mln.Addr().String())
		go func() { metricsDone <- sys.ServeMetrics(ctx, mln) }()
	} else {
		log.Info("not serving /metrics (metrics_listen: off)")
		metricsDone <- nil
	}
	if cfg.ListenPG != "" {
		pln, err := net.Listen("tcp", cfg.ListenPG)
		if err != nil {
			e.errorf("listen_pg: %v", err)
			return exitFail
		}
		log.Info("serving the PostgreSQL wire front", "addr", pln.Addr().String())
		go func() { pgDone <- sys.ServePG(ctx, pln) }()
	} else {
		pgDone <- nil
	}
	// "serving" comes last, once every listener is bound: tests and the
	// demo wait for it.
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	if host, _, _ := net.SplitHostPort(cfg.Listen); cfg.TLS == nil && !config.LoopbackHost(host) {
		log.Warn("serving plain HTTP on an address other than loopback (allow_insecure_listen): only a TLS proxy must reach it", "addr", cfg.Listen)
	}
	log.Info("serving", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String(), "targets", sys.Gateway().Targets())
	err = sys.Serve(ctx, ln)
	stop()
	if perr := <-pgDone; err == nil {
		err = perr
	}
	if merr := <-metricsDone; err == nil {
		err = merr
	}
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	log.Info("stopped")
	return exitOK
}

func runConfig(e *env, args []string) int {
	return e.dispatch("harbormaster config", []command{
		{"validate", "check a serve config file and the files it names", func(e *env, args []string) int {
			fs := e.flags("harbormaster config validate FILE", "Checks a serve config: every field, the control-plane key, the signers file.\nExit 0 when valid; 2 with every problem otherwise.")
			if code, ok := e.parse(fs, args); !ok {
				return code
			}
			file, code, ok := e.oneFile(fs)
			if !ok {
				return code
			}
			cfg, err := config.Load(file)
			if err != nil {
				e.errorf("%v", err)
				return exitUsage
			}
			how := "plain HTTP"
			switch host, _, _ := net.SplitHostPort(cfg.Listen); {
			case cfg.TLS != nil:
				how = "HTTPS"
			case !config.LoopbackHost(host):
				how = "plain HTTP behind a TLS proxy (allow_insecure_listen)"
			}
			metrics := "/metrics on " + cfg.MetricsAddr()
			if cfg.MetricsAddr() == "" {
				metrics = "no /metrics"
			}
			fmt.Fprintf(e.stdout, "%s is valid: %d target(s), %d agent(s), listening on %s (%s), %s\n", file, len(cfg.Targets), len(cfg.Agents), cfg.Listen, how, metrics)
			return exitOK
		}},
	}, args)
}

func runTarget(e *env, args []string) int {
	return e.dispatch("harbormaster target", []command{
		{"init", "create the harbormaster schema (receipts, guard function) in a target", func(e *env, args []string) int {
			fs := e.flags("harbormaster target init --target DSN", "Creates the harbormaster schema in a target database: the receipts table that\nmakes every marque single-use, and the guard function. Idempotent.")
			dsn := fs.String("target", "", "the target's `DSN`")
			arm := fs.Bool("catalog-generation", false, "also create the event trigger that moves harbormaster.catalog_generation at every DDL command\n(needs a superuser), so governed writes leave out their foreign key question while the catalog\nstands still; see docs/operations.md for what it costs DDL")
			if code, ok := e.parse(fs, args); !ok {
				return code
			}
			if *dsn == "" {
				return e.usageErr(fs, "--target is required")
			}
			armed, err := pilot.InitTargetArmed(e.ctx, *dsn, *arm)
			if err != nil {
				e.errorf("%v", err)
				return exitFail
			}
			fmt.Fprintln(e.stdout, "target initialized: schema harbormaster, table harbormaster.receipts, functions harbormaster.fence_violation, harbormaster.row_cap and harbormaster.max_rows")
			if armed {
				fmt.Fprintln(e.stdout, "catalog generation: armed (event trigger harbormaster_catalog_generation): a governed UPDATE or DELETE asks for foreign key actions only after DDL")
			} else {
				fmt.Fprintln(e.stdout, "catalog generation: not armed (--catalog-generation, as a superuser; see docs/operations.md): every governed UPDATE and DELETE asks for foreign key actions")
			}
			return exitOK
		}},
	}, args)
}

// openLogbook opens a store's logbook read-only (for verify, tail, export).
// name is the control plane's name, whose logbook origin is NAME/logbook;
// every is the config's logbook.checkpoint_every (0: the default), which
// verify holds the unsigned tail to.
func openLogbook(ctx context.Context, path, name string, every int64) (*store.Store, *logbook.Logbook, error) {
	st, err := store.Open(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	lb, err := logbook.New(st, nil, nil, nil, logbook.Config{Origin: name + "/logbook", CheckpointEvery: every})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, lb, nil
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
