package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Deployments the single-process scenarios do not need: a target served by
// a Pilot in its own process, and a PostgreSQL control store. Both are
// made the way an operator makes them (docs/operations.md): the serve
// config servetest wrote is edited, not replaced, so everything else about
// the deployment stays servetest's.

// remotePilot is a "harbormaster pilot" process's deployment: its config,
// certificates from "harbormaster pilot certs", and a fixed address, so
// that a Pilot started again after a kill listens where serve expects it.
type remotePilot struct {
	d    *servetest.Deployment
	cfg  string // the Pilot's config file
	addr string // host:port, the same for every start
}

// withRemotePilot moves d's target to a Pilot process: it writes the
// certificates and the Pilot's config (holding the target's DSN) and
// points serve's target at the Pilot. Call before d.Start; start the
// Pilot first (serve connects at start).
func withRemotePilot(t *testing.T, d *servetest.Deployment) *remotePilot {
	t.Helper()
	cmd := exec.Command("harbormaster", "pilot", "certs", "--dir", "certs", "--host", "127.0.0.1", "--control-plane-key", "cp.pem")
	cmd.Dir = d.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pilot certs: %v\n%s", err, out)
	}
	// A port free now; the Pilot binds it at every start. Nothing else on
	// this machine is told of it, so a clash is unlikely and fails loudly.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &remotePilot{d: d, cfg: filepath.Join(d.Dir, "pilot.yaml"), addr: addr}
	pilotCfg := fmt.Sprintf(`listen: %s
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
`, addr, d.Opts.Name, gatewaytest.Target, d.Opts.TargetDSN)
	if err := os.WriteFile(p.cfg, []byte(pilotCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	editConfig(t, d, fmt.Sprintf("    dsn: %q\n", d.Opts.TargetDSN), fmt.Sprintf(`    pilot:
      url: https://%s
      ca: certs/ca.crt
      cert: certs/control-plane.crt
      key: certs/control-plane.key
`, addr))
	return p
}

// start starts the Pilot process and waits until it listens.
func (p *remotePilot) start(t *testing.T, log string) *servetest.Proc {
	t.Helper()
	proc := servetest.StartCommand(t, filepath.Join(p.d.Dir, log), "pilot", "--config", p.cfg)
	if proc.Addr != p.addr {
		t.Fatalf("the Pilot listens on %s, want %s", proc.Addr, p.addr)
	}
	return proc
}

// withPostgresStore moves d's control store to the PostgreSQL database at
// url (a server of its own, with fsync on: the store refuses one without).
// d.StorePath becomes the URL, so VerifyLogbook and openStore use it.
func withPostgresStore(t *testing.T, d *servetest.Deployment, url string) {
	t.Helper()
	editConfig(t, d, fmt.Sprintf("store: %q\n", d.StorePath), fmt.Sprintf("store: %q\n", url))
	d.StorePath = url
}

// editConfig replaces the one occurrence of old in d's serve config.
func editConfig(t *testing.T, d *servetest.Deployment, old, new string) {
	t.Helper()
	b, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("the serve config has %d occurrences of %q, want 1:\n%s", n, old, b)
	}
	if err := os.WriteFile(d.Config, []byte(strings.Replace(string(b), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// requestStatuses reads every request's status from the store.
func requestStatuses(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	rows, err := st.ReadDB().QueryContext(t.Context(), "SELECT id, status FROM requests")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, s string
		if err := rows.Scan(&id, &s); err != nil {
			t.Fatal(err)
		}
		out[id] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// settled is a request that reconciliation settled from the receipt: its
// execution entry says reconciled, and whether the receipt was found.
type settled struct {
	marque   string
	executed bool
	// rerun is the marque of a later execution of the same request, one a
	// human approved again after reconciliation found the first marque
	// never ran ("" when there is none).
	rerun string
}

// reconciledRequests reads the execution entries reconciliation wrote.
func reconciledRequests(t *testing.T, st *store.Store, origin string) map[string]settled {
	t.Helper()
	lb, err := logbook.New(st, nil, nil, nil, logbook.Config{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]settled{}
	err = lb.Iterate(t.Context(), logbook.Query{Kind: "execution"}, func(e logbook.Entry) error {
		// Entries come in order: an execution after a reconciled one is a
		// later approval of the request, under a marque of its own.
		var p struct {
			Request    string `json:"request_id"`
			Marque     string `json:"marque_id"`
			Reconciled bool   `json:"reconciled"`
			Outcome    string `json:"outcome"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			return fmt.Errorf("entry %d: %w", e.Seq, err)
		}
		if p.Reconciled {
			out[p.Request] = settled{marque: p.Marque, executed: p.Outcome == "executed"}
		} else if r, ok := out[p.Request]; ok && p.Outcome == "executed" && p.Marque != "" && p.Marque != r.marque {
			r.rerun = p.Marque
			out[p.Request] = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// receiptsByMarque reads the target's receipts: marque id -> void.
func receiptsByMarque(t *testing.T, dsn string) map[string]bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT marque_id, void FROM harbormaster.receipts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var m string
		var void bool
		if err := rows.Scan(&m, &void); err != nil {
			t.Fatal(err)
		}
		out[m] = void
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
