package marque

// A copy of the JWS marque this package minted and verified before the hm2
// format (go-jose, Ed25519, alg "EdDSA", JSON claims), kept for two uses
// only: BenchmarkJWSMint and BenchmarkJWSVerify measure it beside hm2 in one
// run, and TestJWSMarqueRefused shows that a genuine JWS marque, signed with
// the control plane's own key, does not verify as hm2. Nothing outside tests
// links go-jose.

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// jwsTokenType is the old "typ" header.
const jwsTokenType = "harbormaster-marque+jwt"

type jwsAuth struct {
	Kind           string `json:"kind"`
	DelegationID   string `json:"delegation_id,omitempty"`
	BoundSHA256    string `json:"bound_sha256,omitempty"`
	Signer         string `json:"signer"`
	Signature      string `json:"signature"`
	ApprovalSHA256 string `json:"approval_sha256,omitempty"`
}

// jwsClaims is the old JSON form of Claims.
type jwsClaims struct {
	ID            string  `json:"jti"`
	Issuer        string  `json:"iss"`
	RequestID     string  `json:"request_id"`
	Principal     string  `json:"sub"`
	Target        string  `json:"target"`
	StatementHash string  `json:"statement_sha256"`
	Path          string  `json:"path"`
	Auth          jwsAuth `json:"auth"`
	JudgmentID    string  `json:"judgment_id,omitempty"`
	RuleIndex     *int    `json:"rule,omitempty"`
	MaxRows       *int64  `json:"max_rows,omitempty"`
	IssuedAt      int64   `json:"iat"`
	NotBefore     int64   `json:"nbf"`
	Expiry        int64   `json:"exp"`
}

func toJWS(c Claims) jwsClaims {
	return jwsClaims{
		ID: c.ID, Issuer: c.Issuer, RequestID: c.RequestID, Principal: c.Principal,
		Target: c.Target, StatementHash: c.StatementHash, Path: c.Path,
		Auth:       jwsAuth(c.Auth),
		JudgmentID: c.JudgmentID, RuleIndex: c.RuleIndex, MaxRows: c.MaxRows,
		IssuedAt: jwsDate(c.IssuedAt), NotBefore: jwsDate(c.NotBefore), Expiry: jwsDate(c.Expiry),
	}
}

func (w jwsClaims) claims() Claims {
	return Claims{
		ID: w.ID, Issuer: w.Issuer, RequestID: w.RequestID, Principal: w.Principal,
		Target: w.Target, StatementHash: w.StatementHash, Path: w.Path,
		Auth:       Auth(w.Auth),
		JudgmentID: w.JudgmentID, RuleIndex: w.RuleIndex, MaxRows: w.MaxRows,
		IssuedAt: fromJWSDate(w.IssuedAt), NotBefore: fromJWSDate(w.NotBefore), Expiry: fromJWSDate(w.Expiry),
	}
}

// jwsDate and fromJWSDate are the old JWT NumericDate mapping (0 is unset).
func jwsDate(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func fromJWSDate(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// jwsMinter is the old Minter.MintID, with a fixed id.
type jwsMinter struct {
	issuer string
	ttl    time.Duration
	clock  func() time.Time
	signer jose.Signer
}

func newJWSMinter(t testing.TB, key ed25519.PrivateKey) *jwsMinter {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(jwsTokenType))
	signer, err := jose.NewSigner(jose.SigningKey{
		Algorithm: jose.EdDSA,
		Key: jose.JSONWebKey{Key: key, KeyID: DefaultKeyID(key.Public().(ed25519.PublicKey)),
			Algorithm: string(jose.EdDSA)},
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &jwsMinter{issuer: testIssuer, ttl: DefaultTTL, clock: fixedClock(t0), signer: signer}
}

func (m *jwsMinter) mint(id string, c Claims) (string, error) {
	now := m.clock()
	c.ID = id
	c.Issuer = m.issuer
	c.IssuedAt = time.Unix(now.Unix(), 0).UTC()
	c.NotBefore = c.IssuedAt
	c.Expiry = c.IssuedAt.Add(m.ttl)
	if err := c.validate(); err != nil {
		return "", err
	}
	payload, err := json.Marshal(toJWS(c))
	if err != nil {
		return "", err
	}
	jws, err := m.signer.Sign(payload)
	if err != nil {
		return "", err
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		return "", err
	}
	if len(token) > MaxTokenSize {
		return "", ErrClaims
	}
	return token, nil
}

// jwsVerifier is the old Verifier.verify.
type jwsVerifier struct {
	issuer string
	key    ed25519.PublicKey
	keyID  string
	clock  func() time.Time
	leeway time.Duration
	maxTTL time.Duration
	header atomic.Pointer[string]
}

func newJWSVerifier(key ed25519.PublicKey) *jwsVerifier {
	return &jwsVerifier{issuer: testIssuer, key: key, keyID: DefaultKeyID(key),
		clock: fixedClock(t0.Add(time.Second)), leeway: DefaultLeeway, maxTTL: DefaultMaxTTL}
}

func (v *jwsVerifier) verify(token string, want Expect) (Claims, error) {
	if len(token) > MaxTokenSize {
		return Claims{}, ErrMalformed
	}
	if err := v.splitCompact(token); err != nil {
		return Claims{}, err
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, ErrMalformed
	}
	if alg := jws.Signatures[0].Protected.Algorithm; alg != string(jose.EdDSA) {
		return Claims{}, ErrAlgorithm
	}
	payload, err := jws.Verify(v.key)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	c, err := jwsDecodeClaims(payload)
	if err != nil {
		return Claims{}, err
	}
	if err := c.validate(); err != nil {
		return Claims{}, err
	}
	if c.Issuer != v.issuer {
		return Claims{}, ErrWrongIssuer
	}
	if life := c.Expiry.Sub(c.IssuedAt); life > v.maxTTL {
		return Claims{}, ErrClaims
	}
	now := v.clock()
	if now.Add(v.leeway).Before(c.IssuedAt) || now.Add(v.leeway).Before(c.NotBefore) {
		return Claims{}, ErrNotYetValid
	}
	if !now.Add(-v.leeway).Before(c.Expiry) {
		return Claims{}, ErrExpired
	}
	if c.Target != want.Target {
		return Claims{}, ErrWrongTarget
	}
	if c.StatementHash != want.StatementHash {
		return Claims{}, ErrWrongStatement
	}
	return c, nil
}

func (v *jwsVerifier) splitCompact(token string) error {
	if token == "" || token[0] == '{' {
		return ErrMalformed
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return ErrMalformed
		}
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ErrMalformed
	}
	if h := v.header.Load(); h == nil || *h != parts[0] {
		header, err := strictB64.DecodeString(parts[0])
		if err != nil {
			return ErrMalformed
		}
		if err := v.checkHeader(header); err != nil {
			return err
		}
		v.header.Store(&parts[0])
	}
	for _, p := range parts[1:] {
		if p == "" {
			return ErrMalformed
		}
		if _, err := strictB64.DecodeString(p); err != nil {
			return ErrMalformed
		}
	}
	return nil
}

func (v *jwsVerifier) checkHeader(raw []byte) error {
	if err := jwsCheckJSON(raw, nil); err != nil {
		return ErrMalformed
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return ErrMalformed
	}
	str := func(name string) (string, bool) {
		m, ok := members[name]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(m, &s) != nil {
			return "", false
		}
		return s, true
	}
	if alg, ok := str("alg"); !ok || alg != string(jose.EdDSA) {
		return ErrAlgorithm
	}
	for name := range members {
		if name != "alg" && name != "kid" && name != "typ" {
			return ErrMalformed
		}
	}
	if typ, ok := str("typ"); !ok || typ != jwsTokenType {
		return ErrMalformed
	}
	if kid, ok := str("kid"); !ok || kid != v.keyID {
		return ErrSignature
	}
	return nil
}

// jwsPayloadSchema lists the exact member names of the old payload.
var jwsPayloadSchema = &jwsSchema{
	members: jwsKeySet("jti", "iss", "request_id", "sub", "target", "statement_sha256",
		"path", "auth", "judgment_id", "rule", "max_rows", "iat", "nbf", "exp"),
	children: map[string]*jwsSchema{
		"auth": {members: jwsKeySet("kind", "delegation_id", "bound_sha256", "signer",
			"signature", "approval_sha256")},
	},
}

func jwsKeySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func jwsDecodeClaims(payload []byte) (Claims, error) {
	var w jwsClaims
	if json.Unmarshal(payload, &w) == nil {
		if again, err := json.Marshal(w); err == nil && bytes.Equal(again, payload) {
			return w.claims(), nil
		}
	}
	if err := jwsCheckJSON(payload, jwsPayloadSchema); err != nil {
		if errors.Is(err, errJWSUnknownMember) {
			return Claims{}, ErrClaims
		}
		return Claims{}, ErrMalformed
	}
	w = jwsClaims{}
	if err := json.Unmarshal(payload, &w); err != nil {
		return Claims{}, ErrClaims
	}
	return w.claims(), nil
}

type jwsSchema struct {
	members  map[string]bool
	children map[string]*jwsSchema
}

var errJWSUnknownMember = errors.New("unknown member")

func jwsCheckJSON(data []byte, schema *jwsSchema) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := jwsWalkJSON(dec, 0, schema); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

func jwsWalkJSON(dec *json.Decoder, depth int, schema *jwsSchema) error {
	if depth > 8 {
		return errors.New("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if schema != nil && (!ok || delim != '{') {
		return errors.New("not a JSON object")
	}
	if !ok {
		return nil
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return err
			}
			key, ok := keyTok.(string)
			if !ok || seen[key] {
				return errors.New("bad or duplicate member")
			}
			seen[key] = true
			var child *jwsSchema
			if schema != nil {
				if !schema.members[key] {
					return errJWSUnknownMember
				}
				child = schema.children[key]
			}
			if err := jwsWalkJSON(dec, depth+1, child); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := jwsWalkJSON(dec, depth+1, nil); err != nil {
				return err
			}
		}
	default:
		return errors.New("unexpected delimiter")
	}
	_, err = dec.Token()
	return err
}

// TestJWSCopyWorks: the copy mints and verifies its own marques, so the
// benchmarks below measure a working JWS path, and refuses hm2 marques.
func TestJWSCopyWorks(t *testing.T) {
	t.Parallel()
	m := newJWSMinter(t, testKey(1))
	v := newJWSVerifier(testKey(1).Public().(ed25519.PublicKey))
	tok, err := m.mint(strings.Repeat("a", idLen), baseClaims())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.verify(tok, wantExpect()); err != nil {
		t.Fatalf("JWS copy refuses its own marque: %v", err)
	}
	hm2, _ := mint(t, newMinter(t, nil), baseClaims())
	if _, err := v.verify(hm2, wantExpect()); err == nil {
		t.Fatal("JWS copy accepted an hm2 marque")
	}
}

// BenchmarkJWSMint and BenchmarkJWSVerify are the JWS path that
// BenchmarkMint and BenchmarkVerify replaced, on the same claims.
func BenchmarkJWSMint(b *testing.B) {
	m := newJWSMinter(b, testKey(1))
	ids := newMinter(b, nil) // ids as Mint draws them, so both mints pay for one
	c := baseClaims()
	b.ReportAllocs()
	for b.Loop() {
		id, err := ids.NewID()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.mint(id, c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJWSVerify(b *testing.B) {
	tok, err := newJWSMinter(b, testKey(1)).mint(strings.Repeat("a", idLen), baseClaims())
	if err != nil {
		b.Fatal(err)
	}
	v := newJWSVerifier(testKey(1).Public().(ed25519.PublicKey))
	want := wantExpect()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.verify(tok, want); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSideBySide runs the JWS path and hm2 alternately in each
// iteration and reports each one's mean time, so that load from other work
// on the machine falls on both alike; ns/op is the pair.
func BenchmarkSideBySide(b *testing.B) {
	key := testKey(1)
	c := baseClaims()
	want := wantExpect()
	jm, hm := newJWSMinter(b, key), newMinter(b, nil)
	jv, hv := newJWSVerifier(key.Public().(ed25519.PublicKey)), newVerifier(b, nil)
	report := func(b *testing.B, jws, hm2 time.Duration, n int) {
		b.ReportMetric(float64(jws.Nanoseconds())/float64(n), "jws-ns/op")
		b.ReportMetric(float64(hm2.Nanoseconds())/float64(n), "hm2-ns/op")
		b.ReportMetric(float64(hm2)/float64(jws), "hm2/jws")
	}
	b.Run("mint", func(b *testing.B) {
		var jws, hm2 time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			id, err := hm.NewID()
			if err == nil {
				_, err = jm.mint(id, c)
			}
			mid := time.Now()
			if err == nil {
				_, _, err = hm.Mint(c)
			}
			end := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			jws, hm2, n = jws+mid.Sub(start), hm2+end.Sub(mid), n+1
		}
		report(b, jws, hm2, n)
	})
	b.Run("verify", func(b *testing.B) {
		jtok, err := jm.mint(strings.Repeat("a", idLen), c)
		if err != nil {
			b.Fatal(err)
		}
		htok, _ := mint(b, hm, c)
		var jws, hm2 time.Duration
		n := 0
		for b.Loop() {
			start := time.Now()
			_, err := jv.verify(jtok, want)
			mid := time.Now()
			if err == nil {
				_, err = hv.Verify(htok, want)
			}
			end := time.Now()
			if err != nil {
				b.Fatal(err)
			}
			jws, hm2, n = jws+mid.Sub(start), hm2+end.Sub(mid), n+1
		}
		report(b, jws, hm2, n)
	})
}
