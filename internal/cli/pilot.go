package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/pilot/remote"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// runPilot runs Pilots in a process of their own, or (pilot certs) writes
// the certificates for their channel.
func runPilot(e *env, args []string) int {
	if len(args) > 0 && args[0] == "certs" {
		return runPilotCerts(e, args[1:])
	}
	fs := e.flags("harbormaster pilot --config FILE",
		"Runs a Pilot for each target of the config in this process, serving the control\n"+
			"plane over mutual TLS (TLS 1.3; only client certificates from the configured\n"+
			"client CA are accepted). The Pilot verifies every marque with the control\n"+
			"plane's public key and every signature with its own signers file.\n"+
			"Stops gracefully on SIGINT or SIGTERM. See docs/operations.md,\n"+
			"\"A Pilot in its own process\". Subcommand: harbormaster pilot certs.")
	path := fs.String("config", "", "the pilot config `FILE` (YAML)")
	level := fs.String("log-level", "info", "log `LEVEL`: debug, info, warn or error")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *path == "" {
		return e.usageErr(fs, "--config is required")
	}
	cfg, err := config.LoadPilot(*path)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	log := newLogger(e.stderr, *level)
	pub, err := config.LoadControlPlanePublicKey(cfg.Path(cfg.ControlPlane.PublicKey))
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: cfg.ControlPlane.Name, Key: pub, Clock: time.Now})
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	signers, err := signing.LoadAllowedSigners(cfg.Path(cfg.Signers))
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	tlsCfg, err := remote.ServerTLS(cfg.Path(cfg.TLS.Cert), cfg.Path(cfg.TLS.Key), cfg.Path(cfg.TLS.ClientCA))
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	var pilots []pilot.Executor
	defer func() {
		for _, p := range pilots {
			p.Close()
		}
	}()
	var names []string
	for _, t := range cfg.Targets {
		p, err := pilot.New(e.ctx, pilot.Config{Target: t.Name, DSN: t.ResolveDSN(os.Getenv), Role: t.Role,
			SearchPath: t.SearchPath, StatementTimeout: t.StatementTimeout.D(), LockTimeout: t.LockTimeout.D(),
			Logger: log.With("target", t.Name)}, verifier, signers)
		if err != nil {
			e.errorf("%v", err)
			return exitFail
		}
		pilots = append(pilots, p)
		names = append(names, t.Name)
	}
	srv, err := remote.NewServer(remote.ServerConfig{TLS: tlsCfg, CallTimeout: cfg.CallTimeout.D(), Logger: log}, pilots...)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	log.Info("serving", "addr", ln.Addr().String(), "targets", names, "issuer", cfg.ControlPlane.Name)
	if err := srv.Serve(e.ctx, ln); err != nil {
		e.errorf("%v", err)
		return exitFail
	}
	log.Info("stopped")
	return exitOK
}

func runPilotCerts(e *env, args []string) int {
	fs := e.flags("harbormaster pilot certs --dir DIR [--host NAME]... [--days N] [--control-plane-key FILE]",
		"Writes what the channel between the control plane and a Pilot in its own process\n"+
			"needs, to DIR: a fresh CA (ca.crt; its private key is not kept), the Pilot's\n"+
			"server certificate for every --host (pilot.crt, pilot.key) and the control\n"+
			"plane's client certificate (control-plane.crt, control-plane.key), ECDSA P-256;\n"+
			"private keys mode 0600. With --control-plane-key, also the control plane's\n"+
			"public key (control-plane.pub) for the Pilot's control_plane.public_key.\n"+
			"Never overwrites a file.")
	dir := fs.String("dir", "", "the `DIR` to write to (created if missing)")
	var hosts []string
	fs.Func("host", "a DNS `NAME` or IP address the Pilot is reached at (repeatable, or comma-separated; default localhost,127.0.0.1)", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
		return nil
	})
	days := fs.Int("days", 365, "how many `DAYS` the certificates are valid")
	cpKey := fs.String("control-plane-key", "", "the control plane's private key `FILE` (PEM), to write its public key")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if *dir == "" {
		return e.usageErr(fs, "--dir is required")
	}
	if *days < 1 {
		return e.usageErr(fs, "--days must be at least 1")
	}
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	var pubPEM []byte
	pubPath := filepath.Join(*dir, "control-plane.pub")
	if *cpKey != "" {
		key, err := config.LoadControlPlaneKey(*cpKey)
		if err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		if pubPEM, err = config.ControlPlanePublicKeyPEM(node.PublicKey(key)); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		if _, err := os.Stat(pubPath); err == nil {
			e.errorf("%s already exists; not overwriting", pubPath)
			return exitUsage
		}
	}
	f, err := remote.WriteCerts(*dir, hosts, time.Now(), time.Duration(*days)*24*time.Hour)
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "wrote %s (the CA: the Pilot's tls.client_ca and serve's targets[].pilot.ca)\n", f.CA)
	fmt.Fprintf(e.stdout, "wrote %s and %s (the Pilot's tls.cert and tls.key, for %s)\n", f.PilotCert, f.PilotKey, strings.Join(hosts, ", "))
	fmt.Fprintf(e.stdout, "wrote %s and %s (serve's targets[].pilot.cert and .key)\n", f.ClientCert, f.ClientKey)
	if pubPEM != nil {
		if err := writeNew(pubPath, pubPEM, 0o644); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		fmt.Fprintf(e.stdout, "wrote %s (the Pilot's control_plane.public_key)\n", pubPath)
	}
	return exitOK
}
