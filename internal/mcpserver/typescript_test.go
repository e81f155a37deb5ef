package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
)

const tsClientDir = "testdata/ts-client"

// needTool finds a command the test needs: missing, it fails the test
// under CI (CI=true) and skips it elsewhere.
func needTool(t *testing.T, name string) string {
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

// installTSClient runs npm ci in testdata/ts-client unless node_modules
// already holds the SDK version package.json pins.
func installTSClient(t *testing.T, npm string) {
	t.Helper()
	testtools.NPMCI(t, tsClientDir, "@modelcontextprotocol/sdk")
}

// TestTypeScriptClient connects as an agent developer would: the official
// TypeScript SDK from npm, over streamable HTTP, with the bearer token.
func TestTypeScriptClient(t *testing.T) {
	node, npm := needTool(t, "node"), needTool(t, "npm")
	installTSClient(t, npm)
	f := newFixture(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", f.srv.URL+mcpserver.Path, f.token)
	cmd.Dir = tsClientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\nstderr: %s\nstdout: %s", err, stderr.String(), stdout.String())
	}
	type toolResult struct {
		IsError    bool            `json:"isError"`
		Text       string          `json:"text"`
		Structured json.RawMessage `json:"structured"`
	}
	var out struct {
		Server struct{ Name, Version string }
		Tools  []struct {
			Name            string
			Description     string
			HasOutputSchema bool
		}
		Executed, Referred, Status toolResult
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
	}
	t.Logf("%s", stdout.String())

	if out.Server.Name != "harbormaster" || out.Server.Version != mcpserver.Version {
		t.Errorf("server %+v", out.Server)
	}
	var names []string
	for _, tool := range out.Tools {
		names = append(names, tool.Name)
		if !tool.HasOutputSchema || !strings.Contains(tool.Description, "referred") {
			t.Errorf("tool %+v", tool)
		}
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "describe_tables,my_delegations,request_status,run_sql" {
		t.Errorf("tools %s", got)
	}

	var executed, referred gateway.Response
	if err := json.Unmarshal(out.Executed.Structured, &executed); err != nil || out.Executed.IsError {
		t.Fatalf("executed: %v %+v", err, out.Executed)
	}
	if executed.Outcome != gateway.OutcomeExecuted || len(executed.Rows) != 1 || executed.Rows[0][slices.Index(executed.Keys(), "status")] != "pending" {
		t.Errorf("executed: %+v", executed)
	}
	wantContains(t, "executed text", out.Executed.Text, "Executed", `"status": "pending"`)

	if err := json.Unmarshal(out.Referred.Structured, &referred); err != nil || out.Referred.IsError {
		t.Fatalf("referred: %v %+v", err, out.Referred)
	}
	if referred.Outcome != gateway.OutcomeReferred || referred.RequestID == "" {
		t.Errorf("referred: %+v", referred)
	}
	wantContains(t, "referred text", out.Referred.Text, "Referred to a human", referred.RequestID, "total_cents")

	var status gateway.RequestView
	if err := json.Unmarshal(out.Status.Structured, &status); err != nil || out.Status.IsError {
		t.Fatalf("status: %v %+v", err, out.Status)
	}
	if status.ID != referred.RequestID || status.Status != gateway.StatusWaiting {
		t.Errorf("status: %+v", status)
	}
}
