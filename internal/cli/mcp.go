package cli

import (
	"errors"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
)

// runMCP is `harbormaster mcp`: an MCP server on stdin/stdout that an MCP
// client launches, forwarding every tool call to a running server's HTTP
// API with one agent token. Logs go to stderr; stdout is the protocol.
func runMCP(e *env, args []string) int {
	fs := e.flags("harbormaster mcp [--server URL] [--token-file FILE | --token-env VAR]",
		"Speaks MCP on stdin and stdout, for an MCP client to launch, and forwards each tool\n"+
			"call (run_sql, request_status, my_delegations, describe_tables) to the HTTP API of\n"+
			"a running harbormaster serve, as the agent whose token is in FILE, or else in the\n"+
			"environment variable VAR ($HARBORMASTER_TOKEN by default). The server defaults to\n"+
			"$HARBORMASTER_SERVER. Agents that speak streamable HTTP can connect to URL/mcp\n"+
			"directly instead.")
	server := fs.String("server", e.getenv("HARBORMASTER_SERVER"), "the server's base `URL`, e.g. http://127.0.0.1:8080 (or $HARBORMASTER_SERVER)")
	tokenFile := fs.String("token-file", "", "a `FILE` holding the agent's bearer token")
	tokenEnv := fs.String("token-env", "HARBORMASTER_TOKEN", "the environment `VARIABLE` holding the agent's bearer token, when --token-file is not given")
	level := fs.String("log-level", "warn", "log `LEVEL` on stderr: debug, info, warn or error")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	switch {
	case *server == "":
		return e.usageErr(fs, "--server (or $HARBORMASTER_SERVER) is required")
	case *tokenFile == "" && strings.TrimSpace(e.getenv(*tokenEnv)) == "":
		return e.usageErr(fs, "a token is required: --token-file FILE, or the token in $%s", *tokenEnv)
	case fs.NArg() > 0:
		return e.usageErr(fs, "unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	token, from := strings.TrimSpace(e.getenv(*tokenEnv)), "$"+*tokenEnv
	if *tokenFile != "" {
		tok, err := config.ReadFileLimited(*tokenFile, 4<<10)
		if err != nil {
			e.errorf("reading the token file: %v", err)
			return exitUsage
		}
		if token, from = strings.TrimSpace(string(tok)), *tokenFile; token == "" {
			e.errorf("the token file %s is empty", *tokenFile)
			return exitUsage
		}
	}
	cfg := mcpserver.ClientConfig{Server: *server, Token: token, Logger: newLogger(e.stderr, *level)}
	if err := mcpserver.ServeStdio(e.ctx, cfg, e.stdin, e.stdout); err != nil {
		e.errorf("mcp: %v", err)
		if errors.Is(err, mcpserver.ErrUnauthorized) {
			e.hintf("the token in %s is not an agent token the server at %s knows", from, *server)
		}
		return exitFail
	}
	return exitOK
}
