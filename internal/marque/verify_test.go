package marque

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

var b64 = base64.RawURLEncoding

// signRaw builds a compact JWS from raw header and payload JSON, signed with
// priv over the exact bytes given, so tests can sign what Mint never would.
func signRaw(priv ed25519.PrivateKey, header, payload string) string {
	input := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(payload))
	return input + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(input)))
}

func goodHeader() string {
	return fmt.Sprintf(`{"alg":"EdDSA","kid":%q,"typ":%q}`, DefaultKeyID(testKey(1).Public().(ed25519.PublicKey)), TokenType)
}

// goodPayload is the JSON of valid, minted-shape claims, optionally edited
// as a generic map first.
func goodPayload(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	c := baseClaims()
	c.ID, c.Issuer = strings.Repeat("b", idLen), testIssuer
	c.IssuedAt, c.NotBefore, c.Expiry = t0, t0, t0.Add(DefaultTTL)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		return string(b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// joseToken signs a valid payload with go-jose under another algorithm,
// with the right kid and typ, as an attacker with that key would.
func joseToken(t *testing.T, alg jose.SignatureAlgorithm, key any, payload string) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(TokenType)).
		WithHeader("kid", DefaultKeyID(testKey(1).Public().(ed25519.PublicKey)))
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatalf("NewSigner(%s): %v", alg, err)
	}
	jws, err := s.Sign([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func replacePart(tok string, i int, part string) string {
	parts := strings.Split(tok, ".")
	parts[i] = part
	return strings.Join(parts, ".")
}

// TestVerifyRejects has at least one case per way a marque must be refused
// (invariant 3: every one of them means "do not run").
func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	pub := testKey(1).Public().(ed25519.PublicKey)
	m := newMinter(t, nil)
	good, _ := mint(t, m, baseClaims())
	parts := strings.Split(good, ".")
	payloadJSON := goodPayload(t, nil)

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		token    func(t *testing.T) string
		verifier func(*VerifierConfig) // optional change to the verifier
		expect   *Expect               // optional; defaults to wantExpect()
		want     error
	}{
		// Algorithm pinning.
		{name: "HS256 with the public key as HMAC secret", want: ErrAlgorithm,
			token: func(t *testing.T) string { return joseToken(t, jose.HS256, []byte(pub), payloadJSON) }},
		{name: "ES256", want: ErrAlgorithm,
			token: func(t *testing.T) string { return joseToken(t, jose.ES256, ecKey, payloadJSON) }},
		{name: "RS256", want: ErrAlgorithm,
			token: func(t *testing.T) string { return joseToken(t, jose.RS256, rsaKey, payloadJSON) }},
		{name: "alg none, empty signature", want: ErrAlgorithm, token: func(t *testing.T) string {
			h := fmt.Sprintf(`{"alg":"none","kid":%q,"typ":%q}`, DefaultKeyID(pub), TokenType)
			return b64.EncodeToString([]byte(h)) + "." + b64.EncodeToString([]byte(payloadJSON)) + "."
		}},
		{name: "alg none, signature kept", want: ErrAlgorithm, token: func(t *testing.T) string {
			h := fmt.Sprintf(`{"alg":"none","kid":%q,"typ":%q}`, DefaultKeyID(pub), TokenType)
			return replacePart(good, 0, b64.EncodeToString([]byte(h)))
		}},
		{name: "alg eddsa (case)", want: ErrAlgorithm, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.Replace(goodHeader(), "EdDSA", "eddsa", 1), payloadJSON)
		}},
		{name: "alg Ed25519 (fully specified name)", want: ErrAlgorithm, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.Replace(goodHeader(), "EdDSA", "Ed25519", 1), payloadJSON)
		}},
		{name: "alg missing", want: ErrAlgorithm, token: func(t *testing.T) string {
			return signRaw(testKey(1), fmt.Sprintf(`{"kid":%q,"typ":%q}`, DefaultKeyID(pub), TokenType), payloadJSON)
		}},
		{name: "alg not a string", want: ErrAlgorithm, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.Replace(goodHeader(), `"EdDSA"`, `["EdDSA"]`, 1), payloadJSON)
		}},

		// Signature.
		{name: "tampered payload", want: ErrSignature, token: func(t *testing.T) string {
			p, err := b64.DecodeString(parts[1])
			if err != nil {
				t.Fatal(err)
			}
			forged := strings.Replace(string(p), `"target":"shop"`, `"target":"bank"`, 1)
			if forged == string(p) {
				t.Fatal("payload edit did not apply")
			}
			return replacePart(good, 1, b64.EncodeToString([]byte(forged)))
		}, expect: &Expect{Target: "bank", StatementHash: StatementHash(testSQL)}},
		{name: "tampered signature", want: ErrSignature, token: func(t *testing.T) string {
			sig, err := b64.DecodeString(parts[2])
			if err != nil {
				t.Fatal(err)
			}
			sig[10] ^= 0x01
			return replacePart(good, 2, b64.EncodeToString(sig))
		}},
		{name: "truncated signature", want: ErrSignature, token: func(t *testing.T) string {
			sig, _ := b64.DecodeString(parts[2])
			return replacePart(good, 2, b64.EncodeToString(sig[:63]))
		}},
		{name: "signed by another Ed25519 key with the right kid", want: ErrSignature, token: func(t *testing.T) string {
			return signRaw(testKey(2), goodHeader(), payloadJSON)
		}},
		{name: "minted by another key", want: ErrSignature, token: func(t *testing.T) string {
			other := newMinter(t, func(c *MinterConfig) { c.Key, c.KeyID = testKey(2), DefaultKeyID(pub) })
			tok, _ := mint(t, other, baseClaims())
			return tok
		}},
		{name: "wrong kid", want: ErrSignature, token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, func(c *MinterConfig) { c.KeyID = "cp-key-2" }), baseClaims())
			return tok
		}},
		{name: "kid missing", want: ErrSignature, token: func(t *testing.T) string {
			return signRaw(testKey(1), fmt.Sprintf(`{"alg":"EdDSA","typ":%q}`, TokenType), payloadJSON)
		}},

		// Header.
		{name: "wrong typ", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.Replace(goodHeader(), TokenType, "JWT", 1), payloadJSON)
		}},
		{name: "typ case-folded", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.Replace(goodHeader(), TokenType, strings.ToUpper(TokenType), 1), payloadJSON)
		}},
		{name: "typ missing", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), fmt.Sprintf(`{"alg":"EdDSA","kid":%q}`, DefaultKeyID(pub)), payloadJSON)
		}},
		{name: "unknown critical header", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.TrimSuffix(goodHeader(), "}")+`,"crit":["exp-policy"],"exp-policy":1}`, payloadJSON)
		}},
		{name: "b64 false critical header", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), strings.TrimSuffix(goodHeader(), "}")+`,"crit":["b64"],"b64":false}`, payloadJSON)
		}},
		{name: "embedded attacker jwk", want: ErrMalformed, token: func(t *testing.T) string {
			attacker := testKey(9)
			jwk, err := json.Marshal(jose.JSONWebKey{Key: attacker.Public()})
			if err != nil {
				t.Fatal(err)
			}
			return signRaw(attacker, strings.TrimSuffix(goodHeader(), "}")+`,"jwk":`+string(jwk)+`}`, payloadJSON)
		}},
		{name: "duplicate alg header", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), `{"alg":"none",`+strings.TrimPrefix(goodHeader(), "{"), payloadJSON)
		}},
		{name: "header not an object", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), `"EdDSA"`, payloadJSON)
		}},
		{name: "header with trailing data", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader()+`{}`, payloadJSON)
		}},

		// Scope.
		{name: "wrong target", want: ErrWrongTarget, token: func(t *testing.T) string { return good },
			expect: &Expect{Target: "bank", StatementHash: StatementHash(testSQL)}},
		{name: "wrong statement hash", want: ErrWrongStatement, token: func(t *testing.T) string { return good },
			expect: &Expect{Target: "shop", StatementHash: StatementHash(testSQL + " OR true")}},
		{name: "wrong issuer", want: ErrWrongIssuer, token: func(t *testing.T) string { return good },
			verifier: func(c *VerifierConfig) { c.Issuer = "cp-other" }},

		// Time.
		{name: "expired", want: ErrExpired, token: func(t *testing.T) string { return good },
			verifier: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(DefaultTTL + DefaultLeeway)) }},
		{name: "expired long ago", want: ErrExpired, token: func(t *testing.T) string { return good },
			verifier: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(24 * time.Hour)) }},
		{name: "not yet valid", want: ErrNotYetValid, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
				m["nbf"] = t0.Add(10 * time.Second).Unix()
				m["exp"] = t0.Add(40 * time.Second).Unix()
			}))
		}},
		{name: "issued in the future", want: ErrNotYetValid, token: func(t *testing.T) string { return good },
			verifier: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(-DefaultLeeway - time.Second)) }},
		{name: "over-long lifetime", want: ErrClaims, token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, func(c *MinterConfig) { c.TTL = DefaultMaxTTL + time.Second }), baseClaims())
			return tok
		}},
		{name: "nbf before iat", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { m["nbf"] = t0.Add(-time.Second).Unix() }))
		}},
		{name: "exp missing", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { delete(m, "exp") }))
		}},
		{name: "fractional iat", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { m["iat"] = float64(t0.Unix()) + 0.5 }))
		}},

		// Claims (signed by the right key, still refused).
		{name: "missing auth signature", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
				delete(m["auth"].(map[string]any), "signature")
			}))
		}},
		{name: "empty auth signature", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
				m["auth"].(map[string]any)["signature"] = ""
			}))
		}},
		{name: "missing auth", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { delete(m, "auth") }))
		}},
		{name: "unknown path", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { m["path"] = "trusted" }))
		}},
		{name: "bad jti", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { m["jti"] = "1; DROP TABLE receipts" }))
		}},
		{name: "unknown claim", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) { m["max_rows_v2"] = 1 }))
		}},
		{name: "unknown auth member", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
				m["auth"].(map[string]any)["trusted"] = true
			}))
		}},
		{name: "case-folded claim name", want: ErrClaims, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
				m["Target"] = m["target"]
				delete(m, "target")
			}))
		}},
		{name: "duplicate claim", want: ErrMalformed, token: func(t *testing.T) string {
			p := goodPayload(t, nil)
			return signRaw(testKey(1), goodHeader(), `{"target":"bank",`+strings.TrimPrefix(p, "{"))
		}},
		{name: "payload not an object", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), `[1,2]`)
		}},
		{name: "payload null", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), `null`)
		}},
		{name: "payload deeply nested", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), `{"rule":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)+`}`)
		}},

		// Size and serialization.
		{name: "oversize garbage", want: ErrMalformed, token: func(t *testing.T) string {
			return strings.Repeat("A", MaxTokenSize+1)
		}},
		{name: "oversize but validly signed", want: ErrMalformed, token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
				m["request_id"] = strings.Repeat("r", MaxTokenSize)
			}))
		}},
		{name: "JSON serialization", want: ErrMalformed, token: func(t *testing.T) string {
			jws, err := jose.ParseSignedCompact(good, []jose.SignatureAlgorithm{jose.EdDSA})
			if err != nil {
				t.Fatal(err)
			}
			return jws.FullSerialize()
		}},
		{name: "JSON serialization with two signatures", want: ErrMalformed, token: func(t *testing.T) string {
			sig := fmt.Sprintf(`{"protected":%q,"signature":%q}`, parts[0], parts[2])
			return fmt.Sprintf(`{"payload":%q,"signatures":[%s,%s]}`, parts[1], sig, sig)
		}},
		{name: "empty", want: ErrMalformed, token: func(t *testing.T) string { return "" }},
		{name: "two segments", want: ErrMalformed, token: func(t *testing.T) string { return parts[0] + "." + parts[1] }},
		{name: "empty payload segment", want: ErrMalformed, token: func(t *testing.T) string { return replacePart(good, 1, "") }},
		{name: "trailing dot", want: ErrMalformed, token: func(t *testing.T) string { return good + "." }},
		{name: "trailing segment", want: ErrMalformed, token: func(t *testing.T) string { return good + ".e30" }},
		{name: "trailing newline", want: ErrMalformed, token: func(t *testing.T) string { return good + "\n" }},
		{name: "trailing space", want: ErrMalformed, token: func(t *testing.T) string { return good + " " }},
		{name: "leading space", want: ErrMalformed, token: func(t *testing.T) string { return " " + good }},
		{name: "trailing NUL", want: ErrMalformed, token: func(t *testing.T) string { return good + "\x00" }},
		{name: "trailing base64 char", want: ErrMalformed, token: func(t *testing.T) string { return good + "x" }},
		{name: "trailing base64 chars decoding cleanly", want: ErrSignature, token: func(t *testing.T) string { return good + "AA" }},
		{name: "padding", want: ErrMalformed, token: func(t *testing.T) string { return good + "==" }},
		{name: "standard base64 alphabet", want: ErrMalformed, token: func(t *testing.T) string {
			return replacePart(good, 2, base64.RawStdEncoding.EncodeToString([]byte{0xfb, 0xff, 0xfe}))
		}},
		{name: "non-canonical trailing bits", want: ErrMalformed, token: func(t *testing.T) string {
			// 64 bytes end in a character with four unused bits; setting one
			// decodes to the same signature under lax base64.
			s := parts[2]
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			last := strings.IndexByte(alphabet, s[len(s)-1])
			mutated := s[:len(s)-1] + string(alphabet[last|1])
			lax, err := b64.DecodeString(mutated)
			orig, _ := b64.DecodeString(s)
			if err != nil || string(lax) != string(orig) {
				t.Fatal("mutation is not a lax-base64 alias of the signature; the case tests nothing")
			}
			return replacePart(good, 2, mutated)
		}},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, tc.verifier)
			want := wantExpect()
			if tc.expect != nil {
				want = *tc.expect
			}
			tok := tc.token(t)
			got, err := v.Verify(tok, want)
			t.Logf("%v", err)
			assertOnlySentinel(t, err, tc.want)
			if !reflect0(got) {
				t.Errorf("Verify returned claims %+v with its error", got)
			}
		})
	}
}

func reflect0(c Claims) bool {
	return c.ID == "" && c.Target == "" && c.Auth.Signature == "" && c.IssuedAt.IsZero()
}

// TestVerifyAccepts pins the edges of what is accepted, so the rejections
// above are not passing for some unrelated reason.
func TestVerifyAccepts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		token    func(t *testing.T) string
		verifier func(*VerifierConfig)
	}{
		{name: "raw-signed good payload", token: func(t *testing.T) string {
			return signRaw(testKey(1), goodHeader(), goodPayload(t, nil))
		}},
		{name: "header members in another order", token: func(t *testing.T) string {
			h := fmt.Sprintf(`{"typ":%q,"kid":%q,"alg":"EdDSA"}`, TokenType, DefaultKeyID(testKey(1).Public().(ed25519.PublicKey)))
			return signRaw(testKey(1), h, goodPayload(t, nil))
		}},
		{name: "last second before expiry, within leeway", token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, nil), baseClaims())
			return tok
		}, verifier: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(DefaultTTL + DefaultLeeway - time.Second)) }},
		{name: "clock behind by the leeway", token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, nil), baseClaims())
			return tok
		}, verifier: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(-DefaultLeeway)) }},
		{name: "lifetime exactly MaxTTL", token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, func(c *MinterConfig) { c.TTL = DefaultMaxTTL }), baseClaims())
			return tok
		}},
		{name: "explicit key id on both sides", token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, func(c *MinterConfig) { c.KeyID = "cp-2026" }), baseClaims())
			return tok
		}, verifier: func(c *VerifierConfig) { c.KeyID = "cp-2026" }},
		{name: "largest token under MaxTokenSize", token: func(t *testing.T) string {
			// Grow request_id until the next byte would cross the limit.
			withID := func(n int) string {
				return signRaw(testKey(1), goodHeader(), goodPayload(t, func(m map[string]any) {
					m["request_id"] = strings.Repeat("r", n)
				}))
			}
			best := ""
			for n := (MaxTokenSize-len(withID(0)))*3/4 - 8; ; n++ {
				tok := withID(n)
				if len(tok) > MaxTokenSize {
					break
				}
				best = tok
			}
			if len(best) < MaxTokenSize-3 {
				t.Fatalf("largest token is %d bytes, expected within 3 of %d", len(best), MaxTokenSize)
			}
			return best
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, tc.verifier)
			if _, err := v.Verify(tc.token(t), wantExpect()); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestVerifyNeedsExpect: there is no way to verify a marque without naming
// the target and statement it must be for.
func TestVerifyNeedsExpect(t *testing.T) {
	t.Parallel()
	v := newVerifier(t, nil)
	tok, _ := mint(t, newMinter(t, nil), baseClaims())
	for _, e := range []Expect{
		{},
		{Target: "shop"},
		{StatementHash: StatementHash(testSQL)},
		{Target: "shop", StatementHash: testSQL},
	} {
		_, err := v.Verify(tok, e)
		if err == nil {
			t.Fatalf("Verify(%+v) accepted", e)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				t.Errorf("Verify(%+v): %v wraps %v; a caller error is not a token verdict", e, err, s)
			}
		}
	}
}
