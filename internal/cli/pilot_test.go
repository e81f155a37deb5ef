package cli_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestServeThroughPilotProcess runs `harbormaster pilot --config` as a
// process of its own with certificates from `harbormaster pilot certs`,
// and a `serve` process whose target names it: statements sent to serve
// run in the Pilot's process, each with its receipt. It also checks the
// clear errors: serve stops at start when its Pilot cannot be reached,
// and both configs refuse what they must.
func TestServeThroughPilotProcess(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)

	dir := t.TempDir()
	keys := gatewaytest.NewKeys(t)
	cpPEM, _, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pilot.LoadCatalogDSN(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	y := gatewaytest.Example(t, gatewaytest.Orders)
	sig := gatewaytest.Sign(t, keys.Grantor, gatewaytest.Canonical(t, y, cat))
	if err := os.Mkdir(filepath.Join(dir, "delegations"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"cp.pem":                      cpPEM,
		"allowed_signers":             keys.SignersFile,
		"delegations/orders.yaml":     y,
		"delegations/orders.yaml.sig": sig,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The certificates, in one step.
	out, errOut, code := run(t, dir, nil, "pilot", "certs", "--dir", "certs", "--host", "127.0.0.1,localhost", "--control-plane-key", "cp.pem")
	if code != 0 {
		t.Fatalf("pilot certs: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range []struct {
		name string
		mode os.FileMode
	}{{"ca.crt", 0o644}, {"pilot.crt", 0o644}, {"pilot.key", 0o600}, {"control-plane.crt", 0o644}, {"control-plane.key", 0o600}, {"control-plane.pub", 0o644}} {
		st, err := os.Stat(filepath.Join(dir, "certs", f.name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.name, st.Mode().Perm(), f.mode)
		}
	}
	if _, errOut, code := run(t, dir, nil, "pilot", "certs", "--dir", "certs"); code != 2 || !strings.Contains(errOut, "already exists") {
		t.Errorf("pilot certs over existing files: exit %d %s", code, errOut)
	}

	const name = "remote-test"
	pilotCfg := fmt.Sprintf(`listen: 127.0.0.1:0
tls:
  cert: certs/pilot.crt
  key: certs/pilot.key
  client_ca: certs/ca.crt
control_plane:
  name: %s
  public_key: certs/control-plane.pub
signers: allowed_signers
targets:
  - name: shop
    dsn: %q
    statement_timeout: 5s
`, name, dsn)
	write(t, dir, "pilot.yaml", pilotCfg)
	serveCfg := func(url string) string {
		return fmt.Sprintf(`name: %s
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
store: store.db
control_plane_key: cp.pem
signers: allowed_signers
delegations: delegations
targets:
  - name: shop
    pilot:
      url: %s
      ca: certs/ca.crt
      cert: certs/control-plane.crt
      key: certs/control-plane.key
agents:
  - principal: agent:demo
    token_sha256: %s
`, name, url, config.HashToken(gatewaytest.AgentToken))
	}

	// Without its Pilot, serve stops at start and says why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	write(t, dir, "serve-dead.yaml", serveCfg("https://"+dead))
	if _, errOut, code := run(t, dir, nil, "serve", "--config", "serve-dead.yaml"); code != 1 || !strings.Contains(errOut, "could not be reached") || !strings.Contains(errOut, dead) {
		t.Errorf("serve without its Pilot: exit %d\n%s", code, errOut)
	}

	pilotProc := servetest.StartCommand(t, filepath.Join(dir, "pilot.log"), "pilot", "--config", filepath.Join(dir, "pilot.yaml"))
	write(t, dir, "serve.yaml", serveCfg("https://"+pilotProc.Addr))
	if out, errOut, code := run(t, dir, nil, "config", "validate", "serve.yaml"); code != 0 {
		t.Fatalf("config validate: exit %d\n%s%s", code, out, errOut)
	}
	srv := servetest.Start(t, filepath.Join(dir, "serve.yaml"), filepath.Join(dir, "serve.log"))

	client := &http.Client{Timeout: 30 * time.Second}
	for _, s := range []struct{ sql, want string }{
		{"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3", "executed"},
		{"SELECT id, status FROM orders WHERE id = 3", "executed"},
		{"UPDATE orders SET status = 'failed' WHERE id = 45", "referred"}, // the remote Pilot's fence
		{"SELECT id, total_cents FROM orders", "referred"},
	} {
		r, err := servetest.Post(ctx, client, srv.Addr, gatewaytest.AgentToken, gatewaytest.Target, s.sql)
		if err != nil || r.Outcome != s.want {
			t.Fatalf("%q: %+v %v; want %s\nserve:\n%s\npilot:\n%s", s.sql, r, err, s.want, srv.LogText(), pilotProc.LogText())
		}
	}
	if n := gatewaytest.Receipts(t, dsn); n != 2 {
		t.Errorf("%d receipts in the target, want 2 (the update and the read)", n)
	}
	if !strings.Contains(srv.LogText(), "remote pilot connected") {
		t.Errorf("serve did not log its remote Pilot:\n%s", srv.LogText())
	}
	for _, p := range []*servetest.Proc{srv, pilotProc} {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.Done:
			if err != nil {
				t.Errorf("did not stop cleanly on SIGTERM: %v\n%s", err, p.LogText())
			}
		case <-time.After(time.Minute):
			t.Fatal("did not stop on SIGTERM")
		}
	}

	// What the configs refuse.
	for _, c := range []struct {
		cmd  []string
		file string
		body string
		want string
	}{
		{[]string{"config", "validate"}, "both.yaml", strings.Replace(serveCfg("https://127.0.0.1:1"), "  - name: shop\n", "  - name: shop\n    dsn: postgres://x\n", 1),
			"give exactly one of dsn, dsn_env and pilot"},
		{[]string{"config", "validate"}, "settings.yaml", strings.Replace(serveCfg("https://127.0.0.1:1"), "  - name: shop\n", "  - name: shop\n    search_path: [app]\n", 1),
			"set in that Pilot's own config"},
		{[]string{"config", "validate"}, "http.yaml", serveCfg("http://127.0.0.1:1"), "targets[0].pilot.url: must look like https://HOST:PORT"},
		{[]string{"config", "validate"}, "nocert.yaml", strings.Replace(serveCfg("https://127.0.0.1:1"), "certs/control-plane.crt", "certs/missing.crt", 1),
			"targets[0].pilot.cert"},
		{[]string{"pilot", "--config"}, "private.yaml", strings.Replace(pilotCfg, "certs/control-plane.pub", "cp.pem", 1), "is a private key"},
		{[]string{"pilot", "--config"}, "remote.yaml", strings.Replace(pilotCfg, fmt.Sprintf("    dsn: %q\n", dsn), "    pilot:\n      url: https://127.0.0.1:1\n", 1),
			"a Pilot's own config connects to its target"},
		{[]string{"pilot", "--config"}, "noca.yaml", strings.Replace(pilotCfg, "  client_ca: certs/ca.crt\n", "", 1), "tls.client_ca: required"},
	} {
		write(t, dir, c.file, c.body)
		_, errOut, code := run(t, dir, nil, append(c.cmd, c.file)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s %s: exit %d\n%s\nwant exit 2 and %q", strings.Join(c.cmd, " "), c.file, code, errOut, c.want)
		}
	}
}

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
