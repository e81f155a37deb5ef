package marque

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt")

// testKeyID is the key id both sides default to in these tests.
var testKeyID = DefaultKeyID(testKey(1).Public().(ed25519.PublicKey))

// specPayload writes the payload exactly as doc.go specifies it, written
// apart from appendPayload so that the two can be compared: every string as
// a big-endian uint16 length and its bytes, in the documented order; each
// optional integer as 0x00, or 0x01 and a big-endian int64; then iat, nbf and
// exp as big-endian int64 seconds since the Unix epoch. It writes whatever it
// is given, so tests can sign what Mint never would.
func specPayload(c Claims) []byte {
	var b bytes.Buffer
	str := func(s string) {
		_ = binary.Write(&b, binary.BigEndian, uint16(len(s)))
		b.WriteString(s)
	}
	i64 := func(n int64) { _ = binary.Write(&b, binary.BigEndian, n) }
	str(c.ID)
	str(c.Issuer)
	str(c.RequestID)
	str(c.Principal)
	str(c.Target)
	str(c.StatementHash)
	str(c.Path)
	str(c.Auth.Kind)
	str(c.Auth.DelegationID)
	str(c.Auth.BoundSHA256)
	str(c.Auth.Signer)
	str(c.Auth.Signature)
	str(c.Auth.ApprovalSHA256)
	str(c.JudgmentID)
	if c.RuleIndex == nil {
		b.WriteByte(0)
	} else {
		b.WriteByte(1)
		i64(int64(*c.RuleIndex))
	}
	if c.MaxRows == nil {
		b.WriteByte(0)
	} else {
		b.WriteByte(1)
		i64(*c.MaxRows)
	}
	i64(c.IssuedAt.Unix())
	i64(c.NotBefore.Unix())
	i64(c.Expiry.Unix())
	return b.Bytes()
}

// signedMessage is the documented message an hm2 signature covers.
func signedMessage(kid string, payload []byte) []byte {
	m := []byte("harbormaster-marque-v2\x00")
	m = binary.BigEndian.AppendUint16(m, uint16(len(kid)))
	m = append(m, kid...)
	return append(m, payload...)
}

// signPayload builds an hm2 token from raw payload bytes, signed by priv
// under kid over the documented message.
func signPayload(priv ed25519.PrivateKey, kid string, payload []byte) string {
	sig := ed25519.Sign(priv, signedMessage(kid, payload))
	return "hm2." + b64.EncodeToString(payload) + "." + b64.EncodeToString(sig)
}

// goodClaims are valid claims in the shape Mint gives them.
func goodClaims() Claims {
	c := baseClaims()
	c.ID, c.Issuer = strings.Repeat("b", idLen), testIssuer
	c.IssuedAt, c.NotBefore, c.Expiry = t0, t0, t0.Add(DefaultTTL)
	return c
}

// signClaims signs goodClaims, edited first, with the control-plane key.
func signClaims(edit func(*Claims)) string {
	c := goodClaims()
	if edit != nil {
		edit(&c)
	}
	return signPayload(testKey(1), testKeyID, specPayload(c))
}

// tokenParts splits a token of the documented form and decodes its payload
// and signature.
func tokenParts(t *testing.T, tok string) (payload, sig []byte) {
	t.Helper()
	rest, ok := strings.CutPrefix(tok, "hm2.")
	if !ok {
		t.Fatalf("token %q does not start with hm2.", tok)
	}
	p, s, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(s, ".") {
		t.Fatalf("token %q is not hm2.PAYLOAD.SIGNATURE", tok)
	}
	payload, err := b64.DecodeString(p)
	if err != nil {
		t.Fatal(err)
	}
	sig, err = b64.DecodeString(s)
	if err != nil || len(sig) != ed25519.SignatureSize {
		t.Fatalf("signature segment: %d bytes, %v", len(sig), err)
	}
	return payload, sig
}

// pathClaims are valid claims for each path, before Mint fills them.
func pathClaims() map[string]Claims {
	rule0, rows := 0, int64(3)
	surveyed := baseClaims()
	surveyed.Path, surveyed.JudgmentID, surveyed.RuleIndex = PathSurveyed, "jdg-77", &rule0
	approved := baseClaims()
	approved.Path, approved.RuleIndex, approved.MaxRows = PathApproved, nil, &rows
	approved.Auth = Auth{Kind: AuthApproval, Signer: "bob@example.com", Signature: testSig,
		ApprovalSHA256: hexOf("approval"), BoundSHA256: hexOf("bound")}
	return map[string]Claims{"compiled": baseClaims(), "surveyed": surveyed, "approved": approved}
}

// TestGolden pins the wire format: Ed25519 is deterministic, so a fixed key,
// id and clock give fixed tokens. A change here breaks every Pilot that has
// not been upgraded with the control plane; it needs a new version.
func TestGolden(t *testing.T) {
	t.Parallel()
	m := newMinter(t, func(c *MinterConfig) { c.Rand = bytes.NewReader(make([]byte, 16*3)) })
	var got strings.Builder
	for _, name := range []string{"compiled", "surveyed", "approved"} {
		tok, _ := mint(t, m, pathClaims()[name])
		got.WriteString(name + " " + tok + "\n")
	}
	path := filepath.Join("testdata", "golden.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("tokens differ from %s (run with -update only for a new format version):\n got %s\nwant %s", path, got.String(), want)
	}
	v := newVerifier(t, nil)
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		_, tok, _ := strings.Cut(line, " ")
		if _, err := v.Verify(tok, wantExpect()); err != nil {
			t.Errorf("golden %s: %v", line[:8], err)
		}
	}
}

// TestPayloadCanonical: a claims value has exactly one encoding. The encoder
// writes the documented bytes, decoding gives the claims back, and equal
// claims written differently in Go (another time zone, a fresh copy of a
// pointer) encode to the same bytes.
func TestPayloadCanonical(t *testing.T) {
	t.Parallel()
	for name, c := range pathClaims() {
		c.ID, c.Issuer = strings.Repeat("c", idLen), testIssuer
		c.IssuedAt, c.NotBefore, c.Expiry = t0, t0, t0.Add(DefaultTTL)
		enc := appendPayload(nil, &c)
		if !bytes.Equal(enc, specPayload(c)) {
			t.Fatalf("%s: appendPayload differs from the documented encoding", name)
		}
		if len(enc) != payloadSize(&c) {
			t.Errorf("%s: payloadSize %d, encoding is %d bytes", name, payloadSize(&c), len(enc))
		}
		back, err := decodePayload(enc)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("%s: round trip:\n got %+v\nwant %+v", name, back, c)
		}
		if again := appendPayload(nil, &back); !bytes.Equal(again, enc) {
			t.Errorf("%s: re-encoding the decoded claims gives other bytes", name)
		}

		equal := c
		zone := time.FixedZone("UTC-5", -5*3600)
		equal.IssuedAt, equal.NotBefore, equal.Expiry = c.IssuedAt.In(zone), c.NotBefore.In(zone), c.Expiry.Local()
		if c.RuleIndex != nil {
			r := *c.RuleIndex
			equal.RuleIndex = &r
		}
		if !bytes.Equal(appendPayload(nil, &equal), enc) {
			t.Errorf("%s: equal claims in another time zone encode differently", name)
		}
	}
}

// TestNonCanonicalRefused: the other ways to write the same claims, each
// properly signed, are refused.
func TestNonCanonicalRefused(t *testing.T) {
	t.Parallel()
	good := specPayload(goodClaims())
	// The rule's presence flag sits after the 14 strings.
	flagAt := 0
	for range wireStringNames {
		flagAt += 2 + int(binary.BigEndian.Uint16(good[flagAt:]))
	}
	if good[flagAt] != 1 {
		t.Fatalf("byte %d is %#x, not the rule's presence flag", flagAt, good[flagAt])
	}
	edit := func(f func(p []byte) []byte) string {
		return signPayload(testKey(1), testKeyID, f(bytes.Clone(good)))
	}
	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"presence flag 0x02 for present", edit(func(p []byte) []byte { p[flagAt] = 2; return p }), ErrMalformed},
		{"presence flag 0xff for present", edit(func(p []byte) []byte { p[flagAt] = 0xff; return p }), ErrMalformed},
		{"a zero byte after the last claim", edit(func(p []byte) []byte { return append(p, 0) }), ErrClaims},
		{"the last claim written twice", edit(func(p []byte) []byte { return append(p, p[len(p)-8:]...) }), ErrClaims},
		{"the whole payload written twice", edit(func(p []byte) []byte { return append(p, p...) }), ErrClaims},
		{"payload segment with non-zero trailing bits", nonCanonicalPayloadBits(t), ErrMalformed},
		{"payload segment padded", func() string {
			tok := signPayload(testKey(1), testKeyID, good)
			p, s, _ := strings.Cut(strings.TrimPrefix(tok, "hm2."), ".")
			return "hm2." + p + "==." + s
		}(), ErrMalformed},
	}
	v := newVerifier(t, nil)
	for _, tc := range cases {
		_, err := v.Verify(tc.token, wantExpect())
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		assertOnlySentinel(t, err, tc.want)
	}
	if _, err := v.Verify(signPayload(testKey(1), testKeyID, good), wantExpect()); err != nil {
		t.Fatalf("the unedited payload is refused, so the cases above test nothing: %v", err)
	}
}

// nonCanonicalPayloadBits signs a payload whose length leaves unused bits in
// the last base64url character, then sets one: lax base64 decodes it to the
// same, signed, payload.
func nonCanonicalPayloadBits(t *testing.T) string {
	t.Helper()
	var payload []byte
	for n := 0; ; n++ {
		payload = specPayload(func() Claims { c := goodClaims(); c.RequestID += strings.Repeat("r", n); return c }())
		if len(payload)%3 != 0 {
			break
		}
	}
	tok := signPayload(testKey(1), testKeyID, payload)
	p, s, _ := strings.Cut(strings.TrimPrefix(tok, "hm2."), ".")
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	mutated := p[:len(p)-1] + string(alphabet[strings.IndexByte(alphabet, p[len(p)-1])|1])
	lax, err := b64.DecodeString(mutated)
	if err != nil || !bytes.Equal(lax, payload) {
		t.Fatal("mutation is not a lax-base64 alias of the payload; the case tests nothing")
	}
	return "hm2." + mutated + "." + s
}

// TestPayloadByteChanges: changing any bit of a payload gives bytes that
// either do not decode or decode to other claims that encode to exactly
// those bytes: no two encodings share a claims value.
func TestPayloadByteChanges(t *testing.T) {
	t.Parallel()
	for name, c := range pathClaims() {
		c.ID, c.Issuer = strings.Repeat("d", idLen), testIssuer
		c.IssuedAt, c.NotBefore, c.Expiry = t0, t0, t0.Add(DefaultTTL)
		enc := appendPayload(nil, &c)
		for i := range enc {
			for bit := range 8 {
				p := bytes.Clone(enc)
				p[i] ^= 1 << bit
				got, err := decodePayload(p)
				if err != nil {
					continue
				}
				if reflect.DeepEqual(got, c) {
					t.Fatalf("%s: byte %d bit %d changed, same claims", name, i, bit)
				}
				if !bytes.Equal(appendPayload(nil, &got), p) {
					t.Fatalf("%s: byte %d bit %d: decoded claims re-encode to other bytes", name, i, bit)
				}
			}
		}
	}
}

// TestTokenByteChanges: every change of one byte of a genuine token (each
// bit of each base64url character, every byte outside the alphabet, a
// deletion, an insertion) is refused, with exactly one sentinel.
func TestTokenByteChanges(t *testing.T) {
	t.Parallel()
	good, _ := mint(t, newMinter(t, nil), baseClaims())
	v := newVerifier(t, nil)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	refused := func(tok, what string) {
		t.Helper()
		_, err := v.Verify(tok, wantExpect())
		if err == nil {
			t.Fatalf("accepted the token with %s", what)
		}
		n := 0
		for _, s := range sentinels {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%s: %v wraps %d sentinels", what, err, n)
		}
	}
	tried := 0
	for i := 0; i < len(good); i++ {
		c := good[i]
		var subs []byte
		if k := strings.IndexByte(alphabet, c); k >= 0 {
			for bit := range 6 {
				subs = append(subs, alphabet[k^(1<<bit)])
			}
			subs = append(subs, '.')
		} else {
			subs = append(subs, 'A', '_')
		}
		subs = append(subs, 0, '\t', '\n', '\r', ' ', '=', '+', '/', '{', '%', 0x7f, 0x80, 0xff)
		for _, s := range subs {
			refused(good[:i]+string(s)+good[i+1:], "byte "+strconv.Itoa(i)+" replaced")
			tried++
		}
		refused(good[:i]+good[i+1:], "byte "+strconv.Itoa(i)+" deleted")
		refused(good[:i]+"A"+good[i:], "a byte inserted at "+strconv.Itoa(i))
		tried += 2
	}
	t.Logf("%d single-byte changes of a %d-byte token refused", tried, len(good))
}
