package config

import (
	"fmt"
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
