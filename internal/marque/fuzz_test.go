package marque

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzVerify: Verify never panics, every rejection wraps exactly one
// sentinel, and nothing is accepted but the one genuine marque in the seed
// corpus (the fuzzer holds no signing key, and a marque has one string form).
func FuzzVerify(f *testing.F) {
	// A fixed jti: fuzz workers are separate processes, and each must mint the
	// same genuine marque the coordinator put in the corpus.
	m := newMinter(f, func(c *MinterConfig) { c.Rand = bytes.NewReader(make([]byte, 16)) })
	v := newVerifier(f, nil)
	good, _ := mint(f, m, baseClaims())
	payload, sig := segments(good)
	jws, err := newJWSMinter(f, testKey(1)).mint(strings.Repeat("a", idLen), baseClaims())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		good,
		good + "x",
		good + ".",
		Prefix + payload + ".",
		Prefix + "." + sig,
		"hm1." + payload + "." + sig,
		jws,
		"eyJhbGciOiJub25lIn0." + payload + ".",
		"v4.public." + payload + sig,
		"",
		"hm2",
		"hm2.a.b",
		"....",
		strings.Repeat("A", 100),
	} {
		f.Add(seed)
	}
	want := wantExpect()
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(token, want)
		if err == nil {
			if token != good {
				t.Fatalf("accepted a token that is not the genuine marque: %q", token)
			}
			return
		}
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("error %v wraps %d sentinels, want exactly 1", err, n)
		}
		if c.ID != "" || c.Target != "" || !c.IssuedAt.IsZero() {
			t.Fatalf("claims %+v returned with error %v", c, err)
		}
	})
}

// FuzzPayload: the payload decoder never panics, and whatever it accepts
// re-encodes to exactly the bytes it read: one encoding per claims value.
func FuzzPayload(f *testing.F) {
	for _, c := range pathClaims() {
		c.ID, c.Issuer = strings.Repeat("e", idLen), testIssuer
		c.IssuedAt, c.NotBefore, c.Expiry = t0, t0, t0.Add(DefaultTTL)
		f.Add(appendPayload(nil, &c))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 2*len(wireStringNames)+2+24))
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := decodePayload(payload)
		if err != nil {
			n := 0
			for _, s := range sentinels {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v wraps %d sentinels, want exactly 1", err, n)
			}
			return
		}
		if again := appendPayload(nil, &c); !bytes.Equal(again, payload) {
			t.Fatalf("decoded claims re-encode to other bytes:\n got %x\nwant %x", again, payload)
		}
	})
}
