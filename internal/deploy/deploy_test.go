package deploy_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
)

const root = "../.."

// need reports a missing tool: a failure under CI (scripts/ensure-tools.sh
// installs it), a skip elsewhere.
func need(t *testing.T, what, install string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI (%s): %v", what, install, err)
	}
	t.Skipf("%s is not installed (%s): %v", what, install, err)
}

// compose returns the command that runs docker compose: the plugin when
// docker has it, else the standalone docker-compose.
func compose(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("docker", "compose", "version").CombinedOutput(); err == nil && bytes.Contains(out, []byte("version")) {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	need(t, "docker compose or docker-compose", "Debian: apt-get install docker-compose", exec.ErrNotFound)
	return nil
}

// TestComposeFile validates compose.yaml with docker compose config: the
// schema (an unknown or misspelt key is an error) and the interpolation,
// which must insist on SHOP_DB_PASSWORD.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	dc := compose(t)
	run := func(env ...string) (string, error) {
		cmd := exec.Command(dc[0], append(dc[1:], "-f", "compose.yaml", "config")...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("SHOP_DB_PASSWORD=s3cret")
	if err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
	for _, want := range []string{"shop-db:", "target-init:", "harbormaster:", "127.0.0.1", "service_completed_successfully", "/etc/harbormaster"} {
		if !strings.Contains(out, want) {
			t.Errorf("the resolved compose config lacks %q:\n%s", want, out)
		}
	}
	if out, err := run("SHOP_DB_PASSWORD="); err == nil || !strings.Contains(out, "SHOP_DB_PASSWORD") {
		t.Errorf("compose config without SHOP_DB_PASSWORD: %v, want an error naming it\n%s", err, out)
	}
}

// TestSystemdUnit verifies the unit with systemd-analyze verify, which
// exits 0 even on unknown keys and bad values, so any output fails too.
// The ExecStart binary is this test binary (verify checks only that it is
// executable), the rest of the unit as shipped.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		need(t, "systemd-analyze", "Debian: apt-get install systemd", err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "deploy/systemd/harbormaster.service"))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStart=/usr/local/bin/harbormaster serve --config /etc/harbormaster/harbormaster.yaml")) {
		t.Fatal("the unit does not start harbormaster serve from /usr/local/bin")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "harbormaster.service")
	if err := os.WriteFile(p, bytes.ReplaceAll(unit, []byte("/usr/local/bin/harbormaster"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(path string) (string, error) {
		out, err := exec.Command(sa, "verify", path).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := check(p); err != nil || out != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check can fail: a misspelt key is reported.
	bad := filepath.Join(t.TempDir(), "harbormaster.service")
	if err := os.WriteFile(bad, bytes.Replace(bytes.ReplaceAll(unit, []byte("/usr/local/bin/harbormaster"), []byte(self)),
		[]byte("RestartSec="), []byte("RestartSecs="), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := check(bad); !strings.Contains(out, "RestartSecs") {
		t.Errorf("systemd-analyze verify did not report a misspelt key: %q", out)
	}
}

// TestExampleConfigs loads the example production config and the compose
// service's config with the loader serve uses, with the files they name
// made in a copy of their directory; the example must name every field
// the config has.
func TestExampleConfigs(t *testing.T) {
	t.Setenv("SHOP_DSN", "postgres://pilot@db.internal/shop")
	for _, c := range []struct{ file, listen, metrics string }{
		{"deploy/harbormaster.example.yaml", "0.0.0.0:8443", "127.0.0.1:9464"},
		{"deploy/compose/harbormaster.yaml", "0.0.0.0:8080", config.DefaultMetricsListen},
	} {
		src, err := os.ReadFile(filepath.Join(root, c.file))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeReferencedFiles(t, dir)
		p := filepath.Join(dir, "harbormaster.yaml")
		if err := os.WriteFile(p, src, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(p)
		if err != nil {
			t.Fatalf("%s does not load: %v", c.file, err)
		}
		if cfg.Listen != c.listen {
			t.Errorf("%s: listen %s, want %s", c.file, cfg.Listen, c.listen)
		}
		if cfg.MetricsAddr() != c.metrics {
			t.Errorf("%s: /metrics on %q, want %s, on loopback apart from where agents connect", c.file, cfg.MetricsAddr(), c.metrics)
		}
	}
	example, err := os.ReadFile(filepath.Join(root, "deploy/harbormaster.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range yamlFields(reflect.TypeOf(config.Config{}), "") {
		last := f[strings.LastIndex(f, ".")+1:]
		if !bytes.Contains(example, []byte(last+":")) {
			t.Errorf("deploy/harbormaster.example.yaml does not show the config field %s", f)
		}
	}
}

// yamlFields lists every YAML field of a config type, dotted.
func yamlFields(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() || f.Tag.Get("gone") != "" {
			continue
		}
		out = append(out, prefix+name)
		if ft := f.Type; ft.Name() != "Duration" {
			out = append(out, yamlFields(ft, prefix+name+".")...)
		}
	}
	return out
}

// writeReferencedFiles makes what the example configs name: the
// control-plane key, the signers file, the delegations directory, a TLS
// certificate and the remote Pilot's certificate files.
func writeReferencedFiles(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{"keys", "certs", "delegations"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cp, _, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "harbormaster.internal"},
		DNSNames: []string{"harbormaster.internal"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kpem := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	for name, b := range map[string][]byte{
		"keys/control-plane.pem": cp, "allowed_signers": []byte("# none yet\n"),
		"certs/harbormaster.crt": crt, "certs/harbormaster.key": kpem,
		"certs/ca.crt": crt, "certs/control-plane.crt": crt, "certs/control-plane.key": kpem,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMakeDemo reads make demo's recipe with make -n: it says the first
// build takes minutes before it starts, builds once, to bin/, and runs
// that binary (no go run, which would build again).
func TestMakeDemo(t *testing.T) {
	t.Parallel()
	mk, err := exec.LookPath("make")
	if err != nil {
		need(t, "make", "Debian: apt-get install make", err)
	}
	cmd := exec.Command(mk, "-n", "demo", "DEMO_FLAGS=--once")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	say, build, run := -1, -1, -1
	builds := 0
	for i, l := range lines {
		switch {
		case strings.Contains(l, "echo") && strings.Contains(l, "6 minutes") && say < 0:
			say = i
		case strings.Contains(l, " build ") && strings.Contains(l, "-o bin/harbormaster ./cmd/harbormaster"):
			build = i
			builds++
		case strings.HasPrefix(l, "./bin/harbormaster demo --once"):
			run = i
		}
		if strings.Contains(l, " run ") {
			t.Errorf("make demo builds again with go run: %s", l)
		}
	}
	if say < 0 || build < 0 || run < 0 || !(say < build && build < run) || builds != 1 {
		t.Errorf("make demo should say the first build is slow, build bin/harbormaster once, then run it; make -n:\n%s", out)
	}
}

const lintDir = "testdata/dockerfile-lint"

// TestDockerfile lints the Dockerfile with dockerfile-utils (the parser
// and linter of the VS Code Docker extension's language server, from npm)
// with every rule an error, and checks its shape: a cgo build stage, a
// runtime stage that copies only the binary, a non-root user. (It is not
// built here: the test machines have no Docker daemon.)
func TestDockerfile(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node", "Debian: apt-get install nodejs", err)
	}
	testtools.NPMCI(t, lintDir, "dockerfile-utils")
	df := filepath.Join(root, "Dockerfile")
	lint := func(path string) (string, error) {
		abs, _ := filepath.Abs(path)
		cmd := exec.Command(node, "lint.mjs", abs)
		cmd.Dir = lintDir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := lint(df); err != nil {
		t.Fatalf("dockerfile-utils on the Dockerfile: %v\n%s", err, out)
	}
	// The lint can fail.
	bad := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(bad, []byte("FROM debian:bookworm-slim\nworkdir relative\nCMD [\"a\"]\nCMD [\"b\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := lint(bad); err == nil || !strings.Contains(out, "CMD") {
		t.Errorf("dockerfile-utils passed a Dockerfile with two CMDs and a lower-case instruction: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(df)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, want := range []string{
		"\nFROM golang:1.26", " AS build\n", "CGO_ENABLED=1 go build", "./cmd/harbormaster",
		"\nFROM debian:bookworm-slim\n", "COPY --from=build /out/harbormaster /usr/local/bin/harbormaster",
		"\nUSER harbormaster\n", `ENTRYPOINT ["/usr/local/bin/harbormaster"]`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	if n := strings.Count(text, "\nFROM "); n != 2 {
		t.Errorf("the Dockerfile has %d stages, want 2 (build, runtime)", n)
	}
	// The Go version of the build stage is go.mod's.
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod); m == nil || !strings.Contains(text, "FROM golang:"+string(m[1])+"-") {
		t.Errorf("the build stage's Go is not go.mod's (%s)", m)
	}
}
