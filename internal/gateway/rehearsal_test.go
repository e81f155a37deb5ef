package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// rehearsed waits for a referred request's background rehearsal and
// returns the request as a human sees it.
func (f *fixture) rehearsed(t *testing.T, id string) *gateway.RequestView {
	t.Helper()
	return f.sys.WaitRehearsed(t, id)
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

// Regression for issue 9, class 1: the rehearsal of a referred statement
// runs it unfenced, so whether it succeeds depends on rows the agent may
// not read. It was run before the answer, and GET /v1/requests/{id} showed
// rehearsal_sha256 when it succeeded and nothing when it failed: an
// oracle, one bit per request, on any condition over unlisted columns.
// Now the answer comes first and nothing of the rehearsal reaches the
// agent; the approver still sees it.
func TestReferredRehearsalIsInvisible(t *testing.T) {
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
	// The humans' view: the statement that divides by zero could not be
	// rehearsed, the other was (wait for the background worker).
	if v := f.rehearsed(t, no.RequestID); v.RehearsalSHA256 == "" {
		t.Fatal("the approver sees no rehearsal of the statement that runs")
	}
	if v := f.view(t, yes.RequestID); v.RehearsalSHA256 != "" {
		t.Fatal("a statement dividing by zero was rehearsed")
	}
	// The agent's view: identical but for the per-run ids and times, and
	// nothing of any rehearsal.
	codeYes, bodyYes := f.agentGET(t, yes.RequestID)
	codeNo, bodyNo := f.agentGET(t, no.RequestID)
	if codeYes != http.StatusOK || codeNo != http.StatusOK {
		t.Fatalf("GET: %d %d", codeYes, codeNo)
	}
	for _, b := range []string{bodyYes, bodyNo} {
		if strings.Contains(b, "rehearsal") || strings.Contains(b, "detail") {
			t.Fatalf("the agent sees the rehearsal or the detail: %s", b)
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
