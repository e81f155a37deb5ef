package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"harbormaster/internal/cli"
	"harbormaster/internal/pgtmp"
)

// needPostgres skips a test that starts its own PostgreSQL when the server
// binaries are missing, except under CI, where it fails.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := pgtmp.FindBinDir(); err != nil {
		if errors.Is(err, pgtmp.ErrNotInstalled) && os.Getenv("CI") != "true" {
			t.Skipf("demo: %v", err)
		}
		t.Fatal(err)
	}
}

// TestDemoOnce runs the whole demo in process, as a user would: a
// throwaway PostgreSQL, the control plane over HTTP and the scripted agent,
// whose every outcome must be as expected.
func TestDemoOnce(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	info := filepath.Join(t.TempDir(), "info.json")
	var out, errb bytes.Buffer
	code := cli.Do([]string{"demo", "--once", "--info", info, "--listen", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("demo --once: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "Every outcome was as expected") {
		t.Fatalf("demo --once did not report every outcome as expected:\n%s", out.String())
	}
	if errb.Len() != 0 {
		t.Errorf("demo --once wrote to stderr on success:\n%s", errb.String())
	}
	raw, err := os.ReadFile(info)
	if err != nil {
		t.Fatalf("--info file: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("--info file is not JSON: %v\n%s", err, raw)
	}
	for _, k := range []string{"api_url", "agent_token", "target_dsn", "store", "approver_key"} {
		if v, _ := m[k].(string); v == "" {
			t.Errorf("--info lacks %s: %s", k, raw)
		}
	}
	if u, _ := m["api_url"].(string); !strings.HasPrefix(u, "http://127.0.0.1:") || strings.HasSuffix(u, ":0") {
		t.Errorf("api_url %q is not the address actually served", u)
	}
	// The tour printed each step with its outcome.
	for _, want := range []string{"-> executed on the compiled path", "-> referred to a human"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tour output lacks %q", want)
		}
	}
}
