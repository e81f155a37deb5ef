package config

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestListenNeedsTLS: a listen address other than loopback is refused
// without tls unless allow_insecure_listen is set; loopback needs
// neither; tls needs a certificate and key that load.
func TestListenNeedsTLS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		listen   string
		tls      *TLS
		insecure bool
		wantErr  string // "" for no listen or tls error
	}{
		{"127.0.0.1:8080", nil, false, ""},
		{"localhost:8080", nil, false, ""},
		{"[::1]:8080", nil, false, ""},
		{"0.0.0.0:8080", nil, false, "clear text"},
		{":8080", nil, false, "clear text"},
		{"10.0.0.5:8080", nil, false, "clear text"},
		{"[::]:8080", nil, false, "clear text"},
		{"0.0.0.0:8080", nil, true, ""},
		{"0.0.0.0:8080", &TLS{Cert: "missing.pem", Key: "missing.key"}, false, "do not load"},
		{"0.0.0.0:8080", &TLS{Cert: "cert.pem"}, false, "give both cert and key"},
		{"8080", nil, false, "must be HOST:PORT"},
	} {
		cfg := Config{Listen: c.listen, TLS: c.tls, AllowInsecureListen: c.insecure, dir: t.TempDir()}
		var errs []string
		cfg.validateListen(func(field, format string, args ...any) { errs = append(errs, field+": "+fmt.Sprintf(format, args...)) })
		got := strings.Join(errs, "; ")
		if c.wantErr == "" && got != "" || c.wantErr != "" && !strings.Contains(got, c.wantErr) {
			t.Errorf("listen %s tls %+v insecure %v: %q, want %q", c.listen, c.tls, c.insecure, got, c.wantErr)
		}
	}
}

// TestLoadRefusesInsecureListen: the whole config load names the field.
func TestLoadRefusesInsecureListen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "hm.yaml")
	if err := os.WriteFile(p, []byte("listen: 0.0.0.0:8080\nstore: s.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "listen: 0.0.0.0:8080 is reachable from other machines and tls is not set") {
		t.Fatalf("Load: %v, want the listen refusal", err)
	}
}

// TestMetricsListen: /metrics has a listener of its own, on loopback by
// default; metrics_listen may not be, or overlap, an address agents
// connect to (listen, listen_pg), whatever spelling it takes; off is off.
func TestMetricsListen(t *testing.T) {
	t.Parallel()
	def := Config{}.WithDefaults()
	if host, port, err := net.SplitHostPort(def.MetricsAddr()); err != nil || !LoopbackHost(host) || port == "0" || sameListener(def.MetricsAddr(), def.Listen) {
		t.Errorf("the default metrics_listen is %q (listen %q), want a loopback address of its own", def.MetricsAddr(), def.Listen)
	}
	for _, c := range []struct {
		metrics, listen, pg string
		wantErr             string // "" for no metrics_listen error
	}{
		{"127.0.0.1:9464", "127.0.0.1:8080", "127.0.0.1:6432", ""},
		{"off", "127.0.0.1:8080", "", ""},
		{"OFF", "127.0.0.1:8080", "", ""},
		{"127.0.0.1:0", "127.0.0.1:0", "", ""}, // two free ports
		{"127.0.0.2:8080", "127.0.0.1:8080", "", ""},
		{"10.0.0.5:9464", "0.0.0.0:8443", "", ""},
		{"127.0.0.1:8080", "127.0.0.1:8080", "", "where agents connect (listen: 127.0.0.1:8080)"},
		{"localhost:8080", "127.0.0.1:8080", "", "where agents connect (listen"},
		{"[::1]:8080", "localhost:8080", "", "where agents connect (listen"},
		{"127.0.0.1:8080", "0.0.0.0:8080", "", "where agents connect (listen"},
		{"0.0.0.0:8443", "10.0.0.5:8443", "", "where agents connect (listen"},
		{":8080", "127.0.0.1:8080", "", "where agents connect (listen"},
		{"[::]:8080", "127.0.0.1:8080", "", "where agents connect (listen"},
		{"127.0.0.1:http", "127.0.0.1:80", "", "where agents connect (listen"},
		{"127.0.0.1:6432", "127.0.0.1:8080", "127.0.0.1:6432", "where agents connect (listen_pg: 127.0.0.1:6432)"},
		{"9464", "127.0.0.1:8080", "", "must be HOST:PORT"},
		{"127.0.0.1:", "127.0.0.1:8080", "", "must be HOST:PORT"},
	} {
		cfg := Config{MetricsListen: c.metrics, Listen: c.listen, ListenPG: c.pg}
		var errs []string
		cfg.validateMetricsListen(func(field, format string, args ...any) { errs = append(errs, field+": "+fmt.Sprintf(format, args...)) })
		got := strings.Join(errs, "; ")
		if c.wantErr == "" && got != "" || c.wantErr != "" && (!strings.Contains(got, c.wantErr) || !strings.HasPrefix(got, "metrics_listen: ")) {
			t.Errorf("metrics_listen %s listen %s listen_pg %q: %q, want %q", c.metrics, c.listen, c.pg, got, c.wantErr)
		}
	}
	if got := (&Config{MetricsListen: "off"}).MetricsAddr(); got != "" {
		t.Errorf("metrics_listen off: MetricsAddr %q, want none", got)
	}
}

// TestLoadRefusesMetricsOnAgentListener: the whole config load refuses
// /metrics on the API's address and says why.
func TestLoadRefusesMetricsOnAgentListener(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "hm.yaml")
	if err := os.WriteFile(p, []byte("listen: 127.0.0.1:8080\nmetrics_listen: localhost:8080\nstore: s.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "metrics_listen: localhost:8080 is where agents connect (listen: 127.0.0.1:8080): /metrics is never served there") {
		t.Fatalf("Load: %v, want the metrics_listen refusal", err)
	}
}
