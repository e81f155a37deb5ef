package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Findings of the hostile review of the HTTP API (rv-http): each test
// reproduces one defect an agent could exploit, and passes once it is
// fixed.

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

// TestFindingForgedApprovalRevealsRehearsal: a referred statement was
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
func TestFindingForgedApprovalRevealsRehearsal(t *testing.T) {
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

// TestFindingForgedActsRevealRequestState: anyone (no token, or another
// agent's) who holds a request id learns whether it exists and its status
// from an act whose signature the server does not accept: the gateway
// looked the request up and checked its status before the signature, and
// GET /v1/requests/{id}/approval looked it up before the session. Every
// refusal of an unaccepted signature must be the same whatever the id.
func TestFindingForgedActsRevealRequestState(t *testing.T) {
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
	ds := f.sys.Gateway.Delegations(gatewaytest.Agent)
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
	if d := f.sys.Gateway.Delegation(ds[0].ID); d == nil || d.Revoked != nil {
		t.Fatal("a forged revocation revoked the delegation")
	}
}

// TestFindingReadyzEchoesTargetError: GET /readyz needs no token, and
// answered a failed ping with the error itself: the target's own error
// text (its FATAL message, database and user names), which invariant 10
// keeps for humans. The answer now names the part that does not answer;
// the log keeps why.
func TestFindingReadyzEchoesTargetError(t *testing.T) {
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
