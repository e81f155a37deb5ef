package httpapi

import (
	"bytes"
	"context"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const lintDir = "testdata/openapi-lint"

// TestOpenAPILint lints openapi.json with Redocly's CLI (npm @redocly/cli,
// pinned in testdata/openapi-lint with its package-lock.json), under
// recommended-strict: every warning fails. Without node and npm it fails
// under CI=true and skips elsewhere.
func TestOpenAPILint(t *testing.T) {
	node := lookTool(t, "node")
	const pkg = "@redocly/cli"
	testtools.NPMCI(t, lintDir, pkg)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("node_modules", pkg, "bin", "cli.js"), "lint", "--config", "redocly.yaml", "../../openapi.json")
	cmd.Dir = lintDir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	// recommended-strict makes every warning an error, so the exit status says all.
	if err != nil || !bytes.Contains(out, []byte("API description is valid")) {
		t.Fatalf("redocly lint: %v\n%s", err, out)
	}
}

// TestOpenAPIServed: GET /v1/openapi.json answers the embedded description.
func TestOpenAPIServed(t *testing.T) {
	s, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, OpenAPI) || len(OpenAPI) < 1000 {
		t.Fatalf("%d %s: %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
}

// lookTool finds a command the test needs: missing, it fails the test
// under CI (CI=true) and skips it elsewhere.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI: %v", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}
