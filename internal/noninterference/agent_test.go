package noninterference_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// side is one target with its own control plane, reached as the agent
// reaches it: over HTTP and over MCP, with the agent's bearer token.
type side struct {
	name string // A or B
	dsn  string
	sys  *gatewaytest.System
	srv  *httptest.Server
	http *http.Client
	mcp  *mcp.ClientSession
	// pg is the agent's session on the side's PostgreSQL wire front.
	pg *pgconn.PgConn
	// lastNote is the id the observer's last sequence probe got back (0
	// before the first).
	lastNote int64
}

// startSide wires a whole control plane for dsn (gatewaytest), mounts the
// MCP server on its API and serves both on a real HTTP listener.
func startSide(t *testing.T, name, dsn string, keys *gatewaytest.Keys) *side {
	t.Helper()
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn,
		StorePath: filepath.Join(t.TempDir(), "store-"+name+".db"), Keys: keys,
		Pilot: pilot.Config{LockTimeout: probeLockTimeout}})
	mcpserver.Register(sys.API.Mux(), sys.Gateway, sys.API.Authenticate, nil)
	srv := httptest.NewServer(sys.API.Handler())
	t.Cleanup(srv.Close)
	s := &side{name: name, dsn: dsn, sys: sys, srv: srv, http: &http.Client{Timeout: 2 * time.Minute}}
	client := mcp.NewClient(&mcp.Implementation{Name: "noninterference-agent", Version: "0"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + mcpserver.Path, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{gatewaytest.AgentToken, http.DefaultTransport}, Timeout: 2 * time.Minute}}
	cs, err := client.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("noninterference: MCP connect to %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.mcp = cs
	s.pg = startWire(t, sys)
	return s
}

// startWire serves the side's PostgreSQL wire front on a loopback port and
// connects the agent to it.
func startWire(t *testing.T, sys *gatewaytest.System) *pgconn.PgConn {
	t.Helper()
	return startWireWith(t, sys, nil)
}

// startWireWith is startWire with the front's config changed by opt.
func startWireWith(t *testing.T, sys *gatewaytest.System, opt func(*pgwire.Config)) *pgconn.PgConn {
	t.Helper()
	cfg := pgwire.Config{Agents: []pgwire.Agent{{Principal: gatewaytest.Agent,
		TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken), SCRAM: pgwire.NewVerifier(gatewaytest.AgentToken)}}}
	if opt != nil {
		opt(&cfg)
	}
	front, err := pgwire.New(sys.Gateway, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = front.Serve(ctx, ln) }()
	u := url.URL{Scheme: "postgres", User: url.UserPassword(gatewaytest.Agent, gatewaytest.AgentToken), Host: ln.Addr().String(),
		Path: "/" + gatewaytest.Target, RawQuery: "sslmode=disable"}
	pc, err := pgconn.Connect(t.Context(), u.String())
	if err != nil {
		cancel()
		t.Fatalf("noninterference: wire connect: %v", err)
	}
	t.Cleanup(func() { pc.Close(context.Background()); cancel(); <-done })
	return pc
}

// wire sends a statement over the wire front's simple protocol and
// returns everything the client reads: the row description, the rows as
// text, the command tag, or the error with all its fields.
func (s *side) wire(ctx context.Context, sql string) map[string]any {
	out := map[string]any{}
	results, err := s.pg.Exec(ctx, sql).ReadAll()
	if err != nil {
		out["error"] = wireError(err)
	}
	for _, r := range results {
		fields := wireFields(r.FieldDescriptions)
		rows := []any{}
		for _, row := range r.Rows {
			var vals []any
			for _, v := range row {
				if v == nil {
					vals = append(vals, nil)
				} else {
					vals = append(vals, string(v))
				}
			}
			rows = append(rows, vals)
		}
		out["fields"], out["rows"], out["tag"] = fields, rows, r.CommandTag.String()
	}
	return out
}

func wireError(err error) map[string]any {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return map[string]any{"severity": pe.Severity, "code": pe.Code, "message": pe.Message, "detail": pe.Detail,
			"hint": pe.Hint, "where": pe.Where, "position": pe.Position, "schema": pe.SchemaName, "table": pe.TableName,
			"column": pe.ColumnName, "constraint": pe.ConstraintName}
	}
	return map[string]any{"client": err.Error()}
}

func wireFields(fds []pgconn.FieldDescription) []any {
	var fields []any
	for _, fd := range fds {
		fields = append(fields, map[string]any{"name": fd.Name, "type": fd.DataTypeOID, "size": fd.DataTypeSize,
			"format": fd.Format, "table": fd.TableOID, "attr": fd.TableAttributeNumber, "mod": fd.TypeModifier})
	}
	return fields
}

// wirePrepare prepares sql (Parse, Describe of the statement) and returns
// what the client reads before binding anything.
func (s *side) wirePrepare(ctx context.Context, sql string) map[string]any {
	out := map[string]any{}
	sd, err := s.pg.Prepare(ctx, "ni", sql, nil)
	if err != nil {
		out["error"] = wireError(err)
		return out
	}
	out["params"], out["fields"] = sd.ParamOIDs, wireFields(sd.Fields)
	if err := s.pg.Deallocate(ctx, "ni"); err != nil {
		out["deallocate"] = wireError(err)
	}
	return out
}

// wireExtended runs sql through the extended protocol (Parse, Bind,
// Describe of the portal, Execute) and returns what the client reads.
func (s *side) wireExtended(ctx context.Context, sql string) map[string]any {
	out := map[string]any{}
	r := s.pg.ExecParams(ctx, sql, nil, nil, nil, nil).Read()
	if r.Err != nil {
		out["error"] = wireError(r.Err)
	}
	rows := []any{}
	for _, row := range r.Rows {
		var vals []any
		for _, v := range row {
			if v == nil {
				vals = append(vals, nil)
			} else {
				vals = append(vals, string(v))
			}
		}
		rows = append(rows, vals)
	}
	out["fields"], out["rows"], out["tag"] = wireFields(r.FieldDescriptions), rows, r.CommandTag.String()
	return out
}

// bearer adds the agent's token to every request, as an agent's MCP client
// is configured to.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// exchange is one HTTP answer as the agent sees it: status and JSON body.
type exchange struct {
	Status int `json:"status"`
	Body   any `json:"body"`
}

// do sends one HTTP request with the agent's token (token "" for none).
func (s *side) do(ctx context.Context, method, path, token string, body any) (exchange, time.Duration, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return exchange{}, 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.srv.URL+path, rd)
	if err != nil {
		return exchange{}, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := s.http.Do(req)
	if err != nil {
		return exchange{}, 0, fmt.Errorf("%s %s on %s: %w", method, path, s.name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	elapsed := time.Since(start)
	if err != nil {
		return exchange{}, 0, fmt.Errorf("%s %s on %s: %w", method, path, s.name, err)
	}
	v, err := decodeJSON(raw)
	if err != nil {
		// Not JSON: the raw text is what the agent sees.
		v = string(raw)
	}
	return exchange{Status: resp.StatusCode, Body: v}, elapsed, nil
}

// decodeJSON decodes with json.Number, so numbers compare exactly.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// tool calls an MCP tool and renders its result as the agent reads it:
// error flag, text, structured content. A protocol error is recorded too.
func (s *side) tool(ctx context.Context, name string, args map[string]any) map[string]any {
	res, err := s.mcp.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return map[string]any{"protocol_error": err.Error()}
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		} else {
			text += fmt.Sprintf("[%T]", c)
		}
	}
	out := map[string]any{"is_error": res.IsError, "text": text}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			out["structured_error"] = err.Error()
		} else if v, err := decodeJSON(b); err == nil {
			out["structured"] = v
		}
	}
	return out
}

// requestIDRE finds a request id in a tool's text (an error names it).
var requestIDRE = regexp.MustCompile(`\breq_[a-z2-7]{8,}\b`)

// answer is what one statement produced on one side.
type answer struct {
	obs map[string]any // interface -> what the agent saw there
	// elapsed is the answer time of POST /v1/statements.
	elapsed time.Duration
	// outcome is executed, referred, or the HTTP status of an error.
	outcome string
	// path is the answer's path ("" for a referral by the static check).
	path string
	// firstReason is the answer's first reason, for the tally.
	firstReason string
	// requestID is the answer's request id, for a human's look at it;
	// mcpRequestID that of the run over MCP ("" without one).
	requestID, mcpRequestID string
	// sql is the statement sent.
	sql string
}

// observe sends st as the agent: POST /v1/statements, then GET
// /v1/requests/{id}; with viaMCP, run_sql and request_status too (the
// statement runs a second time, alike on both sides), and a query over
// the PostgreSQL wire front (a third).
func (s *side) observe(ctx context.Context, st stmt, viaMCP bool) (answer, error) {
	a := answer{obs: map[string]any{}, sql: st.sql}
	ex, elapsed, err := s.do(ctx, http.MethodPost, "/v1/statements", gatewaytest.AgentToken,
		map[string]string{"target": gatewaytest.Target, "sql": st.sql})
	if err != nil {
		return a, err
	}
	a.elapsed = elapsed
	a.obs["http POST /v1/statements"] = ex
	body, _ := ex.Body.(map[string]any)
	id, _ := body["request_id"].(string)
	if ex.Status == http.StatusOK {
		a.outcome, _ = body["outcome"].(string)
		a.path, _ = body["path"].(string)
		if rs, ok := body["reasons"].([]any); ok && len(rs) > 0 {
			a.firstReason, _ = rs[0].(string)
		}
	} else {
		a.outcome = fmt.Sprintf("http %d", ex.Status)
		if e, ok := body["error"].(map[string]any); ok {
			id, _ = e["request_id"].(string)
			a.firstReason, _ = e["code"].(string)
		}
	}
	a.requestID = id
	if id != "" {
		rex, _, err := s.do(ctx, http.MethodGet, "/v1/requests/"+id, gatewaytest.AgentToken, nil)
		if err != nil {
			return a, err
		}
		a.obs["http GET /v1/requests/{id}"] = rex
	}
	if viaMCP {
		run := s.tool(ctx, mcpserver.ToolRunSQL, map[string]any{"target": gatewaytest.Target, "sql": st.sql})
		a.obs["mcp run_sql"] = run
		mid := ""
		if sc, ok := run["structured"].(map[string]any); ok {
			mid, _ = sc["request_id"].(string)
		}
		if mid == "" {
			text, _ := run["text"].(string)
			mid = requestIDRE.FindString(text)
		}
		a.mcpRequestID = mid
		if mid != "" {
			a.obs["mcp request_status"] = s.tool(ctx, mcpserver.ToolRequestStatus, map[string]any{"request_id": mid})
		}
		// And over the wire front, a third run alike on both sides; then
		// the extended protocol: the statement prepared (its parameter
		// and row descriptions before any bind), a fourth run through
		// Parse/Bind/Describe/Execute, and harbormaster_wait on the
		// request a referral names.
		a.obs["pgwire query"] = s.wire(ctx, st.sql)
		a.obs["pgwire prepare"] = s.wirePrepare(ctx, st.sql)
		ext := s.wireExtended(ctx, st.sql)
		a.obs["pgwire extended"] = ext
		if e, ok := ext["error"].(map[string]any); ok {
			if where, _ := e["where"].(string); requestIDRE.MatchString(where) {
				w := s.wire(ctx, "SELECT harbormaster_wait('"+requestIDRE.FindString(where)+"', 0.001)")
				// Its first column is the request id, which differs by side.
				if rows, _ := w["rows"].([]any); len(rows) == 1 {
					if r, _ := rows[0].([]any); len(r) > 0 {
						r[0] = "<request>"
					}
				}
				a.obs["pgwire harbormaster_wait"] = w
			}
		}
	}
	return a, nil
}

// scope is what the agent can learn of its own scope, asked once a round:
// its delegations over HTTP and MCP, and the tables they cover.
func (s *side) scope(ctx context.Context) (map[string]any, error) {
	out := map[string]any{}
	ex, _, err := s.do(ctx, http.MethodGet, "/v1/delegations", gatewaytest.AgentToken, nil)
	if err != nil {
		return nil, err
	}
	out["http GET /v1/delegations"] = ex
	out["mcp my_delegations"] = s.tool(ctx, mcpserver.ToolMyDelegations, map[string]any{})
	out["mcp describe_tables"] = s.tool(ctx, mcpserver.ToolDescribeTables, map[string]any{"target": gatewaytest.Target})
	return out, nil
}

// humanView is what a human may see of a request and nothing the agent
// sees: the detail of its outcome (the target's own error text) and the
// guarded SQL the Pilot ran, from the logbook. It explains a difference;
// it is never compared.
func (s *side) humanView(ctx context.Context, id string) (view, executedSQL string) {
	if id == "" {
		return "(no request)", ""
	}
	var b bytes.Buffer
	if v, err := s.sys.Gateway.Request(ctx, id, ""); err != nil {
		fmt.Fprintf(&b, "request: %v", err)
	} else {
		fmt.Fprintf(&b, "status %s, detail %q", v.Status, v.Detail)
	}
	entries, err := s.sys.Logbook.Find(ctx, logbook.Query{SubjectKey: "request", SubjectValue: id})
	if err != nil {
		fmt.Fprintf(&b, "; logbook: %v", err)
	}
	for _, e := range entries {
		var p struct {
			Code        string `json:"code"`
			ExecutedSQL string `json:"executed_sql"`
			Sum         string `json:"executed_sql_sha256"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		fmt.Fprintf(&b, "; %s", e.Kind)
		if p.Code != "" {
			fmt.Fprintf(&b, " code %s", p.Code)
		}
		if p.ExecutedSQL == "" && p.Sum != "" {
			// Logged once, by an earlier execution of the same text.
			p.ExecutedSQL, _ = ledger.ExecutedText(ctx, s.sys.Logbook, p.Sum)
		}
		if p.ExecutedSQL != "" {
			executedSQL = p.ExecutedSQL
		}
	}
	return b.String(), executedSQL
}
