package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"harbormaster/internal/gateway/gatewaytest"
	"harbormaster/internal/logbook"
	"harbormaster/internal/signing"
)

// TestSignedRequestsAreSingleUse: a captured signed request cannot be sent
// again within its window, so alice's "on" cannot undo her later "off"; and
// a request signed too far ahead of the server's clock is refused.
func TestSignedRequestsAreSingleUse(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	tierB := func() bool {
		on, _ := f.sys.Switches.TierBOn(gatewaytest.Target)
		return on
	}
	signed := func(key *signing.PrivateKey, namespace, method, path string, at time.Time, body []byte) func() (int, []byte) {
		auth := signedAuth(t, key, namespace, method, path, at, body)
		return func() (int, []byte) { return f.human(t, method, path, auth, body) }
	}
	flip := func(target string, on bool) func() (int, []byte) {
		body := mustJSON(t, map[string]any{"name": "tier_b", "target": target, "on": on})
		return signed(keys.Grantor, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", time.Now(), body)
	}
	replayed := func(what string, st int, body []byte) {
		t.Helper()
		e := apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
		if msg, _ := e["message"].(string); !strings.Contains(msg, "already used") {
			t.Fatalf("%s: refusal %q does not say the request was already used", what, msg)
		}
	}

	deployOn, targetOn, targetOff := flip("", true), flip(gatewaytest.Target, true), flip(gatewaytest.Target, false)
	for i, send := range []func() (int, []byte){deployOn, targetOn, targetOff} {
		if st, body := send(); st != http.StatusOK {
			t.Fatalf("flip %d: %d %s", i, st, body)
		}
	}
	if tierB() {
		t.Fatal("Tier B on after alice switched the target off")
	}
	st, body := targetOn()
	replayed("the target's on, replayed", st, body)
	if tierB() {
		t.Fatal("a replayed request switched Tier B back on")
	}

	// A read is single-use too.
	queue := signed(keys.Approver, signing.NamespaceSession, http.MethodGet, "/v1/queue", time.Now(), nil)
	if st, body := queue(); st != http.StatusOK {
		t.Fatalf("GET /v1/queue: %d %s", st, body)
	}
	st, body = queue()
	replayed("GET /v1/queue, replayed", st, body)

	// Signed two minutes ahead: refused, and not held for later.
	ahead := signed(keys.Approver, signing.NamespaceSession, http.MethodGet, "/v1/queue", time.Now().Add(2*time.Minute), nil)
	st, body = ahead()
	e := apiError(t, st, body, http.StatusUnauthorized, "unauthorized")
	if msg, _ := e["message"].(string); !strings.Contains(msg, "ahead of this server's clock") {
		t.Fatalf("refusal %q does not say the request is signed ahead", msg)
	}

	es, err := f.sys.Logbook.Find(t.Context(), logbook.Query{Kind: "switch"})
	if err != nil || len(es) != 3 {
		b, _ := json.Marshal(es)
		t.Fatalf("%d switch entries, want 3 (the replay logged nothing): %v %s", len(es), err, b)
	}
}
