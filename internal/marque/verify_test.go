package marque

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

var b64 = base64.RawURLEncoding

// joseToken signs a valid JSON payload with go-jose under alg, with the
// control plane's key id and the old JWS marque's typ, as an attacker with
// that key (or, for HS256, with the public key as an HMAC secret) would.
func joseToken(t *testing.T, alg jose.SignatureAlgorithm, key any, payload string) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(jwsTokenType)).WithHeader("kid", testKeyID)
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

// pasetoV4Public signs payload as a PASETO v4.public token (Ed25519 over
// PAE("v4.public.", payload, footer, implicit)) with priv.
func pasetoV4Public(priv ed25519.PrivateKey, payload []byte) string {
	const h = "v4.public."
	pae := func(pieces ...[]byte) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(pieces)))
		for _, p := range pieces {
			b = binary.LittleEndian.AppendUint64(b, uint64(len(p)))
			b = append(b, p...)
		}
		return b
	}
	sig := ed25519.Sign(priv, pae([]byte(h), payload, nil, nil))
	return h + b64.EncodeToString(append(bytes.Clone(payload), sig...))
}

// segments splits an hm2 token into its payload and signature segments.
func segments(tok string) (payload, sig string) {
	payload, sig, _ = strings.Cut(strings.TrimPrefix(tok, Prefix), ".")
	return payload, sig
}

// TestVerifyRejects has at least one case per way a marque must be refused
// (invariant 3: every one of them means "do not run").
func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	pub := testKey(1).Public().(ed25519.PublicKey)
	m := newMinter(t, nil)
	good, _ := mint(t, m, baseClaims())
	goodPayload, goodSig := segments(good)
	payloadJSON := func() string {
		b, err := json.Marshal(toJWS(goodClaims()))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}()

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
		// Algorithm pinning: a token of another version or encoding is
		// refused before any key is touched, whoever signed it.
		{name: "JWS marque of the old format, signed by the control-plane key", want: ErrAlgorithm,
			token: func(t *testing.T) string {
				tok, err := newJWSMinter(t, testKey(1)).mint(strings.Repeat("a", idLen), baseClaims())
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}},
		{name: "JWS HS256 with the public key as HMAC secret", want: ErrAlgorithm,
			token: func(t *testing.T) string { return joseToken(t, jose.HS256, []byte(pub), payloadJSON) }},
		{name: "JWS ES256", want: ErrAlgorithm,
			token: func(t *testing.T) string { return joseToken(t, jose.ES256, ecKey, payloadJSON) }},
		{name: "JWS RS256", want: ErrAlgorithm,
			token: func(t *testing.T) string { return joseToken(t, jose.RS256, rsaKey, payloadJSON) }},
		{name: "JWS alg none", want: ErrAlgorithm, token: func(t *testing.T) string {
			h := fmt.Sprintf(`{"alg":"none","kid":%q,"typ":%q}`, testKeyID, jwsTokenType)
			return b64.EncodeToString([]byte(h)) + "." + b64.EncodeToString([]byte(payloadJSON)) + "."
		}},
		{name: "PASETO v4.public signed by the control-plane key", want: ErrAlgorithm, token: func(t *testing.T) string {
			return pasetoV4Public(testKey(1), []byte(payloadJSON))
		}},
		{name: "PASETO v4.public carrying the hm2 payload", want: ErrAlgorithm, token: func(t *testing.T) string {
			return pasetoV4Public(testKey(1), specPayload(goodClaims()))
		}},
		{name: "version hm1", want: ErrAlgorithm, token: func(t *testing.T) string { return "hm1" + strings.TrimPrefix(good, "hm2") }},
		{name: "version hm3", want: ErrAlgorithm, token: func(t *testing.T) string { return "hm3" + strings.TrimPrefix(good, "hm2") }},
		{name: "version case-folded", want: ErrAlgorithm, token: func(t *testing.T) string { return "HM2" + strings.TrimPrefix(good, "hm2") }},
		{name: "version missing", want: ErrAlgorithm, token: func(t *testing.T) string { return strings.TrimPrefix(good, "hm2") }},
		{name: "version repeated", want: ErrAlgorithm, token: func(t *testing.T) string { return "hm2hm2" + strings.TrimPrefix(good, "hm2") }},

		// Signature: over the context, the key id and the payload.
		{name: "tampered payload", want: ErrSignature, token: func(t *testing.T) string {
			forged := goodClaims()
			forged.Target = "bank"
			return Prefix + b64.EncodeToString(specPayload(forged)) + "." + goodSig
		}, expect: &Expect{Target: "bank", StatementHash: StatementHash(testSQL)}},
		{name: "tampered signature", want: ErrSignature, token: func(t *testing.T) string {
			sig, err := b64.DecodeString(goodSig)
			if err != nil {
				t.Fatal(err)
			}
			sig[10] ^= 0x01
			return Prefix + goodPayload + "." + b64.EncodeToString(sig)
		}},
		{name: "signature of another marque", want: ErrSignature, token: func(t *testing.T) string {
			other, _ := mint(t, m, baseClaims())
			_, sig := segments(other)
			return Prefix + goodPayload + "." + sig
		}},
		{name: "signed by another Ed25519 key under the right key id", want: ErrSignature, token: func(t *testing.T) string {
			return signPayload(testKey(2), testKeyID, specPayload(goodClaims()))
		}},
		{name: "minted by another key", want: ErrSignature, token: func(t *testing.T) string {
			other := newMinter(t, func(c *MinterConfig) { c.Key, c.KeyID = testKey(2), testKeyID })
			tok, _ := mint(t, other, baseClaims())
			return tok
		}},
		{name: "wrong key id", want: ErrSignature, token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, func(c *MinterConfig) { c.KeyID = "cp-key-2" }), baseClaims())
			return tok
		}},
		{name: "key id prefix of the right one", want: ErrSignature, token: func(t *testing.T) string {
			return signPayload(testKey(1), testKeyID[:len(testKeyID)-1], specPayload(goodClaims()))
		}},
		{name: "signature over the payload alone", want: ErrSignature, token: func(t *testing.T) string {
			p := specPayload(goodClaims())
			return Prefix + b64.EncodeToString(p) + "." + b64.EncodeToString(ed25519.Sign(testKey(1), p))
		}},
		{name: "signature under another version's context", want: ErrSignature, token: func(t *testing.T) string {
			p := specPayload(goodClaims())
			msg := bytes.Replace(signedMessage(testKeyID, p), []byte("-v2\x00"), []byte("-v3\x00"), 1)
			return Prefix + b64.EncodeToString(p) + "." + b64.EncodeToString(ed25519.Sign(testKey(1), msg))
		}},
		{name: "key id moved into the payload", want: ErrSignature, token: func(t *testing.T) string {
			// The same signed bytes, split differently between key id and
			// payload: the key id's length prefix makes the split unique.
			p := specPayload(goodClaims())
			msg := signedMessage(testKeyID, p)
			sig := ed25519.Sign(testKey(1), msg)
			shifted := append([]byte(testKeyID[len(testKeyID)-1:]), p...)
			return Prefix + b64.EncodeToString(shifted) + "." + b64.EncodeToString(sig)
		}, verifier: func(c *VerifierConfig) { c.KeyID = testKeyID[:len(testKeyID)-1] }},

		// Structure.
		{name: "empty", want: ErrMalformed, token: func(t *testing.T) string { return "" }},
		{name: "version alone", want: ErrMalformed, token: func(t *testing.T) string { return "hm2" }},
		{name: "version and dot", want: ErrMalformed, token: func(t *testing.T) string { return Prefix }},
		{name: "two segments", want: ErrMalformed, token: func(t *testing.T) string { return Prefix + goodPayload }},
		{name: "empty payload segment", want: ErrMalformed, token: func(t *testing.T) string { return Prefix + "." + goodSig }},
		{name: "empty signature segment", want: ErrMalformed, token: func(t *testing.T) string { return Prefix + goodPayload + "." }},
		{name: "truncated signature", want: ErrMalformed, token: func(t *testing.T) string {
			sig, _ := b64.DecodeString(goodSig)
			return Prefix + goodPayload + "." + b64.EncodeToString(sig[:63])
		}},
		{name: "payload segment of impossible length", want: ErrMalformed, token: func(t *testing.T) string {
			p := goodPayload
			for len(p)%4 != 1 {
				p += "A"
			}
			return Prefix + p + "." + goodSig
		}},
		{name: "trailing dot", want: ErrMalformed, token: func(t *testing.T) string { return good + "." }},
		{name: "trailing segment", want: ErrMalformed, token: func(t *testing.T) string { return good + ".AAAA" }},
		{name: "trailing newline", want: ErrMalformed, token: func(t *testing.T) string { return good + "\n" }},
		{name: "newline inside the payload segment", want: ErrMalformed, token: func(t *testing.T) string {
			return Prefix + goodPayload[:10] + "\n" + goodPayload[10:] + "." + goodSig
		}},
		{name: "trailing space", want: ErrMalformed, token: func(t *testing.T) string { return good + " " }},
		{name: "leading space", want: ErrMalformed, token: func(t *testing.T) string { return " " + good }},
		{name: "trailing NUL", want: ErrMalformed, token: func(t *testing.T) string { return good + "\x00" }},
		{name: "trailing base64 char", want: ErrMalformed, token: func(t *testing.T) string { return good + "x" }},
		{name: "trailing base64 chars decoding cleanly", want: ErrMalformed, token: func(t *testing.T) string { return good + "AA" }},
		{name: "padding", want: ErrMalformed, token: func(t *testing.T) string { return good + "==" }},
		{name: "standard base64 alphabet", want: ErrMalformed, token: func(t *testing.T) string {
			return Prefix + goodPayload + "." + goodSig[:80] + "+/+/+/"
		}},
		{name: "non-canonical trailing bits in the signature", want: ErrMalformed, token: func(t *testing.T) string {
			// 64 bytes end in a character with four unused bits; setting one
			// decodes to the same signature under lax base64.
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			last := strings.IndexByte(alphabet, goodSig[len(goodSig)-1])
			mutated := goodSig[:len(goodSig)-1] + string(alphabet[last|1])
			lax, err := b64.DecodeString(mutated)
			orig, _ := b64.DecodeString(goodSig)
			if err != nil || string(lax) != string(orig) {
				t.Fatal("mutation is not a lax-base64 alias of the signature; the case tests nothing")
			}
			return Prefix + goodPayload + "." + mutated
		}},
		{name: "non-canonical trailing bits in the payload", want: ErrMalformed, token: nonCanonicalPayloadBits},
		{name: "JWS JSON serialization", want: ErrMalformed, token: func(t *testing.T) string {
			sig := fmt.Sprintf(`{"protected":%q,"signature":%q}`, "eyJhbGciOiJFZERTQSJ9", goodSig)
			return fmt.Sprintf(`{"payload":%q,"signatures":[%s,%s]}`, goodPayload, sig, sig)
		}},
		{name: "oversize garbage", want: ErrMalformed, token: func(t *testing.T) string {
			return strings.Repeat("A", MaxTokenSize+1)
		}},
		{name: "oversize but validly signed", want: ErrMalformed, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.RequestID = strings.Repeat("r", 50000) })
		}},

		// Payload structure (signed by the right key, still refused).
		{name: "payload of one byte", want: ErrMalformed, token: func(t *testing.T) string {
			return signPayload(testKey(1), testKeyID, []byte{0})
		}},
		{name: "truncated payload", want: ErrMalformed, token: func(t *testing.T) string {
			p := specPayload(goodClaims())
			return signPayload(testKey(1), testKeyID, p[:len(p)-1])
		}},
		{name: "string length past the end", want: ErrMalformed, token: func(t *testing.T) string {
			p := specPayload(goodClaims())
			p[0], p[1] = 0xff, 0xff
			return signPayload(testKey(1), testKeyID, p)
		}},
		{name: "JSON claims under the hm2 signature", want: ErrMalformed, token: func(t *testing.T) string {
			return signPayload(testKey(1), testKeyID, []byte(payloadJSON))
		}},
		{name: "unknown claim after the last", want: ErrClaims, token: func(t *testing.T) string {
			p := specPayload(goodClaims())
			return signPayload(testKey(1), testKeyID, append(p, 0, 4, 'm', 'o', 'r', 'e'))
		}},

		// Claims (signed by the right key, still refused).
		{name: "missing auth signature", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Auth.Signature = "" })
		}},
		{name: "auth signature not armored", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Auth.Signature = "trust me" })
		}},
		{name: "missing auth", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Auth = Auth{} })
		}},
		{name: "approved path on a delegation", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Path = PathApproved })
		}},
		{name: "unknown path", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Path = "trusted" })
		}},
		{name: "bad jti", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.ID = "1; DROP TABLE receipts" })
		}},
		{name: "negative rule", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { r := -1; c.RuleIndex = &r })
		}},
		{name: "invalid UTF-8", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Principal = "agent:\xff" })
		}},
		{name: "statement hash in upper case", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.StatementHash = strings.ToUpper(c.StatementHash) })
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
			return signClaims(func(c *Claims) {
				c.NotBefore = t0.Add(10 * time.Second)
				c.Expiry = t0.Add(40 * time.Second)
			})
		}},
		{name: "issued in the future", want: ErrNotYetValid, token: func(t *testing.T) string { return good },
			verifier: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(-DefaultLeeway - time.Second)) }},
		{name: "over-long lifetime", want: ErrClaims, token: func(t *testing.T) string {
			tok, _ := mint(t, newMinter(t, func(c *MinterConfig) { c.TTL = DefaultMaxTTL + time.Second }), baseClaims())
			return tok
		}},
		{name: "nbf before iat", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.NotBefore = t0.Add(-time.Second) })
		}},
		{name: "exp missing (the zero time)", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Expiry = time.Time{} })
		}},
		{name: "exp at the epoch", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Expiry = time.Unix(0, 0) })
		}},
		{name: "exp past the year 9999", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.Expiry = time.Unix(1<<62, 0) })
		}},
		{name: "iat before 1970", want: ErrClaims, token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.IssuedAt = time.Unix(-1, 0) })
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
		{name: "documented encoding, signed by hand", token: func(t *testing.T) string {
			return signClaims(nil)
		}},
		{name: "empty optional strings and integers", token: func(t *testing.T) string {
			return signClaims(func(c *Claims) { c.RuleIndex, c.JudgmentID = nil, "" })
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
				return signClaims(func(c *Claims) { c.RequestID = strings.Repeat("r", n) })
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

// TestVerifyGrant: a grant (an authorization passed as a value in one
// process) passes exactly the checks a token's claims pass once its
// signature holds, and nothing but a minter's grant is one.
func TestVerifyGrant(t *testing.T) {
	t.Parallel()
	m := newMinter(t, nil)
	id, err := m.NewID()
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Grant(id, baseClaims())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := newVerifier(t, nil).VerifyGrant(g, wantExpect()); err != nil || c.ID != id {
		t.Fatalf("a minter's grant: %+v %v", c, err)
	}
	if _, err := m.Grant(id, Claims{}); !errors.Is(err, ErrClaims) {
		t.Errorf("a grant of empty claims was made: %v", err)
	}
	other := newMinter(t, func(c *MinterConfig) { c.Issuer = "another" })
	foreign, err := other.Grant(id, baseClaims())
	if err != nil {
		t.Fatal(err)
	}
	long := newMinter(t, func(c *MinterConfig) { c.TTL = time.Hour })
	longGrant, err := long.Grant(id, baseClaims())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		g      Grant
		v      func(*VerifierConfig)
		expect Expect
		want   error
	}{
		{name: "the zero grant", g: Grant{}, expect: wantExpect(), want: ErrClaims},
		{name: "another issuer", g: foreign, expect: wantExpect(), want: ErrWrongIssuer},
		{name: "a lifetime past MaxTTL", g: longGrant, expect: wantExpect(), want: ErrClaims},
		{name: "expired", g: g, v: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(time.Hour)) }, expect: wantExpect(), want: ErrExpired},
		{name: "not yet valid", g: g, v: func(c *VerifierConfig) { c.Clock = fixedClock(t0.Add(-time.Hour)) }, expect: wantExpect(), want: ErrNotYetValid},
		{name: "another target", g: g, expect: Expect{Target: "billing", StatementHash: wantExpect().StatementHash}, want: ErrWrongTarget},
		{name: "another statement", g: g, expect: Expect{Target: "shop", StatementHash: StatementHash("SELECT 2")}, want: ErrWrongStatement},
	} {
		if _, err := newVerifier(t, c.v).VerifyGrant(c.g, c.expect); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
