package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// signedAuth is the Authorization header of a request signed by key in
// namespace at the given time.
func signedAuth(t *testing.T, key *signing.PrivateKey, namespace, method, pathAndQuery string, at time.Time, body []byte) string {
	t.Helper()
	h, err := key.SignRequest(namespace, method, pathAndQuery, at, body)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// human sends a request with an explicit Authorization header (none when
// empty) and raw body, and returns the status and body.
func (f *apiFixture) human(t *testing.T, method, path, auth string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
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
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("%s %s: 401 without WWW-Authenticate", method, path)
	}
	return resp.StatusCode, out
}

// signedAs sends a request signed now by key in namespace.
func (f *apiFixture) signedAs(t *testing.T, key *signing.PrivateKey, namespace, method, path string, body []byte) (int, []byte) {
	t.Helper()
	return f.human(t, method, path, signedAuth(t, key, namespace, method, path, time.Now(), body), body)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHumanRequestSignatures: the queue and a request's full view need a
// request signed now, for this method, path and body, in the session
// namespace, by a key the signers file lists for the target. The agent's
// view of a request never carries the preview.
func TestHumanRequestSignatures(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	waiting := f.statement(t, gatewaytest.AgentToken, "UPDATE customers SET name = 'John Smith' WHERE id = 3")
	executed := f.statement(t, gatewaytest.AgentToken, "SELECT id, status FROM orders WHERE id = 3")
	if waiting.Outcome != gateway.OutcomeReferred || executed.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("setup: %+v %+v", waiting, executed)
	}

	// Bob (and alice, an operator with a session namespace) see the queue.
	for _, who := range []struct {
		name string
		key  *signing.PrivateKey
	}{{"bob", keys.Approver}, {"alice", keys.Grantor}} {
		st, body := f.signedAs(t, who.key, signing.NamespaceSession, http.MethodGet, "/v1/queue", nil)
		if st != http.StatusOK {
			t.Fatalf("%s: GET /v1/queue: %d %s", who.name, st, body)
		}
		var q struct {
			Requests []gateway.RequestView `json:"requests"`
			Viewer   string                `json:"viewer"`
		}
		if err := json.Unmarshal(body, &q); err != nil {
			t.Fatal(err)
		}
		if q.Viewer != who.name || len(q.Requests) != 1 || q.Requests[0].ID != waiting.RequestID || q.Requests[0].Status != gateway.StatusWaiting {
			t.Fatalf("%s: queue %s, want only %s", who.name, body, waiting.RequestID)
		}
	}

	now := time.Now()
	refused := []struct {
		name string
		auth string
	}{
		{"unsigned", ""},
		{"an agent token", "Bearer " + gatewaytest.AgentToken},
		{"the wrong namespace", signedAuth(t, keys.Approver, signing.NamespaceApproval, "GET", "/v1/queue", now, nil)},
		{"bob's switch namespace, which he lacks", signedAuth(t, keys.Approver, signing.NamespaceSwitch, "GET", "/v1/queue", now, nil)},
		{"a key not in the signers file", signedAuth(t, keys.Stranger, signing.NamespaceSession, "GET", "/v1/queue", now, nil)},
		{"signed for another path", signedAuth(t, keys.Approver, signing.NamespaceSession, "GET", "/v1/queue?all=1", now, nil)},
		{"signed for another method", signedAuth(t, keys.Approver, signing.NamespaceSession, "POST", "/v1/queue", now, nil)},
		{"signed over a body", signedAuth(t, keys.Approver, signing.NamespaceSession, "GET", "/v1/queue", now, []byte("{}"))},
		{"signed 61s ago", signedAuth(t, keys.Approver, signing.NamespaceSession, "GET", "/v1/queue", now.Add(-61*time.Second), nil)},
		{"signed 61s ahead", signedAuth(t, keys.Approver, signing.NamespaceSession, "GET", "/v1/queue", now.Add(61*time.Second), nil)},
		{"a mangled signature", strings.Replace(signedAuth(t, keys.Approver, signing.NamespaceSession, "GET", "/v1/queue", now, nil), "sig=", "sig=AAAA", 1)},
		{"no signature", signing.RequestScheme + " t=" + strconv.FormatInt(now.Unix(), 10)},
	}
	for _, c := range refused {
		st, body := f.human(t, http.MethodGet, "/v1/queue", c.auth, nil)
		apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
		if strings.Contains(string(body), waiting.RequestID) {
			t.Fatalf("%s: the refusal shows the queue: %s", c.name, body)
		}
	}

	// A body changed after signing: the switch stays off.
	signedBody := mustJSON(t, map[string]any{"name": "tier_b", "target": "", "on": false})
	sentBody := mustJSON(t, map[string]any{"name": "tier_b", "target": "", "on": true})
	auth := signedAuth(t, keys.Grantor, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", time.Now(), signedBody)
	st, body := f.human(t, http.MethodPost, "/v1/switches", auth, sentBody)
	apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
	if n := len(f.sys.Switches.Snapshot()); n != 0 {
		t.Fatalf("a tampered request set a switch: %+v", f.sys.Switches.Snapshot())
	}

	// A request's full view: the human's GET computes the preview (a
	// human asked), the agent's never shows it.
	path := "/v1/requests/" + waiting.RequestID
	st, body = f.signedAs(t, keys.Approver, signing.NamespaceSession, http.MethodGet, path, nil)
	if st != http.StatusOK {
		t.Fatalf("human GET %s: %d %s", path, st, body)
	}
	var hv gateway.RequestView
	if err := json.Unmarshal(body, &hv); err != nil {
		t.Fatal(err)
	}
	var pv pilot.Preview
	if len(hv.Preview) == 0 || json.Unmarshal(hv.Preview, &pv) != nil || pv.Digest == "" || pv.Digest != hv.PreviewSHA256 ||
		pv.Rows != 1 || len(pv.Before) != 1 {
		t.Fatalf("the human's view lacks the preview: %s", body)
	}
	st, body = f.do(t, http.MethodGet, path, gatewaytest.AgentToken, nil)
	if st != http.StatusOK {
		t.Fatalf("agent GET %s: %d %s", path, st, body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["preview"]; ok || strings.Contains(string(body), "Jonh Smith") {
		t.Fatalf("the agent's view carries the preview: %s", body)
	}
	if raw["id"] == nil || string(raw["status"]) != `"waiting"` {
		t.Fatalf("the agent's view: %s", body)
	}
	for _, c := range []struct {
		name string
		auth string
	}{
		{"stranger", signedAuth(t, keys.Stranger, signing.NamespaceSession, "GET", path, time.Now(), nil)},
		{"wrong namespace", signedAuth(t, keys.Approver, signing.NamespaceDenial, "GET", path, time.Now(), nil)},
		{"another request's path", signedAuth(t, keys.Approver, signing.NamespaceSession, "GET", "/v1/requests/"+executed.RequestID, time.Now(), nil)},
	} {
		st, body := f.human(t, http.MethodGet, path, c.auth, nil)
		apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
		if strings.Contains(string(body), "Jonh Smith") {
			t.Fatalf("%s: the refusal shows the preview", c.name)
		}
	}
	// The proposed approval needs a session too.
	st, body = f.human(t, http.MethodGet, path+"/approval", "", nil)
	apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
}

// TestSwitchesOverHTTP: a switch is flipped by an operator's signed
// request (alice, switch namespace), never by bob, never by a signed
// request replayed after the skew window; each flip is logged and in force
// on the node at once.
func TestSwitchesOverHTTP(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	flip := func(key *signing.PrivateKey, target string, on bool, at time.Time) (int, []byte) {
		body := mustJSON(t, map[string]any{"name": "tier_b", "target": target, "on": on})
		return f.human(t, http.MethodPost, "/v1/switches", signedAuth(t, key, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", at, body), body)
	}
	tierB := func() bool {
		st, body := f.do(t, http.MethodGet, "/v1/switches", "", nil)
		if st != http.StatusOK {
			t.Fatalf("GET /v1/switches: %d %s", st, body)
		}
		var v struct {
			TierB map[string]bool `json:"tier_b"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		if on, _ := f.sys.Switches.TierBOn(gatewaytest.Target); on != v.TierB[gatewaytest.Target] {
			t.Fatalf("GET /v1/switches says %v, the poller %v", v.TierB, on)
		}
		return v.TierB[gatewaytest.Target]
	}
	if tierB() {
		t.Fatal("Tier B is on by default")
	}

	// Bob may not flip switches; nor may a stranger.
	st, body := flip(keys.Approver, "", true, time.Now())
	apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
	st, body = flip(keys.Stranger, gatewaytest.Target, true, time.Now())
	apiError(t, st, body, http.StatusUnauthorized, "unauthorized")

	// Alice turns on the deployment, then the target.
	for _, target := range []string{"", gatewaytest.Target} {
		st, body := flip(keys.Grantor, target, true, time.Now())
		if st != http.StatusOK {
			t.Fatalf("alice flips %q: %d %s", target, st, body)
		}
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil || out["by"] != "alice" || out["on"] != true {
			t.Fatalf("answer %s", body)
		}
	}
	if !tierB() {
		t.Fatal("Tier B is off after alice switched the deployment and the target on")
	}

	// The exact request alice signed 61s ago, replayed now, is refused.
	old := time.Now().Add(-61 * time.Second)
	body = mustJSON(t, map[string]any{"name": "tier_b", "target": gatewaytest.Target, "on": false})
	auth := signedAuth(t, keys.Grantor, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", old, body)
	st, out := f.human(t, http.MethodPost, "/v1/switches", auth, body)
	apiError(t, st, out, http.StatusUnauthorized, "unauthorized")
	if !tierB() {
		t.Fatal("a replayed request switched Tier B off")
	}

	for _, c := range []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"unknown switch", mustJSON(t, map[string]any{"name": "tier_c", "on": true}), 400, "bad_request"},
		{"unknown target", mustJSON(t, map[string]any{"name": "tier_b", "target": "bank", "on": true}), 404, "unknown_target"},
		{"unknown field", []byte(`{"name":"tier_b","on":true,"force":true}`), 400, "bad_json"},
	} {
		auth := signedAuth(t, keys.Grantor, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", time.Now(), c.body)
		st, out := f.human(t, http.MethodPost, "/v1/switches", auth, c.body)
		apiError(t, st, out, c.status, c.code)
	}

	// Alice turns the deployment off: off at once.
	if st, body := flip(keys.Grantor, "", false, time.Now()); st != http.StatusOK {
		t.Fatalf("off: %d %s", st, body)
	}
	if tierB() {
		t.Fatal("Tier B still on after the deployment switch went off")
	}
	es, err := f.sys.Logbook.Find(t.Context(), logbook.Query{Kind: "switch"})
	if err != nil || len(es) != 3 {
		t.Fatalf("%d switch entries, want 3 (on, on, off): %v", len(es), err)
	}
	for _, e := range es {
		if e.Subjects["signer"] != "alice" {
			t.Fatalf("switch entry signed by %q", e.Subjects["signer"])
		}
	}
	f.sys.Verify(t)
}

// keygenSign signs msg with the real ssh-keygen -Y sign.
func keygenSign(t *testing.T, pem []byte, namespace string, msg []byte) []byte {
	t.Helper()
	bin, err := exec.LookPath("ssh-keygen")
	if err != nil {
		if _, serr := os.Stat("/usr/bin/ssh-keygen"); serr == nil {
			bin = "/usr/bin/ssh-keygen"
		} else if os.Getenv("CI") == "true" {
			t.Fatalf("ssh-keygen not found: %v", err)
		} else {
			t.Skipf("ssh-keygen not found: %v", err)
		}
	}
	dir := t.TempDir()
	key, file := filepath.Join(dir, "id_ed25519"), filepath.Join(dir, "act")
	if err := os.WriteFile(key, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-Y", "sign", "-n", namespace, "-f", key, file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// TestApprovalOverHTTP follows the CLI's approve flow by hand: the agent
// long-polls its referred request; bob fetches the proposed approval with
// a signed session request, checks it against the request he was shown,
// signs it with ssh-keygen and posts it; the statement runs once and the
// agent's long-poll returns. Denial and revocation go the same way.
func TestApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	r := f.statement(t, gatewaytest.AgentToken, "UPDATE customers SET name = 'Maria Garcia' WHERE id = 7")
	if r.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v", r)
	}
	before := gatewaytest.Snapshot(t, f.dsn, "customers")

	// The agent long-polls.
	type polled struct {
		status int
		body   []byte
		took   time.Duration
		at     time.Time
	}
	polls := make(chan polled, 1)
	go func() {
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, f.srv.URL+"/v1/requests/"+r.RequestID+"?wait=5s", nil)
		req.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			polls <- polled{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		polls <- polled{resp.StatusCode, b, time.Since(start), time.Now()}
	}()

	// Bob fetches the proposal.
	path := "/v1/requests/" + r.RequestID + "/approval"
	st, body := f.signedAs(t, keys.Approver, signing.NamespaceSession, http.MethodGet, path, nil)
	if st != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, st, body)
	}
	var prop struct {
		Approval string              `json:"approval"`
		Request  gateway.RequestView `json:"request"`
	}
	if err := json.Unmarshal(body, &prop); err != nil {
		t.Fatal(err)
	}
	ap, err := acts.ParseApproval([]byte(prop.Approval))
	if err != nil || ap.RequestID != prop.Request.ID || ap.StatementSHA256 != marque.StatementHash(prop.Request.CanonicalSQL) ||
		ap.PreviewSHA256 == "" || ap.PreviewSHA256 != prop.Request.PreviewSHA256 || ap.MaxRows != 1 {
		t.Fatalf("the proposal %+v does not match the request shown %+v (%v)", ap, prop.Request, err)
	}

	// Refused approvals: 403, nothing ran.
	approve := func(act, sig []byte) (int, []byte) {
		return f.do(t, http.MethodPost, "/v1/requests/"+r.RequestID+"/approve", "", map[string]string{"act": string(act), "signature": string(sig)})
	}
	strangerSig, err := keys.Stranger.Sign(signing.NamespaceApproval, []byte(prop.Approval))
	if err != nil {
		t.Fatal(err)
	}
	st, body = approve([]byte(prop.Approval), strangerSig)
	apiError(t, st, body, http.StatusForbidden, "act_refused")
	aliceSig, err := keys.Grantor.Sign(signing.NamespaceApproval, []byte(prop.Approval))
	if err != nil {
		t.Fatal(err)
	}
	st, body = approve([]byte(prop.Approval), aliceSig)
	apiError(t, st, body, http.StatusForbidden, "act_refused")
	st, body = f.do(t, http.MethodPost, "/v1/requests/"+r.RequestID+"/approve", "", map[string]string{"act": prop.Approval})
	apiError(t, st, body, http.StatusBadRequest, "bad_request")
	if gatewaytest.Snapshot(t, f.dsn, "customers") != before {
		t.Fatal("a refused approval ran")
	}

	// Bob's signature, by ssh-keygen.
	sig := keygenSign(t, keys.ApproverPEM, signing.NamespaceApproval, []byte(prop.Approval))
	st, body = approve([]byte(prop.Approval), sig)
	if st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	approvedAt := time.Now()
	var v gateway.RequestView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	if v.Status != gateway.StatusExecuted || v.RowsAffected != 1 || v.DecidedBy != "bob" || v.Path != marque.PathApproved {
		t.Fatalf("approved: %+v", v)
	}
	if !strings.Contains(gatewaytest.Snapshot(t, f.dsn, "customers"), `(7,"Maria Garcia"`) {
		t.Fatal("the approved statement did not change customer 7")
	}
	p := <-polls
	if p.status != http.StatusOK || strings.Contains(string(p.body), `"status":"waiting"`) || p.took >= 5*time.Second {
		t.Fatalf("long-poll: %d after %s: %s", p.status, p.took, p.body)
	}
	t.Logf("HTTP long-poll returned %s after the approval's answer (%s in all)", p.at.Sub(approvedAt), p.took)

	// Approving again: 409.
	st, body = approve([]byte(prop.Approval), sig)
	apiError(t, st, body, http.StatusConflict, "conflict")
	if n := gatewaytest.Ran(t, f.dsn, f.sys.Logbook); n != 1 {
		t.Fatalf("%d receipts, want 1", n)
	}

	// A denial, signed by bob, over HTTP; the agent sees the reason.
	d := f.statement(t, gatewaytest.AgentToken, "DELETE FROM orders WHERE id = 7")
	dv := f.sys.Gateway
	view, err := dv.Request(t.Context(), d.RequestID, "")
	if err != nil {
		t.Fatal(err)
	}
	denial, err := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: d.RequestID, Target: gatewaytest.Target,
		StatementSHA256: marque.StatementHash(view.CanonicalSQL), Reason: "never delete orders"})
	if err != nil {
		t.Fatal(err)
	}
	dsig, err := keys.Approver.Sign(signing.NamespaceDenial, denial)
	if err != nil {
		t.Fatal(err)
	}
	st, body = f.do(t, http.MethodPost, "/v1/requests/"+d.RequestID+"/deny", "", map[string]string{"act": string(denial), "signature": string(dsig)})
	if st != http.StatusOK || !strings.Contains(string(body), `"status":"denied"`) {
		t.Fatalf("deny: %d %s", st, body)
	}
	st, body = f.do(t, http.MethodGet, "/v1/requests/"+d.RequestID, gatewaytest.AgentToken, nil)
	if st != http.StatusOK || !strings.Contains(string(body), "denied by bob: never delete orders") {
		t.Fatalf("the agent's view of the denied request: %d %s", st, body)
	}

	// Revocation over HTTP: bob is refused, alice revokes.
	var orders *gateway.Delegation
	for _, dl := range f.sys.Gateway.Registry().Delegations(gatewaytest.Agent) {
		if dl.Bound.Tier() == "A" {
			orders = dl
		}
	}
	rev, err := acts.Canonical(acts.Revocation{Version: 1, Kind: acts.KindRevocation, DelegationID: orders.ID, Target: gatewaytest.Target,
		Reason: "incident", Time: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	revoke := func(key *signing.PrivateKey, id string) (int, []byte) {
		s, err := key.Sign(signing.NamespaceRevocation, rev)
		if err != nil {
			t.Fatal(err)
		}
		return f.do(t, http.MethodPost, "/v1/delegations/"+id+"/revoke", "", map[string]string{"act": string(rev), "signature": string(s)})
	}
	st, body = revoke(keys.Approver, orders.ID)
	apiError(t, st, body, http.StatusForbidden, "act_refused")
	st, body = revoke(keys.Grantor, "dlg_another")
	apiError(t, st, body, http.StatusBadRequest, "bad_request")
	if s := f.statement(t, gatewaytest.AgentToken, "SELECT id, status FROM orders WHERE id = 3"); s.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("before the revocation: %+v", s)
	}
	st, body = revoke(keys.Grantor, orders.ID)
	if st != http.StatusOK || !strings.Contains(string(body), `"revoked":true`) {
		t.Fatalf("revoke: %d %s", st, body)
	}
	if s := f.statement(t, gatewaytest.AgentToken, "SELECT id, status FROM orders WHERE id = 3"); s.Outcome != gateway.OutcomeReferred {
		t.Fatalf("right after the revocation: %+v", s)
	}
	st, body = revoke(keys.Grantor, orders.ID)
	apiError(t, st, body, http.StatusConflict, "conflict")
	f.sys.Verify(t)
}

// TestHumanRequestNoIDOracle: GET /v1/requests/{id} with a signature that
// does not verify is refused alike whether the request exists or not, so
// a caller who is not a human of its target cannot learn which ids exist.
func TestHumanRequestNoIDOracle(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	waiting := f.statement(t, gatewaytest.AgentToken, "UPDATE customers SET name = 'John Smith' WHERE id = 3")
	for _, id := range []string{waiting.RequestID, "req_aaaaaaaaaaaaaaaaaaaaaaaa"} {
		path := "/v1/requests/" + id
		st, body := f.signedAs(t, keys.Stranger, signing.NamespaceSession, http.MethodGet, path, nil)
		if st != http.StatusUnauthorized {
			t.Errorf("a stranger asking for %s: %d %s, want 401 for every id", id, st, body)
		}
	}
	// Bob, a human of the target, reads it.
	if st, body := f.signedAs(t, keys.Approver, signing.NamespaceSession, http.MethodGet, "/v1/requests/"+waiting.RequestID, nil); st != http.StatusOK {
		t.Errorf("bob: %d %s", st, body)
	}
	if st, _ := f.signedAs(t, keys.Approver, signing.NamespaceSession, http.MethodGet, "/v1/requests/req_aaaaaaaaaaaaaaaaaaaaaaaa", nil); st != http.StatusNotFound {
		t.Errorf("bob, a made-up id: %d, want 404", st)
	}
}

// answerClass is what a refusal lets its caller tell apart: the status
// and the error code.
type answerClass struct {
	Status int
	Code   string
}

func classOf(t *testing.T, status int, body []byte) answerClass {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return answerClass{status, e.Error.Code}
}

// forgedApproval is an approval an agent can write for its own request
// from what it sees (its id, target and canonical_sql), with a made-up
// rehearsal digest, signed by a key the signers file does not list.
func forgedApproval(t *testing.T, keys *gatewaytest.Keys, id, target, canonical string) map[string]string {
	t.Helper()
	act, sig := gatewaytest.Act(t, keys.Stranger, signing.NamespaceApproval, acts.Approval{Version: 1, Kind: acts.KindApproval,
		RequestID: id, Target: target, StatementSHA256: marque.StatementHash(canonical),
		PreviewSHA256: "0000000000000000000000000000000000000000000000000000000000000000", MaxRows: 1,
		Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)})
	return map[string]string{"act": string(act), "signature": string(sig)}
}

// TestForgedApprovalRevealsNoRehearsal: a referred statement was
// once rehearsed after the agent was answered, for humans only, because
// whether the rehearsal succeeded depended on rows outside the bound ("a
// visible rehearsal would be an oracle, one bit per request").
// POST /v1/requests/{id}/approve needs no token, and the gateway looked
// at the request's state (not waiting, not rehearsed, another rehearsal)
// before it verified the approval's signature: an agent that posted an
// approval it forged for its own request was told 409 not_rehearsed when
// the rehearsal failed and 403 act_refused when it succeeded. The
// rehearsal is gone (issue 22); whether a request has a preview depends
// on the same rows, and on whether a human asked, and a forged approval
// must tell neither. Here the two runs of one statement differ only in
// the email (a column no rule lists) of a US customer (outside the
// fence): the first has a preview a human asked for, the second none.
// Found in the hostile review of the HTTP API (rv-http).
func TestForgedApprovalRevealsNoRehearsal(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	// Read unfenced, it divides by zero iff some customer, anywhere, has
	// this email.
	const probe = "SELECT count(*) FROM customers WHERE 1 / (CASE WHEN email = 'probe@example.com' THEN 0 ELSE 1 END) = 1"

	observe := func(id string) answerClass {
		t.Helper()
		st, body := f.do(t, http.MethodGet, "/v1/requests/"+id, gatewaytest.AgentToken, nil)
		if st != http.StatusOK {
			t.Fatalf("GET /v1/requests/%s: %d %s", id, st, body)
		}
		var v gateway.RequestView
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		st, body = f.do(t, http.MethodPost, "/v1/requests/"+id+"/approve", "", forgedApproval(t, keys, id, v.Target, v.CanonicalSQL))
		return classOf(t, st, body)
	}

	// Twin one: nobody has the email; a human asks, and it has a preview.
	first := f.statement(t, gatewaytest.AgentToken, probe)
	if first.Outcome != gateway.OutcomeReferred {
		t.Fatalf("setup: %+v", first)
	}
	if v := f.sys.Previewed(t, first.RequestID); v.PreviewSHA256 == "" {
		t.Fatal("setup: the first probe was not previewed")
	}
	previewed := observe(first.RequestID)

	// Twin two: a US customer (outside the fence) has it in email (no rule
	// lists it); it has no preview (nobody asked for its own; had a human
	// asked, it would have divided by zero).
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE customers SET email = 'probe@example.com' WHERE id = 21 AND region = 'US'"); err != nil {
		t.Fatal(err)
	}
	second := f.statement(t, gatewaytest.AgentToken, probe)
	// A later referral that a human previews: looking at another request
	// computes nothing for this one.
	decoy := f.statement(t, gatewaytest.AgentToken, "UPDATE customers SET name = 'Jon Smith' WHERE id = 3")
	if second.Outcome != gateway.OutcomeReferred || decoy.Outcome != gateway.OutcomeReferred {
		t.Fatalf("setup: %+v %+v", second, decoy)
	}
	if v := f.sys.Previewed(t, decoy.RequestID); v.PreviewSHA256 == "" {
		t.Fatal("setup: the decoy was not previewed")
	}
	time.Sleep(200 * time.Millisecond)
	if v, err := f.sys.Gateway.Request(ctx, second.RequestID, ""); err != nil || v.PreviewSHA256 != "" {
		t.Fatalf("setup: the second probe has a preview nobody asked for: %v %+v", err, v)
	}
	none := observe(second.RequestID)

	if previewed != none {
		t.Fatalf("a forged approval tells the agent whether the request has a preview: %+v when it has, %+v when it has none (its preview would fail on a row outside the bound)", previewed, none)
	}
	if previewed.Status != http.StatusForbidden || previewed.Code != "act_refused" {
		t.Fatalf("a forged approval: %+v, want 403 act_refused", previewed)
	}
}

// TestForgedActsRevealNoRequestState: anyone (no token, or another
// agent's) who holds a request id learns whether it exists and its status
// from an act whose signature the server does not accept: the gateway
// looked the request up and checked its status before the signature, and
// GET /v1/requests/{id}/approval looked it up before the session. Every
// refusal of an unaccepted signature must be the same whatever the id.
// Found in the hostile review of the HTTP API (rv-http).
func TestForgedActsRevealNoRequestState(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	waiting := f.statement(t, gatewaytest.AgentToken, "UPDATE customers SET name = 'John Smith' WHERE id = 3")
	executed := f.statement(t, gatewaytest.AgentToken, "SELECT id, status FROM orders WHERE id = 3")
	if waiting.Outcome != gateway.OutcomeReferred || executed.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("setup: %+v %+v", waiting, executed)
	}
	const missing = "req_aaaaaaaaaaaaaaaaaaaaaaaa"
	canonical := map[string]string{}
	for _, id := range []string{waiting.RequestID, executed.RequestID} {
		v, err := f.sys.Gateway.Request(context.Background(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		canonical[id] = v.CanonicalSQL
	}
	canonical[missing] = "SELECT 1"

	type seen map[string]answerClass
	deny, approve, proposal := seen{}, seen{}, seen{}
	for _, id := range []string{missing, waiting.RequestID, executed.RequestID} {
		act, sig := gatewaytest.Act(t, keys.Stranger, signing.NamespaceDenial, acts.Denial{Version: 1, Kind: acts.KindDenial,
			RequestID: id, Target: "shop", StatementSHA256: marque.StatementHash(canonical[id]), Reason: "probe"})
		st, body := f.do(t, http.MethodPost, "/v1/requests/"+id+"/deny", gatewaytest.OtherToken, map[string]string{"act": string(act), "signature": string(sig)})
		deny[id] = classOf(t, st, body)
		st, body = f.do(t, http.MethodPost, "/v1/requests/"+id+"/approve", gatewaytest.OtherToken, forgedApproval(t, keys, id, "shop", canonical[id]))
		approve[id] = classOf(t, st, body)
		st, body = f.signedAs(t, keys.Stranger, signing.NamespaceSession, http.MethodGet, "/v1/requests/"+id+"/approval", nil)
		proposal[id] = classOf(t, st, body)
	}
	for name, s := range map[string]seen{"deny": deny, "approve": approve, "approval proposal": proposal} {
		if s[missing] != s[waiting.RequestID] || s[missing] != s[executed.RequestID] {
			t.Errorf("%s with an unaccepted signature tells requests apart: missing %+v, waiting %+v, executed %+v",
				name, s[missing], s[waiting.RequestID], s[executed.RequestID])
		}
	}
	if v, _ := f.sys.Gateway.Request(context.Background(), waiting.RequestID, ""); v.Status != gateway.StatusWaiting {
		t.Fatalf("a forged act changed the request: %+v", v)
	}

	// A forged revocation tells nothing of the delegation it names either
	// (whether it exists, and its target), even to another agent.
	ds := f.sys.Gateway.Registry().Delegations(gatewaytest.Agent)
	if len(ds) == 0 {
		t.Fatal("setup: no delegation")
	}
	revoke := map[string]answerClass{}
	for _, c := range []struct{ id, target string }{{"dlg_000000000000000000000000", "shop"}, {ds[0].ID, "shop"}, {ds[0].ID, "billing"}} {
		act, sig := gatewaytest.Act(t, keys.Stranger, signing.NamespaceRevocation, acts.Revocation{Version: 1, Kind: acts.KindRevocation,
			DelegationID: c.id, Target: c.target, Reason: "probe", Time: time.Now().UTC().Format(time.RFC3339)})
		st, body := f.do(t, http.MethodPost, "/v1/delegations/"+c.id+"/revoke", gatewaytest.OtherToken, map[string]string{"act": string(act), "signature": string(sig)})
		revoke[c.id+" on "+c.target] = classOf(t, st, body)
	}
	var first answerClass
	for k, c := range revoke {
		if first == (answerClass{}) {
			first = c
		}
		if c != first || c.Status != http.StatusForbidden {
			t.Errorf("a forged revocation tells delegations apart: %v (%s)", revoke, k)
			break
		}
	}
	if d := f.sys.Gateway.Registry().Delegation(ds[0].ID); d == nil || d.Revoked != nil {
		t.Fatal("a forged revocation revoked the delegation")
	}
}
