package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// processPaths are where a Go server commonly serves something of its
// process: Prometheus, net/http/pprof, expvar, x/net/trace, and guesses
// an agent would try.
var processPaths = []string{
	"/metrics", "/metrics/", "/v1/metrics", "/mcp/metrics",
	"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1",
	"/debug/pprof/allocs", "/debug/pprof/trace", "/debug/vars", "/debug/requests", "/debug/events", "/debug/fgprof",
	"/vars", "/stats", "/status", "/-/metrics", "/v1/debug", "/v1/runtime",
}

// startNode starts a node with a plain-HTTP loopback API and serves it,
// and its /metrics, on listeners of their own; it returns the two bases.
func startNode(t *testing.T, name string) (sys *node.Node, api, metrics string) {
	t.Helper()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	dir := t.TempDir()
	keys := gatewaytest.NewKeys(t)
	cpPEM, _, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string][]byte{"cp.pem": cpPEM, "allowed_signers": keys.SignersFile,
		"harbormaster.yaml": fmt.Appendf(nil, `name: %s
listen: 127.0.0.1:0
store: store.db
control_plane_key: cp.pem
signers: allowed_signers
targets:
  - name: shop
    dsn: %q
agents:
  - principal: agent:demo
    token_sha256: %s
`, name, dsn, config.HashToken(gatewaytest.AgentToken))} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "harbormaster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err = node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	served, mserved := make(chan error, 1), make(chan error, 1)
	go func() { served <- sys.Serve(sctx, ln) }()
	go func() { mserved <- sys.ServeMetrics(sctx, mln) }()
	t.Cleanup(func() { stop(); <-served; <-mserved })
	return sys, "http://" + ln.Addr().String(), "http://" + mln.Addr().String()
}

type answer struct {
	status      int
	contentType string
	body        string
}

func get(t *testing.T, url, token string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// TestAgentListenerServesNothingOfTheProcess: on the listener agents use
// (the API and MCP), /metrics, pprof, expvar and the like answer exactly
// as a path that never existed does, with a token or without, and carry
// nothing of the process; the routes the API and MCP add are the
// statement path's, the humans', health and MCP's metadata, nothing else.
// /metrics, with the Go runtime's allocation counters, is served on the
// metrics listener alone, which serves nothing else (DESIGN.md invariant
// 10: nothing of the process is served where agents connect).
func TestAgentListenerServesNothingOfTheProcess(t *testing.T) {
	t.Parallel()
	sys, api, metrics := startNode(t, "surface-test")

	for _, r := range sys.API().Routes() {
		path := r[strings.LastIndex(r, " ")+1:]
		ok := false
		for _, allowed := range []string{"/v1/", "/mcp", "/.well-known/oauth-protected-resource/mcp", "/healthz", "/readyz"} {
			ok = ok || path == allowed || strings.HasPrefix(path, "/v1/") && allowed == "/v1/"
		}
		if !ok {
			t.Errorf("the agents' listener has the route %q, which is not the statement path's, the humans', health or MCP's", r)
		}
	}

	const unknown = "/no-such-path-at-all"
	for _, token := range []string{"", gatewaytest.AgentToken} {
		want := get(t, api+unknown, token)
		if want.status != http.StatusNotFound {
			t.Fatalf("an unknown path answered %d, want 404", want.status)
		}
		for _, p := range processPaths {
			got := get(t, api+p, token)
			path, _, _ := strings.Cut(p, "?")
			got.body = strings.ReplaceAll(got.body, path, unknown)
			if got != want {
				t.Errorf("token %v: GET %s on the agents' listener answered %+v; an unknown path answers %+v", token != "", p, got, want)
			}
			for _, leak := range []string{"go_memstats", "go_gc", "harbormaster_", "goroutine", "memstats", "cmdline"} {
				if strings.Contains(got.body, leak) {
					t.Errorf("GET %s on the agents' listener carries %q", p, leak)
				}
			}
		}
	}

	scrape := get(t, metrics+"/metrics", "")
	if scrape.status != http.StatusOK || !strings.Contains(scrape.body, "go_memstats_alloc_bytes_total") || !strings.Contains(scrape.body, "harbormaster_build_info") {
		t.Fatalf("the metrics listener's /metrics: HTTP %d\n%.500s", scrape.status, scrape.body)
	}
	for _, p := range append([]string{"/v1/statements", "/mcp", "/healthz", "/"}, processPaths[1:]...) {
		if a := get(t, metrics+p, gatewaytest.AgentToken); a.status != http.StatusNotFound {
			t.Errorf("the metrics listener answered GET %s with %d, want 404: it serves /metrics alone", p, a.status)
		}
	}
}
