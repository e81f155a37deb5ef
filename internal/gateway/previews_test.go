package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// previewed asks for a referred request's preview, as a human opening it
// does, and returns the request as a human sees it.
func (f *fixture) previewed(t *testing.T, id string) *gateway.RequestView {
	t.Helper()
	v, err := f.sys.Gateway.Preview(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// agentGET is GET /v1/requests/{id} as the agent, over HTTP.
func (f *fixture) agentGET(t *testing.T, id string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/v1/requests/"+id, nil)
	r.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
	w := httptest.NewRecorder()
	f.sys.API.Handler().ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

var perRun = regexp.MustCompile(`req_[a-z0-9]+|"(created|updated)":"[^"]*"`)

// Regression for issue 9, class 1, and issue 22: a referred statement
// used to be rehearsed, unfenced, after the agent was answered; whether
// the rehearsal succeeded, the locks it held and the sequence values it
// drew all depended on rows the agent may not read. Now nothing of it
// runs until a human asks; the preview a human asks for is read-only and
// only humans see it, or why there is none.
func TestReferralRunsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// email is listed by no rule. Is there a customer whose email starts
	// with 'ada'? The CASE divides by zero exactly when there is.
	oracle := func(prefix string) string {
		return "SELECT CASE WHEN (SELECT count(*) FROM customers WHERE email LIKE '" + prefix +
			"%') > 0 THEN 1 / (id - 1) ELSE 1 END AS bit FROM orders WHERE id = 1"
	}
	yes := f.submit(t, gatewaytest.Agent, oracle("ada"))
	no := f.submit(t, gatewaytest.Agent, oracle("zzz"))
	for _, r := range []*gateway.Response{yes, no} {
		if r.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%+v, want referred", r)
		}
	}
	// Nothing ran: neither has a preview until a human asks.
	time.Sleep(200 * time.Millisecond)
	for _, r := range []*gateway.Response{yes, no} {
		if v := f.view(t, r.RequestID); v.PreviewSHA256 != "" || len(v.Preview) != 0 {
			t.Fatalf("request %s has a preview nobody asked for", v.ID)
		}
	}
	// The humans' view, once they ask: the statement that divides by zero
	// cannot be previewed, the other can.
	if v := f.previewed(t, no.RequestID); v.PreviewSHA256 == "" {
		t.Fatalf("the approver sees no preview of the statement that runs: %s", v.PreviewError)
	}
	if v := f.previewed(t, yes.RequestID); v.PreviewSHA256 != "" || !strings.Contains(v.PreviewError, "division by zero") {
		t.Fatalf("the statement dividing by zero: preview %q, error %q", v.PreviewSHA256, v.PreviewError)
	}
	// The agent's view: identical but for the per-run ids and times, and
	// nothing of any preview.
	codeYes, bodyYes := f.agentGET(t, yes.RequestID)
	codeNo, bodyNo := f.agentGET(t, no.RequestID)
	if codeYes != http.StatusOK || codeNo != http.StatusOK {
		t.Fatalf("GET: %d %d", codeYes, codeNo)
	}
	for _, b := range []string{bodyYes, bodyNo} {
		if strings.Contains(b, "preview") || strings.Contains(b, "detail") {
			t.Fatalf("the agent sees the preview or the detail: %s", b)
		}
	}
	norm := func(s string) string {
		s = perRun.ReplaceAllString(s, "")
		return strings.ReplaceAll(s, "ada", "zzz")
	}
	if norm(bodyYes) != norm(bodyNo) {
		t.Fatalf("the agent can tell the two apart:\n%s\n%s", bodyYes, bodyNo)
	}
	// And the answers themselves.
	ja, _ := json.Marshal(yes)
	jb, _ := json.Marshal(no)
	if norm(string(ja)) != norm(string(jb)) {
		t.Fatalf("the answers differ:\n%s\n%s", ja, jb)
	}
}

// TestReferralTouchesNoState (issue 22, findings 1 and 2): a referred
// INSERT whose row count is a hidden value drew that many sequence values
// when it was rehearsed, and a referred UPDATE whose rows a hidden
// predicate chose locked them while its slow RETURNING ran. Neither may
// run at all: after the agent is answered the sequence has not moved and
// no row of the table is locked; a human's preview moves and locks
// nothing either.
func TestReferralTouchesNoState(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	admin := f.conn(t)
	if _, err := admin.Exec(ctx, `CREATE TABLE secrets (id int PRIMARY KEY, secret text NOT NULL);
		INSERT INTO secrets VALUES (1, 'K');
		CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	f.sys.RefreshCatalog(t)
	seq := func() (int64, bool) {
		var last int64
		var called bool
		if err := admin.QueryRow(ctx, "SELECT last_value, is_called FROM notes_id_seq").Scan(&last, &called); err != nil {
			t.Fatal(err)
		}
		return last, called
	}
	locked := func() int {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname IN ('orders', 'notes') AND l.mode IN ('RowExclusiveLock', 'RowShareLock') AND l.pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ins := f.submit(t, gatewaytest.Agent, "INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, (SELECT ascii(secret) FROM secrets WHERE id = 1))")
	upd := f.submit(t, gatewaytest.Agent, "UPDATE orders SET status = status WHERE customer_id IN (SELECT id FROM customers WHERE email LIKE 'a%') "+
		"RETURNING (SELECT count(*) FROM generate_series(1, 3000000))")
	for _, r := range []*gateway.Response{ins, upd} {
		if r.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%+v, want referred", r)
		}
	}
	// A rehearsal ran within milliseconds of the answer and held its
	// locks for as long as its RETURNING took: watch for a while.
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n := locked(); n != 0 {
			t.Fatalf("%d row-level locks on the tables a referred statement names, held by nobody a human asked", n)
		}
	}
	if last, called := seq(); called {
		t.Fatalf("a referred INSERT drew sequence values: notes_id_seq is at %d", last)
	}
	// A human asks: the previews read, and move nothing.
	for _, r := range []*gateway.Response{ins, upd} {
		v := f.previewed(t, r.RequestID)
		if v.PreviewSHA256 == "" {
			t.Fatalf("no preview of %s: %s", r.RequestID, v.PreviewError)
		}
	}
	if pv := previewOf(t, f.view(t, ins.RequestID)); pv.Rows != 'K' || pv.Defaults["id"] == "" {
		t.Fatalf("the INSERT's preview %+v, want %d rows and the id's default shown", pv, 'K')
	}
	if last, called := seq(); called {
		t.Fatalf("a preview drew sequence values: notes_id_seq is at %d", last)
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&n); err != nil || n != 0 {
		t.Fatalf("notes holds %d rows (%v)", n, err)
	}
}
