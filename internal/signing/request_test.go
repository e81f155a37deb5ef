package signing

import (
	"crypto/elliptic"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// signedRequest signs a request as a client does and parses the header as
// the server does.
func signedRequest(t *testing.T, k *PrivateKey, namespace, method, path string, at time.Time, body []byte) ParsedRequestAuth {
	t.Helper()
	h, err := k.SignRequest(namespace, method, path, at, body)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseRequestAuth(h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func requestKeyOf(t *testing.T, k testKey) *PrivateKey {
	t.Helper()
	pk, err := ParsePrivateKey(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// TestVerifyRequestOnce: a signed request is accepted once per target
// within its window; the same request again, however its signature is
// encoded or re-made, is a replay.
func TestVerifyRequestOnce(t *testing.T) {
	t.Parallel()
	alice, carol := newEd25519(t, "alice"), newECDSA(t, elliptic.P256())
	a := signers(t, line(t, alice, "", "alice@shop", "alice@bank"), line(t, carol, "", "carol@shop"))
	ak, ck := requestKeyOf(t, alice), requestKeyOf(t, carol)
	body := []byte(`{"name":"tier_b","on":true}`)
	first := signedRequest(t, ak, NamespaceSwitch, "POST", "/v1/switches", testNow, body)
	if _, err := a.VerifyRequest(first, NamespaceSwitch, "POST", "/v1/switches", body, "shop", testNow); err != nil {
		t.Fatalf("first use: %v", err)
	}
	reArmored := first
	reArmored.Signature = []byte(strings.ReplaceAll(string(first.Signature), "\n", "\r\n"))

	tests := []struct {
		name   string
		p      ParsedRequestAuth
		method string
		path   string
		body   []byte
		target string
		now    time.Time
		replay bool // refused as a replay; else accepted
	}{
		{name: "the same header again", p: first, body: body, target: "shop", now: testNow, replay: true},
		{name: "the same header 60s later", p: first, body: body, target: "shop", now: testNow.Add(MaxRequestAge), replay: true},
		{name: "the signature re-encoded", p: reArmored, body: body, target: "shop", now: testNow.Add(time.Second), replay: true},
		{name: "signed again the same second", p: signedRequest(t, ak, NamespaceSwitch, "POST", "/v1/switches", testNow, body),
			body: body, target: "shop", now: testNow, replay: true},
		{name: "another target", p: first, body: body, target: "bank", now: testNow},
		{name: "signed a second later", p: signedRequest(t, ak, NamespaceSwitch, "POST", "/v1/switches", testNow.Add(time.Second), body),
			body: body, target: "shop", now: testNow.Add(time.Second)},
		{name: "another body", p: signedRequest(t, ak, NamespaceSwitch, "POST", "/v1/switches", testNow, []byte(`{"name":"tier_b","on":false}`)),
			body: []byte(`{"name":"tier_b","on":false}`), target: "shop", now: testNow},
		{name: "another signer, same message", p: signedRequest(t, ck, NamespaceSwitch, "POST", "/v1/switches", testNow, body),
			body: body, target: "shop", now: testNow},
	}
	for _, tt := range tests { // in order: each use is remembered
		t.Run(tt.name, func(t *testing.T) {
			method, path := tt.method, tt.path
			if method == "" {
				method, path = "POST", "/v1/switches"
			}
			_, err := a.VerifyRequest(tt.p, NamespaceSwitch, method, path, tt.body, tt.target, tt.now)
			switch {
			case tt.replay && (!errors.Is(err, ErrRequestReplayed) || !errors.Is(err, ErrRequestAuth)):
				t.Fatalf("replay: got %v, want ErrRequestReplayed", err)
			case !tt.replay && err != nil:
				t.Fatalf("got %v, want accepted", err)
			}
		})
	}
	// An ECDSA signer's second signature over the same message differs in
	// its bytes, and is still the same request.
	again := signedRequest(t, ck, NamespaceSwitch, "POST", "/v1/switches", testNow, body)
	if _, err := a.VerifyRequest(again, NamespaceSwitch, "POST", "/v1/switches", body, "shop", testNow); !errors.Is(err, ErrRequestReplayed) {
		t.Fatalf("ECDSA re-signature of a used request: %v", err)
	}
}

// TestVerifyRequestWindow: a request is good from MaxRequestFutureSkew
// before its time to MaxRequestAge after it.
func TestVerifyRequestWindow(t *testing.T) {
	t.Parallel()
	alice := newEd25519(t, "alice")
	ak := requestKeyOf(t, alice)
	tests := []struct {
		signedAt time.Duration // relative to now
		ok       bool
		why      string
	}{
		{signedAt: 0, ok: true},
		{signedAt: -MaxRequestAge, ok: true},
		{signedAt: -MaxRequestAge - time.Second, why: "more than 1m0s ago"},
		{signedAt: MaxRequestFutureSkew, ok: true},
		{signedAt: MaxRequestFutureSkew + time.Second, why: "ahead of this server's clock"},
		{signedAt: 10 * time.Minute, why: "ahead of this server's clock"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.signedAt), func(t *testing.T) {
			t.Parallel()
			a := signers(t, line(t, alice, "", "alice@shop"))
			p := signedRequest(t, ak, NamespaceSession, "GET", "/v1/queue", testNow.Add(tt.signedAt), nil)
			_, err := a.VerifyRequest(p, NamespaceSession, "GET", "/v1/queue", nil, "shop", testNow)
			if tt.ok != (err == nil) || (!tt.ok && (!errors.Is(err, ErrRequestAuth) || !strings.Contains(err.Error(), tt.why))) {
				t.Fatalf("signed at now%+v: %v, want ok %v (%s)", tt.signedAt, err, tt.ok, tt.why)
			}
			if !tt.ok && len(a.requests.seen) != 0 {
				t.Fatalf("a refused request was remembered")
			}
		})
	}
}

// TestRequestMemoryBounded: expired requests are forgotten; a full memory
// refuses new requests rather than forget live ones.
func TestRequestMemoryBounded(t *testing.T) {
	t.Parallel()
	alice := newEd25519(t, "alice")
	ak := requestKeyOf(t, alice)
	a := signers(t, line(t, alice, "", "alice@shop"))
	a.requests.max = 3
	use := func(path string, at, now time.Time) error {
		p := signedRequest(t, ak, NamespaceSession, "GET", path, at, nil)
		_, err := a.VerifyRequest(p, NamespaceSession, "GET", path, nil, "shop", now)
		return err
	}
	for i, at := range []time.Duration{30 * time.Second, 0, 10 * time.Second} {
		if err := use(fmt.Sprintf("/v1/requests/r%d", i), testNow.Add(at), testNow); err != nil {
			t.Fatal(err)
		}
	}
	if err := use("/v1/queue", testNow, testNow); err == nil || errors.Is(err, ErrRequestReplayed) || !errors.Is(err, ErrRequestAuth) ||
		!strings.Contains(err.Error(), "the most this server remembers") {
		t.Fatalf("full memory: %v", err)
	}
	// r1 (signed at testNow) is out of its window after MaxRequestAge; the
	// others are not yet.
	later := testNow.Add(MaxRequestAge + time.Second)
	if err := use("/v1/queue", later, later); err != nil {
		t.Fatalf("after one expired: %v", err)
	}
	if n := len(a.requests.seen); n != 3 {
		t.Fatalf("%d requests remembered, want 3", n)
	}
	// Long after, everything but the newest is forgotten.
	much := later.Add(MaxRequestAge + time.Second)
	if err := use("/v1/queue", much, much); err != nil {
		t.Fatal(err)
	}
	if n, h := len(a.requests.seen), len(a.requests.byExpiry); n != 1 || h != 1 {
		t.Fatalf("%d requests remembered (%d queued), want 1", n, h)
	}
}
