package pgwire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

const nodeClientDir = "testdata/node-client"

// nodeInstall keeps the tests that share testdata/node-client from
// running npm ci in it at once.
var nodeInstall sync.Mutex

// installNodeClient runs npm ci in testdata/node-client unless
// node_modules already holds the versions of pg and postgres that
// package.json pins.
func installNodeClient(t *testing.T, npm string) {
	t.Helper()
	nodeInstall.Lock()
	defer nodeInstall.Unlock()
	testtools.NPMCI(t, nodeClientDir, "pg")
	testtools.NPMCI(t, nodeClientDir, "postgres")
}

// TestNodePostgres connects as a Node.js agent would, with node-postgres
// (npm pg): parameters sent untyped as text, reads, writes, a referral
// approved while the client waits, a bad token, TLS.
func TestNodePostgres(t *testing.T) {
	t.Parallel()
	node, npm := needTool(t, "node"), needTool(t, "npm")
	installNodeClient(t, npm)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable"),
		f.url(gatewaytest.Agent, "wrong-token", "disable"), f.url(gatewaytest.Other, gatewaytest.OtherToken, "disable"), f.caFile)
	cmd.Dir = nodeClientDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		t.Logf("%s", sc.Text())
		step, _ := m["step"].(string)
		steps[step] = m
		if step == "referred" {
			e, _ := m["error"].(map[string]any)
			id, _ := e["where"].(string)
			if e["code"] != "HM001" || !strings.HasPrefix(id, "req_") || !strings.Contains(e["detail"].(string), id) {
				t.Errorf("referral %v: want HM001 with the request id in where and detail", e)
				continue
			}
			f.approve(t, id)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node client.mjs: %v\nstderr: %s", err, stderr.String())
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	want := map[string]string{
		"read":     `{"command":"SELECT","rowCount":1,"rows":[{"id":"5","status":"pending"}],"step":"read","types":[20,25]}`,
		"types":    `{"at":"2024-02-29T12:34:56.789Z","doc":{"a":[1,2],"b":"x"},"flag":true,"i8":"7000000000","ints":[1,2,3],"num":"12.345","raw":"deadbeef","step":"types","tags":["a b","c"],"types":[20,1700,1184,1007,1009,3802,17,16]}`,
		"write":    `{"command":"UPDATE","rowCount":1,"step":"write"}`,
		"insert":   `{"command":"INSERT","rowCount":1,"step":"insert"}`,
		"inserted": `{"row":{"at":"2025-01-02T03:04:05.678Z","doc":{"a":1},"ints":[1,2],"txt":"from node"},"step":"inserted"}`,
		"tls":      `{"encrypted":true,"rows":[{"client_encoding":"UTF8"}],"step":"tls"}`,
	}
	for step, w := range want {
		if got := js(steps[step]); got != w {
			t.Errorf("%s:\n got %s\nwant %s", step, got, w)
		}
	}
	if a := steps["approved"]; a == nil || !reflect.DeepEqual(a["row"].([]any)[1:4], []any{"executed", "executed", "1"}) {
		t.Errorf("approved: %v", a)
	}
	if e, _ := steps["bad_token"]["error"].(map[string]any); e["code"] != "28P01" {
		t.Errorf("bad token: %v", steps["bad_token"])
	}
	if b := steps["begin"]; b == nil || b["error"] != nil || b["inside"] != "retrying" || b["after"] != "pending" {
		t.Errorf("BEGIN ... ROLLBACK: %v; want the write seen inside and undone after", steps["begin"])
	}
}

// TestNodePostgresJS connects with postgres.js (npm postgres), which
// describes every parameterized statement and trusts the description to
// read its rows and encode its parameters: before the front described
// governed statements, every such read came back as [{}]. (Without
// fetch_types, which reads pg_catalog, postgres.js leaves arrays as
// their text.)
func TestNodePostgresJS(t *testing.T) {
	t.Parallel()
	node, npm := needTool(t, "node"), needTool(t, "npm")
	installNodeClient(t, npm)
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "postgresjs.mjs", f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable"))
	cmd.Dir = nodeClientDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("node postgresjs.mjs: %v\nstdout: %s\nstderr: %s", err, outb, stderr.String())
	}
	steps := map[string]string{}
	errs := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(outb)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		t.Logf("%s", line)
		step, _ := m["step"].(string)
		steps[step] = line
		if e, ok := m["error"].(map[string]any); ok {
			errs[step] = e
		}
	}
	want := map[string]string{
		"read":       `{"step":"read","rows":[{"id":"5","status":"pending"}],"columns":[["id",20],["status",25]],"command":"SELECT","count":1}`,
		"again":      `{"step":"again","rows":[{"id":"6","status":"pending"}]}`,
		"two_params": `{"step":"two_params","ids":["26"],"columns":[["id",20],["status",25]]}`,
		"types":      `{"step":"types","rows":[{"i4":70000,"txt":"seven","flag":true,"doc":{"a":[1,2],"b":"x"},"ints":"{1,2,3}"}],"columns":[["i4",23],["txt",25],["flag",16],["doc",3802],["ints",1007]]}`,
		"enum":       `{"step":"enum","rows":[{"id":"1","m":"calm"}],"columns":[["id",20],["m",25]]}`,
		"write":      `{"step":"write","command":"UPDATE","count":1,"rows":0}`,
	}
	for step, w := range want {
		if got := steps[step]; got != w {
			t.Errorf("%s:\n got %s\nwant %s", step, got, w)
		}
	}
	if e := errs["outside"]; e == nil || e["code"] != pgwire.StateNotDescribed || !strings.Contains(e["message"].(string), "cannot be described") {
		t.Errorf("outside the bound: %v, want %s", steps["outside"], pgwire.StateNotDescribed)
	}
	if e := errs["referred"]; e == nil || e["code"] != "HM001" || !strings.HasPrefix(e["where"].(string), "req_") {
		t.Errorf("a write that is referred: %v, want HM001 with its request id", steps["referred"])
	}
}

// TestAsyncpg connects with asyncpg (Debian's python3-asyncpg), which
// prepares every statement and uses its description to encode the
// parameters and decode the rows: before the front described governed
// statements it could not run a parameterized statement at all.
func TestAsyncpg(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import asyncpg").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("asyncpg is required under CI (Debian: apt-get install python3-asyncpg): %v", err)
		}
		t.Skipf("asyncpg is not installed for %s: %v", py, err)
	}
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/asyncpg-client/client.py", f.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("asyncpg client: %v\nstdout: %s\nstderr: %s", err, outb, stderr.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(outb)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		t.Logf("%s", line)
		got[m["step"].(string)] = line
	}
	want := map[string]string{
		"read":         `{"step": "read", "rows": [{"id": 26, "status": "pending"}]}`,
		"prepared":     `{"step": "prepared", "params": ["int8"], "columns": [["id", "int8"], ["status", "text"], ["created_at", "timestamptz"]]}`,
		"prepared_row": `{"step": "prepared_row", "id": 5, "status": "pending", "aware": true}`,
		"enum":         `{"step": "enum", "rows": [{"id": 1, "m": "calm"}]}`,
		"write":        `{"step": "write", "tag": "UPDATE 1"}`,
		"outside":      `{"step": "outside", "error": "` + pgwire.StateNotDescribed + `"}`,
	}
	for step, w := range want {
		if got[step] != w {
			t.Errorf("%s:\n got %s\nwant %s", step, got[step], w)
		}
	}
}
