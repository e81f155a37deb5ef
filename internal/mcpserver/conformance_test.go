package mcpserver_test

import (
	"context"
	"encoding/json"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
)

const conformanceDir = "testdata/conformance"

// conformanceScenarios are the server scenarios of the MCP conformance
// suite that apply to Harbormaster. The others test features it does not
// offer (resources, prompts, completion, logging, sampling, elicitation,
// server-sent notifications on a session) or call tools by names only the
// suite's reference server has (tools-call-*, json-schema-2020-12).
var conformanceScenarios = []string{"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}

// installConformance runs npm ci in testdata/conformance unless
// node_modules already holds the version package.json pins. The suite's
// newest releases need Node.js 22 (fs.globSync); 0.1.12 is the newest that
// runs on Debian's Node.js 20.
func installConformance(t *testing.T, npm string) string {
	t.Helper()
	const pkg = "@modelcontextprotocol/conformance"
	testtools.NPMCI(t, conformanceDir, pkg)
	return filepath.Join("node_modules", pkg, "dist", "index.js") // relative to conformanceDir
}

// TestConformance runs the applicable server scenarios of the official MCP
// conformance suite (npm @modelcontextprotocol/conformance) against /mcp.
// The suite's client sends no token; a proxy in front adds the agent's,
// as an agent's MCP client is configured to, and leaves Host and Origin
// as the suite sends them.
func TestConformance(t *testing.T) {
	node, npm := needTool(t, "node"), needTool(t, "npm")
	suite := installConformance(t, npm)
	f := newFixture(t)
	api := f.srv.Config.Handler
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+f.token)
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	for _, sc := range conformanceScenarios {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		out := t.TempDir()
		cmd := exec.CommandContext(ctx, node, suite, "server", "--url", proxy.URL+mcpserver.Path, "--scenario", sc, "-o", out)
		cmd.Dir = conformanceDir
		stdout, err := cmd.CombinedOutput()
		cancel()
		text := string(stdout)
		if err != nil || strings.Contains(text, "FAILURE") || !strings.Contains(text, "Passed:") {
			t.Errorf("scenario %s: %v\n%s", sc, err, text)
			continue
		}
		// The suite's results, check by check: every one a success.
		checks := readChecks(t, out)
		if len(checks) == 0 {
			t.Errorf("scenario %s: no checks recorded\n%s", sc, text)
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				t.Errorf("scenario %s: check %s is %s: %s", sc, c.ID, c.Status, c.ErrorMessage)
			}
		}
		t.Logf("scenario %s: %d checks\n%s", sc, len(checks), text)
	}
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// readChecks reads every checks.json the suite wrote under dir.
func readChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	var all []conformanceCheck
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			return err
		}
		all = append(all, cs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}
