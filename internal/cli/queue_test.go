package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// demoInfoOf reads the --info file of a demo startDemo started.
func demoInfoOf(t *testing.T, path string) (info struct {
	APIURL      string `json:"api_url"`
	GrantorKey  string `json:"grantor_key"`
	ApproverKey string `json:"approver_key"`
	AgentToken  string `json:"agent_token"`
	Dir         string `json:"dir"`
}) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(raw, &info) != nil || info.APIURL == "" {
		t.Fatalf("the demo's --info %s: %v\n%s", path, err, raw)
	}
	return info
}

// TestQueueApproveConfirms drives queue approve, deny and switch against a
// running demo as an approver and an operator would: approve shows what it
// signs and asks (on a terminal, through script(1)); without a terminal it
// refuses unless --yes; --json answers are JSON a script can read.
func TestQueueApproveConfirms(t *testing.T) {
	t.Parallel()
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("script (util-linux, Debian: bsdutils) is required under CI: %v", err)
		}
		t.Skipf("script is not installed: %v", err)
	}
	needPostgres(t)
	inf := demoInfoOf(t, startDemo(t))
	dir := t.TempDir()
	bob := []string{"--server", inf.APIURL, "--key", inf.ApproverKey}
	var list struct {
		Requests []struct {
			ID, SQL, Status string
		} `json:"requests"`
	}
	stdout, stderr, code := run(t, dir, nil, append([]string{"queue", "list", "--json"}, bob...)...)
	if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil {
		t.Fatalf("queue list --json: exit %d\n%s%s", code, stdout, stderr)
	}
	ids := map[string]string{}
	for _, r := range list.Requests {
		ids[r.SQL] = r.ID
	}
	fence := ids["UPDATE orders SET status = 'failed' WHERE id = 45"]
	column := ids["SELECT id, total_cents FROM orders WHERE id = 3"]
	check := ids["UPDATE orders SET status = 'shipped' WHERE id = 4"]
	if fence == "" || column == "" || check == "" {
		t.Fatalf("the demo's referred requests are not all waiting: %+v", list.Requests)
	}
	status := func(id string) string {
		t.Helper()
		// A signed request is single-use within its second: the same show
		// twice in one second is refused as a replay.
		time.Sleep(1100 * time.Millisecond)
		stdout, stderr, code := run(t, dir, nil, append([]string{"queue", "show", id, "--json"}, bob...)...)
		var v struct{ Status string }
		if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil {
			t.Fatalf("queue show %s: exit %d\n%s%s", id, code, stdout, stderr)
		}
		return v.Status
	}

	// No terminal and no --yes: refused, nothing signed.
	stdout, stderr, code = run(t, dir, []byte("y\n"), append([]string{"queue", "approve", fence}, bob...)...)
	if code != 2 || !strings.Contains(stderr, "stdin is not a terminal") || !strings.Contains(stderr, "--yes") || stdout != "" {
		t.Errorf("approve without a terminal or --yes: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if s := status(fence); s != "waiting" {
		t.Fatalf("after the refused approve the request is %s, want waiting", s)
	}

	// On a terminal: it shows the approval and asks; "n" declines.
	onTTY := func(answer string, args ...string) (string, int) {
		t.Helper()
		line := "harbormaster"
		for _, a := range args {
			line += " '" + a + "'"
		}
		cmd := exec.Command(scriptBin, "-qec", line, "/dev/null")
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(answer)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := onTTY("n\n", append([]string{"queue", "approve", fence}, bob...)...)
	for _, want := range []string{"you sign (namespace harbormaster-approval", `"request_id":"` + fence + `"`, "reaching at most 1 row(s)",
		"Sign and send this approval? [y/N]", "not approved: nothing was signed"} {
		if !strings.Contains(out, want) {
			t.Errorf("approve on a terminal, answered n: the output lacks %q:\n%s", want, out)
		}
	}
	if st := status(fence); code != 1 || st != "waiting" {
		t.Errorf("declined approve: exit %d, request %s; want 1 and waiting\n%s", code, st, out)
	}
	out, code = onTTY("y\n", append([]string{"queue", "approve", fence}, bob...)...)
	if code != 0 || !strings.Contains(out, "is executed, 1 row(s) affected") {
		t.Errorf("approve on a terminal, answered y: exit %d\n%s", code, out)
	}

	// --yes --json: no question, the request after the approval as JSON on
	// stdout; what was shown goes to stderr.
	stdout, stderr, code = run(t, dir, nil, append([]string{"queue", "approve", column, "--yes", "--json"}, bob...)...)
	var v struct{ ID, Status string }
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || v.ID != column || v.Status != "executed" {
		t.Errorf("approve --yes --json: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "you sign (namespace harbormaster-approval") {
		t.Errorf("approve --json: what it signs is not shown on stderr:\n%s", stderr)
	}

	// deny --json, switch --json.
	stdout, stderr, code = run(t, dir, nil, append([]string{"queue", "deny", check, "--reason", "one statement at a time", "--json"}, bob...)...)
	if code != 0 || json.Unmarshal([]byte(stdout), &v) != nil || v.ID != check || v.Status != "denied" {
		t.Errorf("deny --json: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	stdout, stderr, code = run(t, dir, nil, "switch", "tier-b", "off", "--target", "shop", "--json", "--server", inf.APIURL, "--key", inf.GrantorKey)
	var sw map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &sw) != nil || sw["scope"] == nil {
		t.Errorf("switch --json: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// The node's log has the approvals, the denial and a wrong token (never
	// the token itself), one level key a line.
	wrong := "hm_" + strings.Repeat("0", 48)
	for _, path := range []string{"/v1/statements", "/mcp"} {
		req, _ := http.NewRequest(http.MethodPost, inf.APIURL+path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+wrong)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST %s with a wrong token: %v %v, want 401", path, err, resp)
		} else {
			resp.Body.Close()
		}
	}
	raw, err := os.ReadFile(filepath.Join(inf.Dir, "harbormaster.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(raw)
	for _, want := range []string{
		`"msg":"approval","request":"` + fence + `","principal":"agent:demo","target":"shop","signer":"bob","status":"executed","rows":1`,
		`"msg":"approval","request":"` + column + `"`,
		`"msg":"denial","request":"` + check + `","principal":"agent:demo","target":"shop","signer":"bob"`,
		`"msg":"unauthorized","front":"http","method":"POST","path":"/v1/statements"`,
		`"msg":"unauthorized","component":"mcp","front":"mcp"`,
		// The tour's stacked statement is refused at once, and the log says why.
		`"code":"multiple_statements","why":"the statement is stacked (several statements sent as one): refused, not queued"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	if strings.Contains(log, wrong) || strings.Contains(log, inf.AgentToken) {
		t.Error("a token is in the log")
	}
	if strings.Contains(log, "one statement at a time") {
		t.Error("the denial's reason is in the log (it belongs in the logbook)")
	}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.Count(line, `"level":`) != 1 {
			t.Errorf("a log line without exactly one level key: %s", line)
		}
		if strings.Contains(line, `"level":"INFO"`) && strings.Contains(line, "session") {
			t.Errorf("an MCP SDK session line at INFO: %s", line)
		}
	}
}

// TestQueueShowPrintsTheDetail: what the reasons' class does not say (the
// target's own error text, the jurors' answers, why a juror failed) is for
// humans, and queue show printed it only with --json. It is printed under
// "detail", and the agent's answer does not hold it.
func TestQueueShowPrintsTheDetail(t *testing.T) {
	t.Parallel()
	sys, queue := queueNode(t, true)
	// Inside the read rule; the target refuses it when it runs.
	resp, err := sys.Gateway.Submit(context.Background(), gatewaytest.Agent, gatewaytest.Target, "SELECT id FROM orders WHERE id = 1 / (id - id)")
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v", resp, err)
	}
	if strings.Contains(strings.Join(resp.Reasons, " "), "division") {
		t.Fatalf("the agent was told the target's error: %v", resp.Reasons)
	}
	out, errOut, code := queue("show", resp.RequestID)
	if code != 0 {
		t.Fatalf("queue show: exit %d\n%s\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^detail    .*division by zero`).MatchString(out) {
		t.Errorf("queue show does not print the detail:\n%s", out)
	}
}
