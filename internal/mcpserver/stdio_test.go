package mcpserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
)

// stdio runs ServeStdio against the fixture's HTTP API over in-memory
// pipes, as `harbormaster mcp` runs it over its stdin and stdout, and
// connects an MCP client to it.
func (f *fixture) stdio(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(ctx, mcpserver.ClientConfig{Server: f.srv.URL + "/", Token: token}, serverIn, serverOut)
		serverOut.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect: %v (server: %v)", err, <-done)
	}
	t.Cleanup(func() {
		_ = cs.Close() // closes clientOut: the server reads EOF and returns
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("ServeStdio did not return after its input closed")
		}
		cancel()
	})
	return cs
}

func TestStdio(t *testing.T) {
	f := newFixture(t)
	testTools(t, f.stdio(t, f.token))
}

func TestStdioRefusedToken(t *testing.T) {
	f := newFixture(t)
	var out bytes.Buffer
	err := mcpserver.ServeStdio(t.Context(), mcpserver.ClientConfig{Server: f.srv.URL, Token: "hm_wrong"}, strings.NewReader(""), &out)
	if !errors.Is(err, mcpserver.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	if out.Len() != 0 {
		t.Errorf("wrote %q to the protocol stream", out.String())
	}
	for _, cfg := range []mcpserver.ClientConfig{
		{Server: "", Token: "x"},
		{Server: "ftp://host", Token: "x"},
		{Server: f.srv.URL, Token: "  "},
	} {
		if err := mcpserver.ServeStdio(t.Context(), cfg, strings.NewReader(""), &out); err == nil || errors.Is(err, mcpserver.ErrUnauthorized) {
			t.Errorf("%+v: got %v, want a configuration error", cfg, err)
		}
	}
}

// harbormaster returns the command line `harbormaster args...`: this test
// binary re-executed as cli.Do (see TestMain).
func harbormaster(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	return cmd
}

// TestCommand launches `harbormaster mcp` as an MCP client would, through
// the SDK's CommandTransport, against the fixture's HTTP API.
func TestCommand(t *testing.T) {
	if out, err := harbormaster("mcp", "--help").CombinedOutput(); err != nil {
		msg := "the mcp command is not wired into internal/cli/cli.go: " + strings.TrimSpace(string(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	f := newFixture(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("token", f.token+"\n")

	t.Run("usage", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"mcp"}, 2, "--server (or $HARBORMASTER_SERVER) is required"},
			{[]string{"mcp", "--server", f.srv.URL}, 2, "a token is required: --token-file FILE, or the token in $HARBORMASTER_TOKEN"},
			{[]string{"mcp", "--server", f.srv.URL, "--token-file", write("empty", "\n")}, 2, "is empty"},
			{[]string{"mcp", "--server", f.srv.URL, "--token-file", filepath.Join(dir, "missing")}, 2, "token file"},
			{[]string{"mcp", "--server", f.srv.URL, "--token-file", write("wrong", "hm_wrong")}, 1, "hint:"},
		} {
			cmd := harbormaster(tc.args...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "HARBORMASTER_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			var stderr bytes.Buffer
			cmd.Stdin, cmd.Stderr = strings.NewReader(""), &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.code {
				t.Errorf("%v: %v, want exit %d; stderr %s", tc.args, err, tc.code, stderr.String())
			}
			wantContains(t, strings.Join(tc.args, " "), stderr.String(), tc.want)
		}
	})

	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	var stderr bytes.Buffer
	cmd := harbormaster("mcp", "--server", f.srv.URL, "--token-file", tokenFile)
	cmd.Stderr = &stderr
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr: %s", err, stderr.String())
	}
	r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "SELECT id, total_cents FROM orders WHERE id = 3"})
	if r.isError || r.structured.Outcome != gateway.OutcomeReferred || r.structured.RequestID == "" {
		t.Errorf("run_sql: %+v %s", r.structured, r.text)
	}
	s := call[gateway.RequestView](t, cs, mcpserver.ToolRequestStatus, map[string]any{"request_id": r.structured.RequestID, "wait_seconds": 1})
	if s.isError || s.structured.Status != gateway.StatusWaiting {
		t.Errorf("request_status: %+v %s", s.structured, s.text)
	}
	if tb := call[scope.TablesView](t, cs, mcpserver.ToolDescribeTables, map[string]any{"target": "shop"}); len(tb.structured.Tables) != 2 {
		t.Errorf("describe_tables: %+v %s", tb.structured, tb.text)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v; stderr: %s", err, stderr.String())
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("harbormaster mcp did not exit cleanly when its stdin closed: %v; stderr: %s", cmd.ProcessState, stderr.String())
	}
}

// TestStdioRetriesLostAnswer: when the answer to run_sql is lost after the
// server ran it (the connection breaks), the stdio server sends it again
// under the same Idempotency-Key and gets the first answer: one request,
// queued once.
func TestStdioRetriesLostAnswer(t *testing.T) {
	f := newFixture(t)
	api := f.srv.Config.Handler
	var dropped atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/statements" && dropped.Add(1) == 1 {
			api.ServeHTTP(httptest.NewRecorder(), r) // it runs; its answer is lost
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	orig := f.srv
	f.srv = flaky
	cs := f.stdio(t, f.token)
	f.srv = orig
	sql := "DELETE FROM orders WHERE id = 7"
	r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": sql})
	if r.isError || r.structured.Outcome != gateway.OutcomeReferred || dropped.Load() != 2 {
		t.Fatalf("run_sql after a lost answer: %+v (%d statement requests)", r, dropped.Load())
	}
	q, err := f.gw.Queue(t.Context(), []string{"shop"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, v := range q {
		if v.SQL == sql {
			ids = append(ids, v.ID)
		}
	}
	if len(ids) != 1 || ids[0] != r.structured.RequestID {
		t.Fatalf("queued %v, answered %s: want the one request, once", ids, r.structured.RequestID)
	}
}
