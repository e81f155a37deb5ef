package mcpserver_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

var shared pgtmptest.Shared

// cliEnv makes the test binary run as the harbormaster command (cli.Do,
// which is all cmd/harbormaster does), so TestCommand can launch
// `harbormaster mcp` as a real process without building it.
const cliEnv = "HARBORMASTER_MCPSERVER_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(cli.Do(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(shared.Run(m))
}

const (
	agent = "agent:demo"  // holds the two example delegations
	other = "agent:other" // holds none
)

// fixture is a control plane wired as node.Start wires it: a
// store, a running logbook, a Pilot on a throwaway database loaded with the
// examples, the two example delegations signed by alice for agent:demo, and
// the HTTP API with /v1/tables and /mcp on an httptest server.
type fixture struct {
	gw         *gateway.Gateway
	srv        *httptest.Server
	token      string // agent:demo's
	otherToken string
}

func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := examples.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newFixture(t *testing.T, tune ...func(*gateway.Config)) *fixture {
	t.Helper()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"shop.sql", "shop_data.sql"} {
		if _, err := conn.Exec(ctx, string(readExample(t, f)), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	conn.Close(ctx)
	if err := pilot.InitTarget(ctx, dsn); err != nil {
		t.Fatal(err)
	}

	priv, pub, err := signing.GenerateEd25519("alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := signing.ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line, err := signing.AllowedSignersLine([]string{"alice@shop"}, []string{signing.NamespaceDelegation}, pub)
	if err != nil {
		t.Fatal(err)
	}
	signers, err := signing.ParseAllowedSigners([]byte(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cpPub, cpPriv, _ := ed25519.GenerateKey(rand.Reader)
	minter, err := marque.NewMinter(marque.MinterConfig{Issuer: "test", Key: cpPriv, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: "test", Key: cpPub, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(ctx, pilot.Config{Target: "shop", DSN: dsn}, verifier, signers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cpSigner, err := logbook.NewCheckpointSigner("test", cpPriv)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := logbook.New(st, cpSigner, time.Now, nil, logbook.Config{Origin: "test/logbook"})
	if err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(context.Background())
	lbDone := make(chan error, 1)
	go func() { lbDone <- lb.Run(lctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-lbDone; err != nil {
			t.Errorf("logbook: %v", err)
		}
	})

	gc := gateway.Config{Name: "test"}
	for _, f := range tune {
		f(&gc)
	}
	gw, err := gateway.New(ctx, gc, st, lb, minter, signers, []pilot.Executor{p})
	if err != nil {
		t.Fatal(err)
	}
	// The examples expire at a fixed date; these expire a week from now.
	exp := time.Now().UTC().Add(7 * 24 * time.Hour).Truncate(time.Second).Format(time.RFC3339)
	for _, name := range []string{"unstick-orders.yaml", "fix-name-typos.yaml"} {
		y := bytes.Replace(readExample(t, name), []byte("expires: 2027-12-31T00:00:00Z"), []byte("expires: "+exp), 1)
		d, err := bound.Parse(y, name)
		if err != nil {
			t.Fatal(err)
		}
		b, rep := bound.Compile(d, p.Catalog(), bound.Options{})
		if !rep.Signable {
			t.Fatalf("%s: %v", name, rep.Problems)
		}
		canon, err := b.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		sig, err := alice.Sign(signing.NamespaceDelegation, canon)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := gw.AddDelegation(ctx, y, sig, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	token, hash := config.NewAgentToken()
	otherToken, otherHash := config.NewAgentToken()
	api, err := httpapi.New(gw, httpapi.Config{Agents: []httpapi.Agent{
		{Principal: agent, TokenSHA256: hash}, {Principal: other, TokenSHA256: otherHash}}})
	if err != nil {
		t.Fatal(err)
	}
	httpapi.RegisterTables(api)
	mcpserver.Register(api.Mux(), gw, api.Authenticate, nil)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &fixture{gw: gw, srv: srv, token: token, otherToken: otherToken}
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

// connect opens an MCP session over streamable HTTP with token.
func (f *fixture) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: f.srv.URL + mcpserver.Path, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}, Timeout: time.Minute}}
	cs, err := client.Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// result is one tool call's answer, its structured content decoded.
type result[T any] struct {
	isError    bool
	text       string
	structured T
	raw        map[string]any
}

func call[T any](t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) result[T] {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	var r result[T]
	r.isError = res.IsError
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.text += tc.Text
		}
	}
	t.Logf("%s %v (isError %v):\n%s", tool, args, r.isError, r.text)
	if res.StructuredContent != nil {
		j, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(j, &r.structured); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, j, err)
		}
		_ = json.Unmarshal(j, &r.raw)
	} else if !res.IsError {
		t.Fatalf("%s: no structured content: %s", tool, r.text)
	}
	return r
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: %q lacks %q", what, got, w)
		}
	}
}

func TestUnauthorized(t *testing.T) {
	f := newFixture(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	for _, tc := range []struct{ name, header string }{
		{"no token", ""},
		{"wrong token", "Bearer hm_0000"},
		{"not bearer", "Basic " + f.token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+mcpserver.Path, strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if h := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
				t.Errorf("WWW-Authenticate %q", h)
			}
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Code != "unauthorized" {
				t.Errorf("body: %+v %v", body, err)
			}
		})
	}
	t.Run("client", func(t *testing.T) {
		client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
		tr := &mcp.StreamableClientTransport{Endpoint: f.srv.URL + mcpserver.Path, MaxRetries: -1}
		if cs, err := client.Connect(t.Context(), tr, nil); err == nil {
			cs.Close()
			t.Fatal("an MCP client without a token connected")
		}
	})
}

// testTools runs the four tools through cs as agent:demo and checks every
// answer; the streamable HTTP and stdio tests share it.
func testTools(t *testing.T, cs *mcp.ClientSession) {
	t.Run("list", func(t *testing.T) {
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			got[tool.Name] = tool
		}
		for _, name := range []string{mcpserver.ToolRunSQL, mcpserver.ToolRequestStatus, mcpserver.ToolMyDelegations, mcpserver.ToolDescribeTables} {
			tool, ok := got[name]
			switch {
			case !ok:
				t.Errorf("tool %s is not listed", name)
				continue
			case tool.OutputSchema == nil:
				t.Errorf("tool %s has no output schema", name)
			}
			wantContains(t, name+" description", tool.Description, "referred")
		}
		if len(got) != 4 {
			t.Errorf("%d tools, want 4", len(got))
		}
		wantContains(t, "run_sql description", got[mcpserver.ToolRunSQL].Description, "request_status", "wait_seconds", "request_id")
		if a := got[mcpserver.ToolRunSQL].Annotations; a == nil || a.ReadOnlyHint {
			t.Errorf("run_sql annotations %+v: it writes", a)
		}
		if a := got[mcpserver.ToolDescribeTables].Annotations; a == nil || !a.ReadOnlyHint {
			t.Errorf("describe_tables annotations %+v: it only reads", a)
		}
	})

	var referredID, executedID string
	t.Run("run_sql executed select", func(t *testing.T) {
		r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "SELECT id, status FROM orders WHERE id = 3"})
		if r.isError || r.structured.Outcome != gateway.OutcomeExecuted {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		if len(r.structured.Rows) != 1 || r.structured.Rows[0][1] != "pending" || r.structured.Rows[0][0] != float64(3) {
			t.Errorf("rows %v", r.structured.Rows)
		}
		if _, ok := r.raw["truncated"]; !ok {
			t.Errorf("structured content lacks truncated: %v", r.raw)
		}
		wantContains(t, "text", r.text, "Executed", r.structured.RequestID, `{"id": 3, "status": "pending"}`)
	})
	t.Run("run_sql executed update", func(t *testing.T) {
		r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 4"})
		if r.isError || r.structured.Outcome != gateway.OutcomeExecuted || r.structured.RowsAffected != 1 {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		executedID = r.structured.RequestID
		wantContains(t, "text", r.text, "1 row(s) affected")
	})
	t.Run("run_sql referred", func(t *testing.T) {
		r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "SELECT id, total_cents FROM orders WHERE id = 3"})
		if r.isError {
			t.Fatalf("a referral is a result, not an error: %s", r.text)
		}
		if r.structured.Outcome != gateway.OutcomeReferred || r.structured.RequestID == "" || len(r.structured.Reasons) == 0 {
			t.Fatalf("got %+v", r.structured)
		}
		referredID = r.structured.RequestID
		wantContains(t, "reasons", strings.Join(r.structured.Reasons, " "), "total_cents")
		wantContains(t, "text", r.text, "Referred to a human", referredID, "total_cents", "request_status", "wait_seconds")
	})
	t.Run("run_sql errors", func(t *testing.T) {
		for _, tc := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"target": "nope", "sql": "SELECT 1"}, `unknown target "nope"`},
			{map[string]any{"target": "shop", "sql": "SELEC id FROM orders"}, "nothing ran"},
			{map[string]any{"target": "shop", "sql": "  "}, "required"},
			{map[string]any{"sql": "SELECT 1"}, "target"},
		} {
			r := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, tc.args)
			if !r.isError {
				t.Errorf("%v: not an error: %s", tc.args, r.text)
			}
			wantContains(t, "error", r.text, tc.want)
		}
	})
	t.Run("request_status", func(t *testing.T) {
		if referredID == "" || executedID == "" {
			t.Skip("run_sql failed")
		}
		r := call[gateway.RequestView](t, cs, mcpserver.ToolRequestStatus, map[string]any{"request_id": referredID})
		if r.isError || r.structured.Status != gateway.StatusWaiting || r.structured.ID != referredID {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		wantContains(t, "text", r.text, "waiting for a human", "total_cents")
		// A wait that ends with the request still waiting answers waiting.
		r = call[gateway.RequestView](t, cs, mcpserver.ToolRequestStatus, map[string]any{"request_id": referredID, "wait_seconds": 1})
		if r.isError || r.structured.Status != gateway.StatusWaiting {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		r = call[gateway.RequestView](t, cs, mcpserver.ToolRequestStatus, map[string]any{"request_id": executedID, "wait_seconds": 30})
		if r.isError || r.structured.Status != gateway.StatusExecuted || r.structured.RowsAffected != 1 {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		for _, args := range []map[string]any{
			{"request_id": "req_nope"},
			{"request_id": referredID, "wait_seconds": 61},
			{"request_id": referredID, "wait_seconds": -1},
		} {
			if r := call[gateway.RequestView](t, cs, mcpserver.ToolRequestStatus, args); !r.isError {
				t.Errorf("%v: not an error: %s", args, r.text)
			}
		}
	})
	t.Run("my_delegations", func(t *testing.T) {
		r := call[struct {
			Delegations []scope.DelegationView `json:"delegations"`
		}](t, cs, mcpserver.ToolMyDelegations, nil)
		if r.isError || len(r.structured.Delegations) != 2 {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		tiers := map[string]scope.DelegationView{}
		for _, d := range r.structured.Delegations {
			tiers[d.Tier] = d
			if !d.Active || d.Grantee != agent || len(d.Rules) != 2 {
				t.Errorf("delegation %+v", d)
			}
		}
		if tiers["A"].Sentence != "Unstick orders that have been pending for more than a day." || tiers["B"].Fallback == "" {
			t.Errorf("delegations %+v", tiers)
		}
		wantContains(t, "text", r.text, "2 delegation(s) in force", "tier A", "tier B", "Unstick orders",
			"change status, updated_at of at most 20 rows per statement of public.orders", tiers["A"].Expires, "If a conformance judgment is wrong")
	})
	t.Run("describe_tables", func(t *testing.T) {
		r := call[scope.TablesView](t, cs, mcpserver.ToolDescribeTables, map[string]any{"target": "shop"})
		if r.isError || len(r.structured.Tables) != 2 {
			t.Fatalf("got %+v: %s", r.structured, r.text)
		}
		tables := map[string]scope.TableView{}
		for _, tv := range r.structured.Tables {
			tables[tv.Table] = tv
		}
		orders, customers := tables["public.orders"], tables["public.customers"]
		cols := map[string]scope.ColumnView{}
		for _, c := range orders.Columns {
			cols[c.Name] = c
		}
		// The columns the bound names, and no other (total_cents is
		// in no rule: invariant 10).
		if len(orders.Columns) != 5 || cols["id"].Type != "bigint" {
			t.Errorf("orders columns %+v", orders.Columns)
		}
		if _, ok := cols["total_cents"]; ok {
			t.Errorf("orders columns %+v: total_cents, which no rule names, is listed", orders.Columns)
		}
		for _, tc := range []struct {
			col         string
			read, write bool
		}{{"id", true, false}, {"status", true, true}, {"updated_at", true, true}} {
			c := cols[tc.col]
			if c.Read != tc.read || c.Write != tc.write || len(c.ReadBy) != b2i(tc.read) || len(c.WriteBy) != b2i(tc.write) {
				t.Errorf("orders.%s: %+v, want read %v write %v", tc.col, c, tc.read, tc.write)
			}
		}
		if w := cols["status"].WriteBy; len(w) == 1 && (w[0].Op != "update" || w[0].Rule != 1 || w[0].Route != "compiled") {
			t.Errorf("status write_by %+v", w)
		}
		var update scope.ScopeRule
		for _, rule := range orders.Rules {
			if rule.Op == "update" {
				update = rule
			}
		}
		if update.MaxRows != 20 || !strings.Contains(update.Fence, "pending") || !strings.Contains(update.Check, "retrying") {
			t.Errorf("orders update rule %+v", update)
		}
		for _, c := range customers.Columns {
			if c.Name == "name" && (!c.Write || c.WriteBy[0].Route != "residual") {
				t.Errorf("customers.name %+v: writable only through the residual rule", c)
			}
			if c.Name == "email" {
				t.Errorf("customers.email %+v: no rule lists it, yet it is shown", c)
			}
		}
		wantContains(t, "text", r.text, "table public.orders", "max_rows: 20", "fence: ", "residual")

		if r := call[scope.TablesView](t, cs, mcpserver.ToolDescribeTables, nil); r.isError || len(r.structured.Tables) != 2 {
			t.Errorf("all targets: %+v %s", r.structured, r.text)
		}
		if r := call[scope.TablesView](t, cs, mcpserver.ToolDescribeTables, map[string]any{"target": "nope"}); !r.isError {
			t.Errorf("unknown target: not an error: %s", r.text)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestStreamableHTTP(t *testing.T) {
	f := newFixture(t)
	testTools(t, f.connect(t, f.token))
}

// TestPrincipals checks that every tool acts as the token's principal and
// only sees its own requests and delegations.
func TestPrincipals(t *testing.T) {
	f := newFixture(t)
	demo, stranger := f.connect(t, f.token), f.connect(t, f.otherToken)
	r := call[gateway.Response](t, demo, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "SELECT id, total_cents FROM orders WHERE id = 3"})
	if r.structured.Outcome != gateway.OutcomeReferred {
		t.Fatalf("got %+v", r.structured)
	}
	if s := call[gateway.RequestView](t, stranger, mcpserver.ToolRequestStatus, map[string]any{"request_id": r.structured.RequestID}); !s.isError {
		t.Errorf("another agent read agent:demo's request: %s", s.text)
	}
	s := call[gateway.Response](t, stranger, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "SELECT id, status FROM orders WHERE id = 3"})
	if s.isError || s.structured.Outcome != gateway.OutcomeReferred {
		t.Errorf("agent:other has no delegation, so its statement is referred: %+v %s", s.structured, s.text)
	}
	wantContains(t, "reasons", strings.Join(s.structured.Reasons, " "), other)
	d := call[struct {
		Delegations []scope.DelegationView `json:"delegations"`
	}](t, stranger, mcpserver.ToolMyDelegations, nil)
	if len(d.structured.Delegations) != 0 {
		t.Errorf("agent:other sees delegations %+v", d.structured.Delegations)
	}
	wantContains(t, "text", d.text, "no delegation in force")
	if tb := call[scope.TablesView](t, stranger, mcpserver.ToolDescribeTables, nil); len(tb.structured.Tables) != 0 {
		t.Errorf("agent:other sees tables %+v", tb.structured.Tables)
	}
}
