package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// send sends one request with headers and returns the whole answer.
func (f *apiFixture) send(t *testing.T, method, path string, hdr map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

func errorCode(t *testing.T, body []byte) (string, string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return e.Error.Code, e.Error.Message
}

// TestHTTPConventions: 405 with Allow for a known path and a wrong method,
// 415 for a body that is not JSON, X-Request-Id on every answer (echoed
// when sane, made otherwise), and error messages without Go prefixes.
func TestHTTPConventions(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	bearer := map[string]string{"Authorization": "Bearer " + gatewaytest.AgentToken}

	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/statements", "POST"},
		{"GET", "/v1/statements", "POST"},
		{"PUT", "/v1/delegations", "GET, HEAD, POST"},
		{"POST", "/v1/requests/req_x/approval", "GET, HEAD"},
		{"POST", "/v1/openapi.json", "GET, HEAD"},
	} {
		resp, body := f.send(t, c.method, c.path, bearer, "")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q: %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow, body)
		}
		if code, _ := errorCode(t, body); code != "method_not_allowed" {
			t.Errorf("%s %s: code %s", c.method, c.path, code)
		}
	}
	if resp, _ := f.send(t, "GET", "/v1/nothing", bearer, ""); resp.StatusCode != 404 || resp.Header.Get("Allow") != "" {
		t.Errorf("unknown path: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}

	stmt := `{"target":"shop","sql":"SELECT id FROM orders WHERE status = 'pending'"}`
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x", "application/jsonx"} {
		resp, body := f.send(t, "POST", "/v1/statements", map[string]string{"Authorization": bearer["Authorization"], "Content-Type": ct}, stmt)
		if code, _ := errorCode(t, body); resp.StatusCode != 415 || code != "unsupported_media_type" {
			t.Errorf("Content-Type %s: %d %s", ct, resp.StatusCode, body)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/merge-patch+json", ""} {
		h := map[string]string{"Authorization": bearer["Authorization"]}
		if ct != "" {
			h["Content-Type"] = ct
		}
		if resp, body := f.send(t, "POST", "/v1/statements", h, stmt); resp.StatusCode != 200 {
			t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, body)
		}
	}

	// The request id: echoed when sane, made when absent or not sane.
	made := regexp.MustCompile(`^hrq_[a-z2-7]{24}$`)
	for _, c := range []struct{ sent, want string }{
		{"abc-123.X:9", "abc-123.X:9"},
		{"", ""},
		{"has space", ""},
		{strings.Repeat("a", 129), ""},
		{"<script>", ""},
	} {
		h := map[string]string{}
		if c.sent != "" {
			h[httpapi.RequestIDHeader] = c.sent
		}
		for _, path := range []string{"/healthz", "/v1/nothing", "/v1/delegations"} {
			resp, _ := f.send(t, "GET", path, h, "")
			got := resp.Header.Get(httpapi.RequestIDHeader)
			if c.want != "" && got != c.want || c.want == "" && !made.MatchString(got) {
				t.Errorf("%s sent %q: X-Request-Id %q", path, c.sent, got)
			}
		}
	}

	// No Go package prefix reaches a message.
	prefix := regexp.MustCompile(`(^|: )(gateway|store|httpapi|signing|sqlcheck|queue|acts|audit|json|pilot|bound|marque|logbook): `)
	for _, c := range []struct {
		method, path, body string
		hdr                map[string]string
	}{
		{"POST", "/v1/statements", `{"target":"bank","sql":"SELECT 1"}`, bearer},
		{"GET", "/v1/tables?target=bank", "", bearer},
		{"POST", "/v1/statements", `{"target":"shop","sql":1}`, bearer},
		{"GET", "/v1/queue", "", map[string]string{"Authorization": "Harbormaster-SSH t=1,sig=AAAA"}},
		{"POST", "/v1/requests/req_nope/deny", `{"act":"{}","signature":"x"}`, nil},
		{"POST", "/v1/delegations/dlg_nope/revoke", `{"act":"{}","signature":"x"}`, nil},
	} {
		_, body := f.send(t, c.method, c.path, c.hdr, c.body)
		code, msg := errorCode(t, body)
		if msg == "" || prefix.MatchString(msg) {
			t.Errorf("%s %s: %s %q", c.method, c.path, code, msg)
		}
	}
}

// TestPagination: every list answers pages of ?limit items with an opaque
// next_cursor that walks the whole list once, in order.
func TestPagination(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	bearer := map[string]string{"Authorization": "Bearer " + gatewaytest.AgentToken}
	// The whole lists, for comparison.
	var all struct {
		Delegations []scope.DelegationView `json:"delegations"`
	}
	_, body := f.send(t, "GET", "/v1/delegations", bearer, "")
	if err := json.Unmarshal(body, &all); err != nil || len(all.Delegations) < 2 {
		t.Fatalf("delegations: %v %s", err, body)
	}
	var seen []string
	cursor := ""
	for i := 0; ; i++ {
		path := "/v1/delegations?limit=1"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp, body := f.send(t, "GET", path, bearer, "")
		var p httpapi.DelegationsPage
		if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != 200 || len(p.Delegations) != 1 {
			t.Fatalf("page %d: %d %s", i, resp.StatusCode, body)
		}
		seen = append(seen, p.Delegations[0].ID)
		if cursor = p.NextCursor; cursor == "" {
			break
		}
		if strings.Contains(cursor, "dlg_") {
			t.Fatalf("the cursor is not opaque: %s", cursor)
		}
	}
	var want []string
	for _, d := range all.Delegations {
		want = append(want, d.ID)
	}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("pages %v, whole list %v", seen, want)
	}

	var tables scope.TablesView
	_, body = f.send(t, "GET", "/v1/tables?limit=1", bearer, "")
	if err := json.Unmarshal(body, &tables); err != nil || len(tables.Tables) != 1 || tables.NextCursor == "" {
		t.Fatalf("tables page: %s", body)
	}
	_, body = f.send(t, "GET", "/v1/tables?limit=1&cursor="+tables.NextCursor, bearer, "")
	var second scope.TablesView
	if err := json.Unmarshal(body, &second); err != nil || len(second.Tables) != 1 || second.Tables[0].Table == tables.Tables[0].Table {
		t.Fatalf("second tables page: %s", body)
	}

	for _, bad := range []string{"limit=0", "limit=501", "limit=x", "cursor=%21%21", "cursor=YWJj"} {
		resp, body := f.send(t, "GET", "/v1/delegations?"+bad, bearer, "")
		code, _ := errorCode(t, body)
		if resp.StatusCode != 400 || (code != "bad_request" && code != "bad_cursor") {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
}

// TestIdempotentStatements: a retry with the same key and body gets the
// first answer and runs nothing; another body under the key is 422; the key
// is the principal's own; concurrent requests under one key run once.
func TestIdempotentStatements(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	post := func(token, key, body string) (*http.Response, []byte) {
		return f.send(t, "POST", "/v1/statements", map[string]string{"Authorization": "Bearer " + token,
			"Content-Type": "application/json", httpapi.IdempotencyKeyHeader: key}, body)
	}
	update := `{"target":"shop","sql":"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3 RETURNING id, status"}`
	receipts := gatewaytest.Ran(t, f.dsn, f.sys.Logbook)
	resp1, first := post(gatewaytest.AgentToken, "k-1", update)
	if resp1.StatusCode != 200 || !strings.Contains(string(first), `"outcome":"executed"`) {
		t.Fatalf("first: %d %s", resp1.StatusCode, first)
	}
	resp2, again := post(gatewaytest.AgentToken, "k-1", update)
	if resp2.StatusCode != 200 || !bytes.Equal(first, again) || resp2.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("retry: %d %s (first %s)", resp2.StatusCode, again, first)
	}
	if n := gatewaytest.Ran(t, f.dsn, f.sys.Logbook); n != receipts+1 {
		t.Fatalf("%d receipts after a retry, want %d: it ran twice", n, receipts+1)
	}
	resp3, body := post(gatewaytest.AgentToken, "k-1", strings.Replace(update, "id = 3", "id = 4", 1))
	if code, _ := errorCode(t, body); resp3.StatusCode != 422 || code != "idempotency_key_reused" {
		t.Fatalf("another body under the key: %d %s", resp3.StatusCode, body)
	}
	// Another agent's same key is its own: its request runs (and is
	// referred: it has no delegation), and never sees the first answer.
	resp4, other := post(gatewaytest.OtherToken, "k-1", update)
	if resp4.StatusCode != 200 || bytes.Equal(other, first) || resp4.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("another principal: %d %s", resp4.StatusCode, other)
	}
	if resp, body := post(gatewaytest.AgentToken, "bad key", update); resp.StatusCode != 400 {
		t.Fatalf("a key with a space: %d %s", resp.StatusCode, body)
	}

	// Eight at once under one key: one runs; every other answer is the
	// replay or 409 in progress.
	referred := `{"target":"shop","sql":"DELETE FROM orders WHERE id = 8"}`
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	bodies := make([][]byte, 8)
	replayed := make([]bool, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := post(gatewaytest.AgentToken, "k-race", referred)
			statuses[i], bodies[i], replayed[i] = resp.StatusCode, b, resp.Header.Get("Idempotency-Replayed") == "true"
		}()
	}
	wg.Wait()
	var ran int
	var ids = map[string]bool{}
	for i := range 8 {
		switch {
		case statuses[i] == 200 && !replayed[i]:
			ran++
			fallthrough
		case statuses[i] == 200:
			var r gateway.Response
			_ = json.Unmarshal(bodies[i], &r)
			ids[r.RequestID] = true
		case statuses[i] == 409:
			if code, _ := errorCode(t, bodies[i]); code != "idempotency_in_progress" {
				t.Errorf("409 %s", bodies[i])
			}
		default:
			t.Errorf("concurrent %d: %d %s", i, statuses[i], bodies[i])
		}
	}
	if ran != 1 || len(ids) != 1 {
		t.Fatalf("%d requests ran under one key, %d request ids; want 1 and 1", ran, len(ids))
	}
	q, err := f.sys.Gateway.Queue(t.Context(), []string{gatewaytest.Target})
	if err != nil {
		t.Fatal(err)
	}
	var queued int
	for _, v := range q {
		if v.SQL == "DELETE FROM orders WHERE id = 8" {
			queued++
		}
	}
	if queued != 1 {
		t.Fatalf("%d requests queued under one key, want 1", queued)
	}
}

// TestIdempotentActs: a signed denial retried under its key answers as
// the first time (not 409 "not waiting"), from any node on the store.
func TestIdempotentActs(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	d := f.statement(t, gatewaytest.AgentToken, "DELETE FROM orders WHERE id = 7")
	view, err := f.sys.Gateway.Request(t.Context(), d.RequestID, "")
	if err != nil {
		t.Fatal(err)
	}
	denial, err := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: d.RequestID, Target: gatewaytest.Target,
		StatementSHA256: marque.StatementHash(view.CanonicalSQL), Reason: "never delete orders"})
	if err != nil {
		t.Fatal(err)
	}
	dsig, err := f.sys.Opts.Keys.Approver.Sign(signing.NamespaceDenial, denial)
	if err != nil {
		t.Fatal(err)
	}
	body := string(mustJSON(t, map[string]string{"act": string(denial), "signature": string(dsig)}))
	hdr := map[string]string{"Content-Type": "application/json", httpapi.IdempotencyKeyHeader: "deny-7"}
	path := "/v1/requests/" + d.RequestID + "/deny"
	resp1, first := f.send(t, "POST", path, hdr, body)
	if resp1.StatusCode != 200 || !strings.Contains(string(first), `"status":"denied"`) {
		t.Fatalf("deny: %d %s", resp1.StatusCode, first)
	}
	other := f.sys.OtherAPI(t).Handler()
	req, _ := http.NewRequest("POST", path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := newRecorder()
	other.ServeHTTP(rec, req)
	if rec.status != 200 || !bytes.Equal(rec.body.Bytes(), first) {
		t.Fatalf("the retry through another node: %d %s", rec.status, rec.body.String())
	}
	// Without the key, the same act is refused as not waiting.
	if resp, b := f.send(t, "POST", path, map[string]string{"Content-Type": "application/json"}, body); resp.StatusCode != 409 {
		t.Fatalf("the act again without its key: %d %s", resp.StatusCode, b)
	}
}

type recorder struct {
	hdr    http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder                    { return &recorder{hdr: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.hdr }
func (r *recorder) WriteHeader(s int)           { r.status = s }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

// TestRequestIDInLogs: the log lines about a request carry its
// X-Request-Id as http_request_id.
func TestRequestIDInLogs(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	api, err := httpapi.New(f.sys.Gateway, httpapi.Config{Logger: log,
		Agents: []httpapi.Agent{{Principal: gatewaytest.Agent, TokenSHA256: httpapi.HashToken(gatewaytest.AgentToken)}}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/v1/statements", strings.NewReader(`{"target":"shop","sql":"SELECT id FROM orders WHERE status = 'pending'"}`))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
	req.Header.Set(httpapi.RequestIDHeader, "trace-42")
	w := httptest.NewRecorder()
	api.Handler().ServeHTTP(w, req)
	if w.Code != 200 || w.Header().Get(httpapi.RequestIDHeader) != "trace-42" {
		t.Fatalf("%d %q: %s", w.Code, w.Header().Get(httpapi.RequestIDHeader), w.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	var statement, access bool
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if m["http_request_id"] != "trace-42" {
			t.Errorf("a log line without the request id: %s", line)
		}
		statement = statement || m["msg"] == "statement"
		access = access || m["msg"] == "http" && m["status"] == float64(200)
	}
	if !statement || !access {
		t.Fatalf("the statement and answer lines are missing:\n%s", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
