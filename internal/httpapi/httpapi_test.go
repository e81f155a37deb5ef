package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// apiFixture is a whole control plane behind an httptest server, with the
// demo's target, data and both example delegations for agent:demo.
type apiFixture struct {
	sys *gatewaytest.System
	dsn string
	srv *httptest.Server
}

func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"),
		Keys: gatewaytest.NewKeys(t)})
	sys.AddExamples(t)
	srv := httptest.NewServer(sys.API.Handler())
	t.Cleanup(srv.Close)
	return &apiFixture{sys: sys, dsn: dsn, srv: srv}
}

// do sends one request and returns the status and body. A nil body sends
// none; a string or []byte is sent as is; anything else as JSON.
func (f *apiFixture) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, out
}

// statementResponse is gateway.Response with raw row values, so the test
// sees the JSON types on the wire.
type statementResponse struct {
	Outcome      string                       `json:"outcome"`
	RequestID    string                       `json:"request_id"`
	RowsAffected int64                        `json:"rows_affected"`
	Columns      []string                     `json:"columns"`
	Rows         []map[string]json.RawMessage `json:"rows"`
	Truncated    bool                         `json:"truncated"`
	Reasons      []string                     `json:"reasons"`
	Path         string                       `json:"path"`
	DelegationID string                       `json:"delegation_id"`
}

func (f *apiFixture) statement(t *testing.T, token, sql string) statementResponse {
	t.Helper()
	status, body := f.do(t, http.MethodPost, "/v1/statements", token, map[string]string{"target": gatewaytest.Target, "sql": sql})
	if status != http.StatusOK {
		t.Fatalf("POST /v1/statements %q: %d %s", sql, status, body)
	}
	var r statementResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if r.RequestID == "" || r.Rows == nil || r.Reasons == nil {
		t.Fatalf("response lacks request_id, rows or reasons: %s", body)
	}
	return r
}

// apiError checks that body is {"error": {"code": ..., "message": ...}}
// with both non-empty and returns the error object.
func apiError(t *testing.T, status int, body []byte, wantStatus int, wantCode string) map[string]any {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d: %s", status, wantStatus, body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("error body is not a JSON object: %q", body)
	}
	var e map[string]any
	if err := json.Unmarshal(top["error"], &e); err != nil || e == nil {
		t.Fatalf("error body has no error object: %s", body)
	}
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if code == "" || msg == "" {
		t.Fatalf("error object needs a code and a message: %s", body)
	}
	if wantCode != "" && code != wantCode {
		t.Fatalf("error code %q, want %q: %s", code, wantCode, body)
	}
	return e
}

func TestStatementsEndToEnd(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	tok := gatewaytest.AgentToken

	// An executed SELECT, with JSON-typed values.
	sel := f.statement(t, tok, "SELECT id, customer_id, status, created_at FROM orders WHERE id = 3")
	if sel.Outcome != gateway.OutcomeExecuted || sel.Path != "compiled" || len(sel.Rows) != 1 {
		t.Fatalf("select: %+v", sel)
	}
	row := sel.Rows[0]
	if string(row["id"]) != "3" {
		t.Errorf("id is %s on the wire, want the JSON number 3", row["id"])
	}
	var cust json.Number
	if err := json.Unmarshal(row["customer_id"], &cust); err != nil {
		t.Errorf("customer_id is %s, want a JSON number: %v", row["customer_id"], err)
	}
	var status string
	if err := json.Unmarshal(row["status"], &status); err != nil || status != "pending" {
		t.Errorf("status is %s, want the string pending", row["status"])
	}
	var created string
	if err := json.Unmarshal(row["created_at"], &created); err != nil {
		t.Errorf("created_at is %s, want a string", row["created_at"])
	} else if _, err := time.Parse(time.RFC3339, created); err != nil {
		t.Errorf("created_at %q is not RFC 3339: %v", created, err)
	}
	if strings.Join(sel.Columns, ",") != "id,customer_id,status,created_at" {
		t.Errorf("columns %v", sel.Columns)
	}

	// An executed UPDATE.
	before := gatewaytest.Snapshot(t, f.dsn, "orders")
	upd := f.statement(t, tok, "UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 4")
	if upd.Outcome != gateway.OutcomeExecuted || upd.RowsAffected != 1 || len(upd.Reasons) != 0 {
		t.Fatalf("update: %+v", upd)
	}
	if gatewaytest.Snapshot(t, f.dsn, "orders") == before {
		t.Fatal("an executed update changed nothing")
	}

	// Referred statements, each with its reason; none changes the target.
	referred := []struct {
		name, sql, want string
	}{
		{"column", "SELECT id, total_cents FROM orders WHERE id = 3", "total_cents"},
		{"fence", "UPDATE orders SET status = 'failed' WHERE id = 45", "fence"},
		{"row cap", "UPDATE orders SET status = 'retrying' WHERE status = 'pending' AND created_at < now() - interval '1 day'", "max_rows"},
		{"check", "UPDATE orders SET status = 'shipped' WHERE id = 5", "check"},
		{"tier B", "UPDATE customers SET name = 'John Smith' WHERE id = 3", "Tier B"},
	}
	ids := map[string]statementResponse{"select": sel, "update": upd}
	for _, c := range referred {
		ob, cb := gatewaytest.Snapshot(t, f.dsn, "orders"), gatewaytest.Snapshot(t, f.dsn, "customers")
		r := f.statement(t, tok, c.sql)
		if r.Outcome != gateway.OutcomeReferred || r.RowsAffected != 0 || len(r.Rows) != 0 {
			t.Errorf("%s: %+v", c.name, r)
		}
		if !strings.Contains(strings.Join(r.Reasons, "\n"), c.want) {
			t.Errorf("%s: reasons %q do not mention %q", c.name, r.Reasons, c.want)
		}
		if gatewaytest.Snapshot(t, f.dsn, "orders") != ob || gatewaytest.Snapshot(t, f.dsn, "customers") != cb {
			t.Errorf("%s: a referred statement changed the target", c.name)
		}
		ids[c.name] = r
	}

	// SQL that does not parse: 422 with the parser's message and a request id.
	st, body := f.do(t, http.MethodPost, "/v1/statements", tok, map[string]string{"target": "shop", "sql": "SELEC id FROM orders"})
	e := apiError(t, st, body, http.StatusUnprocessableEntity, "sql_parse_error")
	if msg := e["message"].(string); !strings.Contains(msg, "syntax error") {
		t.Errorf("parse error message %q does not carry the parser's words", msg)
	}
	rejectedID, _ := e["request_id"].(string)
	if rejectedID == "" {
		t.Fatalf("a statement that does not parse still gets a request id: %s", body)
	}

	// What no human could approve is answered as an error at once, not
	// queued: several statements, DDL, a placeholder, a locking clause.
	for sql, code := range map[string]string{
		"UPDATE orders SET status = 'failed' WHERE id = 5; DROP TABLE orders": "sql_multiple_statements",
		"DROP TABLE orders":                             "sql_statement_not_allowed",
		"SELECT id FROM orders WHERE id = $1":           "sql_parameter_not_allowed",
		"SELECT id FROM orders WHERE id = 3 FOR UPDATE": "sql_locking_clause",
	} {
		ob := gatewaytest.Snapshot(t, f.dsn, "orders")
		st, body := f.do(t, http.MethodPost, "/v1/statements", tok, map[string]string{"target": "shop", "sql": sql})
		e := apiError(t, st, body, http.StatusUnprocessableEntity, code)
		if id, _ := e["request_id"].(string); id == "" || !strings.Contains(e["message"].(string), "not queued") {
			t.Errorf("%q: %s", sql, body)
		}
		if gatewaytest.Snapshot(t, f.dsn, "orders") != ob {
			t.Errorf("%q changed the target", sql)
		}
	}
	if q, err := f.sys.Gateway.Queue(t.Context(), []string{gatewaytest.Target}); err != nil {
		t.Fatal(err)
	} else {
		for _, v := range q {
			if strings.Contains(v.SQL, "DROP") || strings.Contains(v.SQL, "$1") || strings.Contains(v.SQL, "FOR UPDATE") {
				t.Errorf("queued although no human could approve it: %s", v.SQL)
			}
		}
	}

	// GET /v1/requests/{id} for each: its own agent sees it, another gets 404.
	for name, r := range ids {
		st, body := f.do(t, http.MethodGet, "/v1/requests/"+r.RequestID, tok, nil)
		if st != http.StatusOK {
			t.Fatalf("%s: GET request: %d %s", name, st, body)
		}
		var v gateway.RequestView
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		wantStatus := gateway.StatusWaiting
		if r.Outcome == gateway.OutcomeExecuted {
			wantStatus = gateway.StatusExecuted
		}
		if v.ID != r.RequestID || v.Outcome != r.Outcome || v.Status != wantStatus || v.RowsAffected != r.RowsAffected ||
			v.Principal != gatewaytest.Agent || v.Target != gatewaytest.Target || len(v.Reasons) != len(r.Reasons) {
			t.Errorf("%s: request view %+v does not match the answer %+v", name, v, r)
		}
		if r.Outcome == gateway.OutcomeExecuted && v.MarqueID == "" {
			t.Errorf("%s: an executed request names no marque", name)
		}
		st, body = f.do(t, http.MethodGet, "/v1/requests/"+r.RequestID, gatewaytest.OtherToken, nil)
		apiError(t, st, body, http.StatusNotFound, "not_found")
	}
	st, body = f.do(t, http.MethodGet, "/v1/requests/"+rejectedID, tok, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"status":"rejected"`) {
		t.Errorf("rejected request: %d %s", st, body)
	}
	st, body = f.do(t, http.MethodGet, "/v1/requests/req_doesnotexist", tok, nil)
	apiError(t, st, body, http.StatusNotFound, "not_found")

	// The requests match the target: exactly the two executed statements
	// left receipts.
	if n := gatewaytest.Ran(t, f.dsn, f.sys.Logbook); n != 2 {
		t.Errorf("%d receipts, want 2 (the select and the update)", n)
	}
	f.sys.Verify(t)
}

func TestStatementErrors(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	tok := gatewaytest.AgentToken
	big := `{"target":"shop","sql":"SELECT '` + strings.Repeat("x", httpapi.MaxBodyBytes) + `'"}`
	cases := []struct {
		name   string
		method string
		path   string
		token  string
		body   any
		status int
		code   string
	}{
		{"no token", "POST", "/v1/statements", "", map[string]string{"target": "shop", "sql": "SELECT id FROM orders"}, 401, "unauthorized"},
		{"wrong token", "POST", "/v1/statements", "not-a-token", map[string]string{"target": "shop", "sql": "SELECT id FROM orders"}, 401, "unauthorized"},
		{"no token for a request", "GET", "/v1/requests/req_x", "", nil, 401, "unauthorized"},
		{"no token for delegations", "GET", "/v1/delegations", "", nil, 401, "unauthorized"},
		{"unknown target", "POST", "/v1/statements", tok, map[string]string{"target": "nope", "sql": "SELECT id FROM orders"}, 404, "unknown_target"},
		{"bad JSON", "POST", "/v1/statements", tok, `{"target": "shop", "sql": `, 400, "bad_json"},
		{"not an object", "POST", "/v1/statements", tok, `["shop"]`, 400, "bad_json"},
		{"trailing data", "POST", "/v1/statements", tok, `{"target":"shop","sql":"SELECT id FROM orders"} {}`, 400, "bad_json"},
		{"unknown field", "POST", "/v1/statements", tok, `{"target":"shop","sql":"SELECT id FROM orders","as":"admin"}`, 400, "bad_json"},
		{"missing sql", "POST", "/v1/statements", tok, `{"target":"shop"}`, 400, "bad_request"},
		{"body over 1 MiB", "POST", "/v1/statements", tok, big, 413, "body_too_large"},
		{"unknown endpoint", "GET", "/v1/nothing", tok, nil, 404, "not_found"},
		{"unknown endpoint without a token", "POST", "/admin", "", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/v1/statements", tok, nil, 405, "method_not_allowed"},
	}
	receipts := gatewaytest.Ran(t, f.dsn, f.sys.Logbook)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body := f.do(t, c.method, c.path, c.token, c.body)
			apiError(t, st, body, c.status, c.code)
		})
	}
	if gatewaytest.Ran(t, f.dsn, f.sys.Logbook) != receipts {
		t.Fatal("a refused HTTP request executed something")
	}
}

func TestDelegationsEndToEnd(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	cat := f.sys.Pilot.Catalog()

	type view struct {
		Delegations []scope.DelegationView `json:"delegations"`
	}
	list := func(token string) []scope.DelegationView {
		t.Helper()
		st, body := f.do(t, http.MethodGet, "/v1/delegations", token, nil)
		if st != http.StatusOK {
			t.Fatalf("GET /v1/delegations: %d %s", st, body)
		}
		var v view
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		return v.Delegations
	}
	mine := list(gatewaytest.AgentToken)
	if len(mine) != 2 {
		t.Fatalf("agent:demo sees %d delegations, want 2: %+v", len(mine), mine)
	}
	tiers := map[string]bool{}
	for _, d := range mine {
		tiers[d.Tier] = true
		if d.Grantee != gatewaytest.Agent || !d.Active || d.Revoked || d.Signer != "alice" || len(d.Rules) != 2 || d.Sentence == "" {
			t.Errorf("delegation view %+v", d)
		}
		if d.Tier == "B" && d.Fallback == "" {
			t.Errorf("a Tier B delegation shows no fallback authority: %+v", d)
		}
	}
	if !tiers["A"] || !tiers["B"] {
		t.Errorf("tiers %v, want A and B", tiers)
	}
	if other := list(gatewaytest.OtherToken); len(other) != 0 {
		t.Fatalf("agent:other sees another agent's delegations: %+v", other)
	}

	// agent:other has no delegation: its statement is referred.
	const sel = "SELECT id, status FROM orders WHERE id = 7"
	if r := f.statement(t, gatewaytest.OtherToken, sel); r.Outcome != gateway.OutcomeReferred ||
		!strings.Contains(strings.Join(r.Reasons, " "), "no delegation") {
		t.Fatalf("before its delegation: %+v", r)
	}

	// The orders delegation, granted to agent:other instead.
	forOther := []byte(strings.Replace(string(gatewaytest.Example(t, gatewaytest.Orders)), "grantee: agent:demo", "grantee: agent:other", 1))
	canon := gatewaytest.Canonical(t, forOther, cat)
	good := gatewaytest.Sign(t, keys.Grantor, canon)
	post := func(yaml []byte, sig []byte) (int, []byte) {
		return f.do(t, http.MethodPost, "/v1/delegations", "", map[string]string{"yaml": string(yaml), "signature": string(sig)})
	}

	expired := gatewaytest.WithExpiry(forOther, time.Now().Add(-time.Hour))
	tampered := []byte(strings.Replace(string(forOther), "max_rows: 20", "max_rows: 2000", 1))
	if string(tampered) == string(forOther) {
		t.Fatal("the tampering did not apply")
	}
	otherBytes := gatewaytest.Canonical(t, gatewaytest.Example(t, gatewaytest.Customers), cat)
	refused := []struct {
		name string
		yaml []byte
		sig  []byte
		want string
	}{
		{"unsigned", forOther, []byte("this is not a signature"), "signature"},
		{"signed over other bytes", forOther, gatewaytest.Sign(t, keys.Grantor, otherBytes), "signature"},
		{"tampered after signing", tampered, good, "signature"},
		{"signed by a key not in the signers file", forOther, gatewaytest.Sign(t, keys.Stranger, canon), "signature"},
		{"expired", expired, gatewaytest.Sign(t, keys.Grantor, gatewaytest.Canonical(t, expired, cat)), "past"},
		{"not a delegation", []byte("sentence: [unclosed"), good, ""},
	}
	for _, c := range refused {
		st, body := post(c.yaml, c.sig)
		e := apiError(t, st, body, http.StatusUnprocessableEntity, "delegation_refused")
		if !strings.Contains(e["message"].(string), c.want) {
			t.Errorf("%s: message %q does not mention %q", c.name, e["message"], c.want)
		}
	}
	if other := list(gatewaytest.OtherToken); len(other) != 0 {
		t.Fatalf("a refused delegation was stored: %+v", other)
	}
	if r := f.statement(t, gatewaytest.OtherToken, sel); r.Outcome != gateway.OutcomeReferred {
		t.Fatalf("a refused delegation took effect: %+v", r)
	}

	// Malformed requests.
	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"bad JSON", `{"yaml": "x", `, 400, "bad_json"},
		{"unknown field", map[string]string{"yaml": string(forOther), "signature": string(good), "signer": "alice"}, 400, "bad_json"},
		{"no signature", map[string]string{"yaml": string(forOther)}, 400, "bad_request"},
		{"body over 1 MiB", map[string]string{"yaml": string(forOther) + "#" + strings.Repeat("x", httpapi.MaxBodyBytes), "signature": string(good)}, 413, "body_too_large"},
	} {
		st, body := f.do(t, http.MethodPost, "/v1/delegations", "", c.body)
		apiError(t, st, body, c.status, c.code)
	}

	// The valid one: 201, listed for agent:other, and in force at once.
	st, body := post(forOther, good)
	if st != http.StatusCreated {
		t.Fatalf("valid delegation: %d %s", st, body)
	}
	var created struct {
		Delegation scope.DelegationView `json:"delegation"`
	}
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	if created.Delegation.Grantee != gatewaytest.Other || created.Delegation.Tier != "A" || !created.Delegation.Active {
		t.Fatalf("created %+v", created.Delegation)
	}
	other := list(gatewaytest.OtherToken)
	if len(other) != 1 || other[0].ID != created.Delegation.ID {
		t.Fatalf("agent:other's delegations after the upload: %+v", other)
	}
	if r := f.statement(t, gatewaytest.OtherToken, sel); r.Outcome != gateway.OutcomeExecuted || len(r.Rows) != 1 {
		t.Fatalf("after its delegation: %+v", r)
	}
	// The same upload again is a no-op.
	if st, body := post(forOther, good); st != http.StatusCreated || len(list(gatewaytest.OtherToken)) != 1 {
		t.Fatalf("second upload: %d %s", st, body)
	}
	if len(list(gatewaytest.AgentToken)) != 2 {
		t.Fatal("agent:demo's delegations changed")
	}
	f.sys.Verify(t)
}

// TestLogbookDownIsServiceUnavailable: with the logbook writer stopped, a
// statement is answered 503 and nothing runs.
func TestLogbookDownIsServiceUnavailable(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	before := gatewaytest.Snapshot(t, f.dsn, "orders")
	f.sys.StopLogbook(t)
	st, body := f.do(t, http.MethodPost, "/v1/statements", gatewaytest.AgentToken,
		map[string]string{"target": "shop", "sql": "UPDATE orders SET status = 'retrying' WHERE id = 3"})
	apiError(t, st, body, http.StatusServiceUnavailable, "logbook_unavailable")
	if gatewaytest.Snapshot(t, f.dsn, "orders") != before || gatewaytest.Ran(t, f.dsn, f.sys.Logbook) != 0 {
		t.Fatal("a statement ran while the logbook could not be written")
	}
	y, sig := f.sys.SignedExample(t, gatewaytest.Orders)
	forOther := strings.Replace(string(y), "grantee: agent:demo", "grantee: agent:other", 1)
	sig = gatewaytest.Sign(t, f.sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, []byte(forOther), f.sys.Pilot.Catalog()))
	st, body = f.do(t, http.MethodPost, "/v1/delegations", "", map[string]string{"yaml": forOther, "signature": string(sig)})
	apiError(t, st, body, http.StatusServiceUnavailable, "logbook_unavailable")
	f.sys.Verify(t)
}

// TestReadyzHidesTargetError: GET /readyz needs no token, and
// answered a failed ping with the error itself: the target's own error
// text (its FATAL message, database and user names), which invariant 10
// keeps for humans. The answer now names the part that does not answer;
// the log keeps why.
// Found in the hostile review of the HTTP API (rv-http).
func TestReadyzHidesTargetError(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.Database
	cfg.Database = "postgres"
	admin, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := pgx.Identifier{db}.Sanitize()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true") })
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", db); err != nil {
		t.Fatal(err)
	}
	var st int
	var body []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		st, body = f.do(t, http.MethodGet, "/readyz", "", nil)
		if st != http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	apiError(t, st, body, http.StatusServiceUnavailable, "not_ready")
	for _, leak := range []string{db, "accepting connections", "SQLSTATE", "FATAL", cfg.User} {
		if leak != "" && strings.Contains(string(body), leak) {
			t.Errorf("GET /readyz shows the target's own error text (%q): %s", leak, body)
		}
	}
	if !strings.Contains(string(body), "target shop") {
		t.Errorf("GET /readyz does not say which part does not answer: %s", body)
	}
}
