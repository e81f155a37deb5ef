package cli_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// checkMetricsApart: serve answers /metrics on its metrics listener, on
// loopback, and the API's listener, where agents connect, answers 404 for
// it and for the runtime's debug paths, while it answers the rest as ever.
func checkMetricsApart(t *testing.T, srv *servetest.Proc) {
	t.Helper()
	host, _, err := net.SplitHostPort(srv.MetricsAddr)
	if err != nil || !config.LoopbackHost(host) {
		t.Fatalf("serve logged /metrics on %q, want a loopback address\n%s", srv.MetricsAddr, srv.LogText())
	}
	if st, body := httpGet("http://" + srv.MetricsAddr + "/metrics"); st != http.StatusOK || !strings.Contains(body, "harbormaster_build_info") ||
		!strings.Contains(body, "go_memstats_alloc_bytes") {
		t.Errorf("the metrics listener's /metrics: HTTP %d\n%.500s", st, body)
	}
	for _, p := range []string{"/metrics", "/debug/pprof/", "/debug/vars"} {
		if st, body := httpGet("http://" + srv.Addr + p); st != http.StatusNotFound || strings.Contains(body, "go_") {
			t.Errorf("the API's listener answered %s with %d, want 404:\n%.300s", p, st, body)
		}
	}
	if st, _ := httpGet("http://" + srv.Addr + "/healthz"); st != http.StatusOK {
		t.Errorf("the API's /healthz: %d", st)
	}
}

// TestServeMetricsListen: with metrics_listen on a loopback address, serve
// answers /metrics there only, never on the API's listener, so an agent
// that reaches the API reads nothing of the process (other agents'
// activity, the Go runtime's allocation counters).
func TestServeMetricsListen(t *testing.T) {
	t.Parallel()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	d := servetest.NewDeployment(t, servetest.Options{Name: "serve-metrics", TargetDSN: dsn, MetricsListen: "127.0.0.1:0"})
	checkMetricsApart(t, d.Start(t, "serve.log"))
}

// TestServeMetricsDefault: a config without metrics_listen serves
// /metrics on config.DefaultMetricsListen, on loopback, and not on the
// API's listener; config validate says where. Not parallel: it needs the
// default port, and skips when something else holds it.
func TestServeMetricsDefault(t *testing.T) {
	ln, err := net.Listen("tcp", config.DefaultMetricsListen)
	if err != nil {
		t.Skipf("the default metrics address is taken: %v", err)
	}
	ln.Close()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	d := servetest.NewDeployment(t, servetest.Options{Name: "serve-metrics-default", TargetDSN: dsn})
	raw, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(string(raw), "metrics_listen: 127.0.0.1:0\n", "", 1)
	if without == string(raw) {
		t.Fatal("the deployment's config has no metrics_listen line to take out")
	}
	if err := os.WriteFile(d.Config, []byte(without), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, d.Dir, nil, "config", "validate", d.Config); code != 0 || !strings.Contains(out, "/metrics on "+config.DefaultMetricsListen) {
		t.Errorf("config validate: exit %d, want it to say /metrics on %s\n%s%s", code, config.DefaultMetricsListen, out, errOut)
	}
	srv := d.Start(t, "serve.log")
	if srv.MetricsAddr != config.DefaultMetricsListen {
		t.Fatalf("serve logged /metrics on %q, want the default %s\n%s", srv.MetricsAddr, config.DefaultMetricsListen, srv.LogText())
	}
	checkMetricsApart(t, srv)
}

// TestServeRefusesMetricsOnAgentListener: a config that puts /metrics
// where agents connect does not start, and config validate says why.
func TestServeRefusesMetricsOnAgentListener(t *testing.T) {
	t.Parallel()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	d := servetest.NewDeployment(t, servetest.Options{Name: "serve-metrics-same", TargetDSN: dsn, MetricsListen: "127.0.0.1:18080",
		Extra: "listen_pg: 127.0.0.1:18080\n"})
	for _, args := range [][]string{{"config", "validate", d.Config}, {"serve", "--config", d.Config}} {
		_, errOut, code := run(t, d.Dir, nil, args...)
		if code != 2 || !strings.Contains(errOut, "metrics_listen: 127.0.0.1:18080 is where agents connect (listen_pg: 127.0.0.1:18080)") {
			t.Errorf("%s: exit %d, want 2 with the metrics_listen refusal\n%s", args[0], code, errOut)
		}
	}
}
