package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
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

// TestSignedRequestsAreSingleUseAcrossNodes: a signed request accepted by
// one node is refused when replayed through another node on the same
// store: the replay memory is the store's.
func TestSignedRequestsAreSingleUseAcrossNodes(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	other := httptest.NewServer(f.sys.OtherAPI(t).Handler())
	t.Cleanup(other.Close)
	keys := f.sys.Opts.Keys
	body := mustJSON(t, map[string]any{"name": "tier_b", "target": gatewaytest.Target, "on": true})
	auth := signedAuth(t, keys.Grantor, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", time.Now(), body)
	if st, out := f.human(t, http.MethodPost, "/v1/switches", auth, body); st != http.StatusOK {
		t.Fatalf("node 1: %d %s", st, out)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, other.URL+"/v1/switches", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := other.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	e := apiError(t, resp.StatusCode, out, http.StatusUnauthorized, "unauthorized")
	if msg, _ := e["message"].(string); !strings.Contains(msg, "already used") {
		t.Fatalf("the replay through node 2: %q, want already used", msg)
	}
	// A fresh request through node 2 is accepted.
	// Another signing second: sshsig signatures are deterministic, so the
	// same request signed in the same second is the same request.
	fresh := signedAuth(t, keys.Grantor, signing.NamespaceSwitch, http.MethodPost, "/v1/switches", time.Now().Add(time.Second), body)
	req2, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, other.URL+"/v1/switches", bytes.NewReader(body))
	req2.Header.Set("Authorization", fresh)
	req2.Header.Set("Content-Type", "application/json")
	resp2, err := other.Client().Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("a fresh request through node 2: %d", resp2.StatusCode)
	}
}
