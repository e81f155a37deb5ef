package mcpserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
)

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// post sends one MCP request to h with the given Host and headers.
func post(t *testing.T, h http.Handler, host string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", "http://"+host+mcpserver.Path, strings.NewReader(initialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestRebindingGuard: /mcp refuses a Host or Origin that is not loopback,
// an IP address or configured (DNS rebinding), before authentication, and
// accepts the configured names of a reverse proxy.
func TestRebindingGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := mcpserver.NewHandler(f.gw, func(r *http.Request) string {
		if r.Header.Get("Authorization") == "Bearer "+f.token {
			return "agent:demo"
		}
		return ""
	}, mcpserver.Config{AllowedHosts: []string{"mcp.example.com"}, AllowedOrigins: []string{"https://console.example.org"}})
	auth := "Bearer " + f.token
	cases := []struct {
		host, origin, token string
		status              int
		code                string
	}{
		{"evil.example.com", "http://evil.example.com", auth, 403, "host_not_allowed"},
		{"evil.example.com:8080", "", auth, 403, "host_not_allowed"},
		{"evil.example.com", "", "", 403, "host_not_allowed"}, // before authentication
		{"127.0.0.1:8080", "http://evil.example.com", auth, 403, "origin_not_allowed"},
		{"localhost:8080", "null", auth, 403, "origin_not_allowed"},
		{"127.0.0.1:8080", "http://evil.example.com", "", 403, "origin_not_allowed"},
		{"127.0.0.1:8080", "", auth, 200, ""},
		{"[::1]:8080", "", auth, 200, ""},
		{"localhost:8080", "http://localhost:6274", auth, 200, ""},
		{"10.1.2.3:8080", "", auth, 200, ""},
		{"mcp.example.com", "https://mcp.example.com", auth, 200, ""},
		{"MCP.example.com:443", "", auth, 200, ""},
		{"127.0.0.1", "https://console.example.org", auth, 200, ""},
		{"127.0.0.1", "", "", 401, "unauthorized"},
	}
	for _, c := range cases {
		hdr := map[string]string{}
		if c.origin != "" {
			hdr["Origin"] = c.origin
		}
		if c.token != "" {
			hdr["Authorization"] = c.token
		}
		w := post(t, h, c.host, hdr)
		if w.Code != c.status {
			t.Errorf("Host %s Origin %q: %d, want %d: %s", c.host, c.origin, w.Code, c.status, w.Body.String())
			continue
		}
		if c.code != "" && !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`) {
			t.Errorf("Host %s Origin %q: %s, want code %s", c.host, c.origin, w.Body.String(), c.code)
		}
	}
}

// TestWrongTokenAnswer: a refused token is 401 with an RFC 6750 error and
// an RFC 9728 resource_metadata URL, whose metadata names no
// authorization server (there is no OAuth flow), and the official Go SDK
// client reports the refusal.
func TestWrongTokenAnswer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req, _ := http.NewRequest("POST", f.srv.URL+mcpserver.Path, strings.NewReader(initialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer not-a-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wa := resp.Header.Get("WWW-Authenticate")
	meta := f.srv.URL + mcpserver.MetadataPath
	if resp.StatusCode != 401 || !strings.HasPrefix(wa, "Bearer ") || !strings.Contains(wa, `error="invalid_token"`) ||
		!strings.Contains(wa, `resource_metadata="`+meta+`"`) || !strings.Contains(string(body), "no OAuth") {
		t.Fatalf("%d WWW-Authenticate %q: %s", resp.StatusCode, wa, body)
	}
	mresp, err := http.Get(meta)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Resource             string   `json:"resource"`
		BearerMethods        []string `json:"bearer_methods_supported"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(mresp.Body).Decode(&m)
	mresp.Body.Close()
	if err != nil || mresp.StatusCode != 200 || m.Resource != f.srv.URL+mcpserver.Path || len(m.BearerMethods) != 1 ||
		m.BearerMethods[0] != "header" || m.AuthorizationServers == nil || len(m.AuthorizationServers) != 0 {
		t.Fatalf("metadata: %d %+v %v", mresp.StatusCode, m, err)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: f.srv.URL + mcpserver.Path, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: "not-a-token", base: http.DefaultTransport}, Timeout: time.Minute}}
	if cs, err := client.Connect(t.Context(), tr, nil); err == nil {
		cs.Close()
		t.Fatal("the Go SDK client connected with a wrong token")
	} else if !strings.Contains(strings.ToLower(err.Error()), "unauthorized") && !strings.Contains(err.Error(), "401") {
		t.Fatalf("the client's error does not say the token was refused: %v", err)
	}
}

// TestInputSchemasHaveExamples: every tool's input schema carries
// examples, for the whole input and each property, and run_sql's example
// runs.
func TestInputSchemasHaveExamples(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.connect(t, f.token)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		j, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Examples   []map[string]any `json:"examples"`
			Properties map[string]struct {
				Examples []any `json:"examples"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(j, &s); err != nil || len(s.Examples) == 0 {
			t.Errorf("%s: no examples in %s", tool.Name, j)
		}
		for name, p := range s.Properties {
			if len(p.Examples) == 0 {
				t.Errorf("%s.%s: no examples", tool.Name, name)
			}
		}
		if tool.Name == mcpserver.ToolRunSQL {
			r := call[gateway.Response](t, cs, tool.Name, s.Examples[0])
			if r.isError || r.structured.Outcome != gateway.OutcomeExecuted {
				t.Errorf("run_sql's own example: %+v", r)
			}
		}
	}
}

// TestUnapprovableOverMCP: a statement no human could approve is a tool
// error at once, as HTTP answers it 422, and nothing is queued.
func TestUnapprovableOverMCP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.connect(t, f.token)
	for sql, code := range map[string]string{
		"UPDATE orders SET status = 'failed' WHERE id = 5; DROP TABLE orders": "multiple_statements",
		"TRUNCATE orders":                     "statement_not_allowed",
		"SELECT id FROM orders WHERE id = $1": "parameter_not_allowed",
	} {
		r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": sql})
		if !r.isError || !strings.Contains(r.text, code) || !strings.Contains(r.text, "not queued") {
			t.Errorf("%q over MCP: %+v", sql, r)
		}
		b, _ := json.Marshal(map[string]string{"target": "shop", "sql": sql})
		req, _ := http.NewRequest("POST", f.srv.URL+"/v1/statements", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 422 || !strings.Contains(string(body), `"code":"sql_`+code+`"`) {
			t.Errorf("%q over HTTP: %d %s", sql, resp.StatusCode, body)
		}
	}
	q, err := f.gw.Queue(t.Context(), []string{"shop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 0 {
		t.Fatalf("%d requests queued, want none", len(q))
	}
}
