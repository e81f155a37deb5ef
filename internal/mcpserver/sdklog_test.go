package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKLogs runs a real MCP session (the SDK's client and this server,
// in memory) with the node's JSON logger at info: none of the SDK's
// per-request INFO lines appear; at debug they do, and no line has two
// "level" keys.
func TestSDKLogs(t *testing.T) {
	t.Parallel()
	session := func(level slog.Level) string {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
		server := newServer("test", func(*mcp.CallToolRequest) (backend, error) { return nil, errors.New("no backend") }, log)
		st, ct := mcp.NewInMemoryTransports()
		ctx := context.Background()
		ss, err := server.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Logf("set logging level: %v", err) // the server may not offer logging; the lines above still count
		}
		_ = cs.Close()
		_ = ss.Wait()
		return buf.String()
	}
	if out := session(slog.LevelInfo); strings.Contains(out, `"level":"INFO"`) {
		t.Errorf("at info, the SDK still logs INFO lines:\n%s", out)
	}
	out := session(slog.LevelDebug)
	if !strings.Contains(out, "session") {
		t.Fatalf("at debug the SDK's session lines are gone too (the check above would pass vacuously):\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Count(line, `"level":`) != 1 {
			t.Errorf("a line without exactly one level key: %s", line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("not a JSON line: %s", line)
		}
	}
}

// TestRenameBuiltin: an SDK attribute named like slog's own keys is
// renamed, through a record and through WithAttrs.
func TestRenameBuiltin(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := sdkLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	l.With("msg", "x").Warn("client log level set", "level", "debug")
	line := strings.TrimSpace(buf.String())
	if strings.Count(line, `"level":`) != 1 || !strings.Contains(line, `"mcp_level":"debug"`) || !strings.Contains(line, `"mcp_msg":"x"`) {
		t.Errorf("got %s", line)
	}
}
