package node_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// writeCert makes a self-signed certificate for 127.0.0.1 and localhost
// and returns its PEM (the client's trust root).
func writeCert(t *testing.T, certPath, keyPath string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "harbormaster test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// TestTLSAndMetrics starts a node with tls in its config and a generated
// certificate: the API answers over HTTPS to a client that trusts the
// certificate, not to plain HTTP, and has no /metrics over HTTPS either;
// the metrics listener's /metrics passes promtool check metrics, carries
// harbormaster_build_info, and has the Surveyor's per-framing series at
// zero before any judgment.
func TestTLSAndMetrics(t *testing.T) {
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
	certPEM := writeCert(t, filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	for name, b := range map[string][]byte{"cp.pem": cpPEM, "allowed_signers": keys.SignersFile,
		"harbormaster.yaml": fmt.Appendf(nil, `name: tls-test
listen: 0.0.0.0:0
tls:
  cert: cert.pem
  key: key.pem
store: store.db
control_plane_key: cp.pem
signers: allowed_signers
targets:
  - name: shop
    dsn: %q
agents:
  - principal: agent:demo
    token_sha256: %s
`, dsn, config.HashToken(gatewaytest.AgentToken))} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// listen 0.0.0.0 is accepted because tls is set.
	cfg, err := config.Load(filepath.Join(dir, "harbormaster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served, mserved := make(chan error, 1), make(chan error, 1)
	go func() { served <- sys.Serve(sctx, ln) }()
	go func() { mserved <- sys.ServeMetrics(sctx, mln) }()
	defer func() { stop(); <-served; <-mserved }()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	base := "https://" + ln.Addr().String()
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("GET /healthz: HTTP %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("HTTPS answered with %s, want HTTP/2 negotiated", resp.Proto)
	}
	if resp, err := client.Get(base + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics over HTTPS on the API: %v %v, want 404: metrics are on metrics_listen alone", resp, err)
	} else {
		resp.Body.Close()
	}
	// A client that does not trust the certificate is refused, and plain
	// HTTP to the port gets no API answer.
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get(base + "/healthz"); err == nil {
		t.Error("a client without the certificate's root was answered")
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(body), `"status"`) {
			t.Errorf("plain HTTP to the TLS port was answered: HTTP %d", resp.StatusCode)
		}
	}
	resp, err = http.Get("http://" + mln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics on the metrics listener: %v", err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics on the metrics listener: HTTP %d", resp.StatusCode)
	}
	text := string(scrape)
	for _, want := range []string{
		`harbormaster_build_info{checker="pg_query_go`,
		`harbormaster_surveyor_juror_answers_total{answer="refer",framing="certify"} 0`,
		`harbormaster_surveyor_dissent_total{framing="shape"} 0`,
		`harbormaster_surveyor_judgments_total{correlated="true",disagreement="true",outcome="conforms"} 0`,
		`harbormaster_switch_enabled{switch="tier_b",target="shop"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool is required under CI (Debian: apt-get install prometheus): %v", err)
		}
		t.Skipf("promtool is not installed: %v", err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics on the scrape: %v\n%s", err, out)
	}
}
