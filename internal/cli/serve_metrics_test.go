package cli_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/cli/servetest"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestServeMetricsListen: with metrics_listen, serve answers /metrics on
// that address only, so an agent that reaches the API does not read the
// metrics (other agents' activity), and the API answers the rest as ever.
func TestServeMetricsListen(t *testing.T) {
	t.Parallel()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	d := servetest.NewDeployment(t, servetest.Options{Name: "serve-metrics", TargetDSN: dsn, Extra: "metrics_listen: " + metricsAddr + "\n"})
	srv := d.Start(t, "serve.log")
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var st int
	var body string
	servetest.WaitUntil(t, "the metrics listener answers", func() bool {
		st, body = get("http://" + metricsAddr + "/metrics")
		return st == http.StatusOK
	})
	if !strings.Contains(body, "harbormaster_build_info") {
		t.Errorf("the metrics listener's /metrics lacks harbormaster_build_info:\n%.500s", body)
	}
	if st, _ := get("http://" + srv.Addr + "/metrics"); st != http.StatusNotFound {
		t.Errorf("the API's listener answered /metrics with %d, want 404 (metrics_listen is set)", st)
	}
	if st, _ := get("http://" + srv.Addr + "/healthz"); st != http.StatusOK {
		t.Errorf("the API's /healthz: %d", st)
	}
}
