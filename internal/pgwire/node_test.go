package pgwire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/harbormaster-dev/harbormaster/internal/testtools"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

const nodeClientDir = "testdata/node-client"

// installNodeClient runs npm ci in testdata/node-client unless
// node_modules already holds the pg version package.json pins.
func installNodeClient(t *testing.T, npm string) {
	t.Helper()
	testtools.NPMCI(t, nodeClientDir, "pg")
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
