package marque

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	testIssuer = "cp-test"
	testSQL    = "UPDATE public.orders SET status = 'failed' WHERE id = 42"
	testSig    = "-----BEGIN SSH SIGNATURE-----\nU1NIU0lHAAAAAQ==\n-----END SSH SIGNATURE-----\n"
)

var sentinels = []error{
	ErrMalformed, ErrAlgorithm, ErrSignature, ErrExpired, ErrNotYetValid,
	ErrWrongTarget, ErrWrongStatement, ErrWrongIssuer, ErrClaims,
}

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func hexOf(s string) string { return StatementHash(s) }

// baseClaims are valid claims for the compiled path, before Mint fills in the
// id, issuer and times.
func baseClaims() Claims {
	rule := 1
	return Claims{
		RequestID:     "req-0001",
		Principal:     "agent:ops-bot",
		Target:        "shop",
		StatementHash: StatementHash(testSQL),
		Path:          PathCompiled,
		Auth: Auth{
			Kind:         AuthDelegation,
			DelegationID: "dlg-abc",
			BoundSHA256:  hexOf("bound"),
			Signer:       "alice@example.com",
			Signature:    testSig,
		},
		RuleIndex: &rule,
	}
}

func wantExpect() Expect {
	return Expect{Target: "shop", StatementHash: StatementHash(testSQL)}
}

func newMinter(t testing.TB, mutate func(*MinterConfig)) *Minter {
	t.Helper()
	cfg := MinterConfig{Issuer: testIssuer, Key: testKey(1), Clock: fixedClock(t0)}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := NewMinter(cfg)
	if err != nil {
		t.Fatalf("NewMinter: %v", err)
	}
	return m
}

func newVerifier(t testing.TB, mutate func(*VerifierConfig)) *Verifier {
	t.Helper()
	cfg := VerifierConfig{
		Issuer: testIssuer,
		Key:    testKey(1).Public().(ed25519.PublicKey),
		Clock:  fixedClock(t0.Add(time.Second)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func mint(t testing.TB, m *Minter, c Claims) (string, Claims) {
	t.Helper()
	tok, got, err := m.Mint(c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok, got
}

// assertOnlySentinel checks that err wraps want and no other sentinel.
func assertOnlySentinel(t *testing.T, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want it to wrap %v", err, want)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Fatalf("error %v wraps %v as well as %v", err, s, want)
		}
	}
	if !strings.HasPrefix(err.Error(), "marque: ") {
		t.Fatalf("error %q lacks the operation prefix", err)
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	surveyedRule := 0
	maxRows := int64(3)
	cases := []struct {
		name   string
		claims func() Claims
	}{
		{"compiled", baseClaims},
		{"surveyed", func() Claims {
			c := baseClaims()
			c.Path = PathSurveyed
			c.JudgmentID = "jdg-77"
			c.RuleIndex = &surveyedRule
			return c
		}},
		{"approved", func() Claims {
			c := baseClaims()
			c.Path = PathApproved
			c.RuleIndex = nil
			c.MaxRows = &maxRows
			c.Auth = Auth{
				Kind:           AuthApproval,
				Signer:         "bob@example.com",
				Signature:      testSig,
				ApprovalSHA256: hexOf("approval"),
			}
			return c
		}},
	}
	m := newMinter(t, nil)
	v := newVerifier(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tok, minted := mint(t, m, tc.claims())
			got, err := v.Verify(tok, wantExpect())
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !reflect.DeepEqual(got, minted) {
				t.Fatalf("verified claims differ from minted:\n got %+v\nwant %+v", got, minted)
			}
			if !validID(got.ID) {
				t.Errorf("jti %q is not a valid id", got.ID)
			}
			if got.Issuer != testIssuer {
				t.Errorf("iss = %q, want %q", got.Issuer, testIssuer)
			}
			if !got.IssuedAt.Equal(t0) || !got.NotBefore.Equal(t0) || !got.Expiry.Equal(t0.Add(DefaultTTL)) {
				t.Errorf("times iat=%s nbf=%s exp=%s, want %s, %s, %s",
					got.IssuedAt, got.NotBefore, got.Expiry, t0, t0, t0.Add(DefaultTTL))
			}
			// The token is the documented form, and its payload is exactly
			// the encoding of the claims returned.
			payload, sig := tokenParts(t, tok)
			if !bytes.Equal(payload, specPayload(minted)) {
				t.Errorf("payload differs from the documented encoding of the minted claims")
			}
			if !ed25519.Verify(testKey(1).Public().(ed25519.PublicKey), signedMessage(DefaultKeyID(testKey(1).Public().(ed25519.PublicKey)), payload), sig) {
				t.Errorf("signature is not Ed25519 over the documented message")
			}
		})
	}
}

func TestStatementHash(t *testing.T) {
	t.Parallel()
	if got, want := StatementHash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("StatementHash(\"\") = %s, want %s", got, want)
	}
	if StatementHash("SELECT 1") == StatementHash("SELECT 1 ") {
		t.Error("hash ignores a trailing space; it must cover the exact canonical text")
	}
}

// TestMintRefuses: the minter never signs claims a verifier would refuse on
// their face; in particular no marque without a human signature (invariant 1).
func TestMintRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(*Claims)
	}{
		{"missing auth signature", func(c *Claims) { c.Auth.Signature = "" }},
		{"auth signature not armored sshsig", func(c *Claims) { c.Auth.Signature = "trust me" }},
		{"missing signer", func(c *Claims) { c.Auth.Signer = "" }},
		{"unknown path", func(c *Claims) { c.Path = "fast" }},
		{"unknown auth kind", func(c *Claims) { c.Auth.Kind = "model" }},
		{"approved path on a delegation", func(c *Claims) { c.Path = PathApproved }},
		{"compiled path on an approval", func(c *Claims) {
			c.Auth = Auth{Kind: AuthApproval, Signer: "bob", Signature: testSig, ApprovalSHA256: hexOf("a")}
		}},
		{"approval without approval hash", func(c *Claims) {
			c.Path = PathApproved
			c.Auth = Auth{Kind: AuthApproval, Signer: "bob", Signature: testSig}
		}},
		{"delegation without id", func(c *Claims) { c.Auth.DelegationID = "" }},
		{"delegation without bound hash", func(c *Claims) { c.Auth.BoundSHA256 = "" }},
		{"surveyed without judgment", func(c *Claims) { c.Path = PathSurveyed }},
		{"surveyed without rule", func(c *Claims) { c.Path, c.JudgmentID, c.RuleIndex = PathSurveyed, "j", nil }},
		{"negative rule", func(c *Claims) { r := -1; c.RuleIndex = &r }},
		{"negative max_rows", func(c *Claims) { n := int64(-1); c.MaxRows = &n }},
		{"missing request id", func(c *Claims) { c.RequestID = "" }},
		{"missing principal", func(c *Claims) { c.Principal = "" }},
		{"missing target", func(c *Claims) { c.Target = "" }},
		{"uppercase statement hash", func(c *Claims) { c.StatementHash = strings.ToUpper(c.StatementHash) }},
		{"statement text instead of hash", func(c *Claims) { c.StatementHash = testSQL }},
		{"claim over 65535 bytes", func(c *Claims) { c.RequestID = strings.Repeat("r", MaxTokenSize) }},
		{"token over MaxTokenSize", func(c *Claims) { c.RequestID = strings.Repeat("r", 50000) }},
		{"invalid UTF-8", func(c *Claims) { c.Auth.Signer = "alice\xc3" }},
	}
	m := newMinter(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := baseClaims()
			tc.mutate(&c)
			tok, _, err := m.Mint(c)
			assertOnlySentinel(t, err, ErrClaims)
			if tok != "" {
				t.Errorf("Mint returned a token %q with its error", tok)
			}
		})
	}
}

func TestMintFillsAndReplaces(t *testing.T) {
	t.Parallel()
	m := newMinter(t, func(c *MinterConfig) { c.TTL = 10*time.Second + 900*time.Millisecond })
	c := baseClaims()
	c.ID, c.Issuer = "caller-chosen", "someone-else"
	c.IssuedAt, c.Expiry = t0.Add(-time.Hour), t0.Add(time.Hour)
	_, got := mint(t, m, c)
	if got.ID == "caller-chosen" || got.Issuer != testIssuer {
		t.Errorf("Mint kept caller's jti %q / iss %q", got.ID, got.Issuer)
	}
	if got.Expiry.Sub(got.IssuedAt) != 10*time.Second {
		t.Errorf("lifetime = %s, want TTL rounded down to 10s", got.Expiry.Sub(got.IssuedAt))
	}
}

// TestMintIDs: ids are unique (the receipt key, invariant 6), begin with
// the minter's clock in milliseconds (so later ids sort later: the
// receipts' index is appended to) and end with the configured randomness;
// a failing source fails the mint.
func TestMintIDs(t *testing.T) {
	t.Parallel()
	m := newMinter(t, nil)
	seen := map[string]bool{}
	for range 1000 {
		_, c := mint(t, m, baseClaims())
		if seen[c.ID] {
			t.Fatalf("duplicate jti %s", c.ID)
		}
		seen[c.ID] = true
	}

	zero := newMinter(t, func(c *MinterConfig) { c.Rand = bytes.NewReader(make([]byte, 10)) })
	_, c := mint(t, zero, baseClaims())
	var want [16]byte
	binary.BigEndian.PutUint64(want[:8], uint64(t0.UnixMilli())<<16)
	if c.ID != idEncoding.EncodeToString(want[:]) || !strings.HasSuffix(c.ID, strings.Repeat("2", 15)) {
		t.Errorf("jti from zero bytes at %v = %q, want %q", t0, c.ID, idEncoding.EncodeToString(want[:]))
	}
	var ids []string
	for i := range 3 {
		later := newMinter(t, func(c *MinterConfig) { c.Clock = fixedClock(t0.Add(time.Duration(i) * time.Millisecond)) })
		_, c := mint(t, later, baseClaims())
		ids = append(ids, c.ID)
	}
	if !slices.IsSorted(ids) || ids[0] == ids[1] {
		t.Errorf("ids minted a millisecond apart do not sort in time: %q", ids)
	}
	// NewIDAt takes its time from the caller (the gateway: when the agent
	// sent the statement), not from the minter's clock.
	at := t0.Add(-time.Hour)
	id, err := m.NewIDAt(at)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := idEncoding.DecodeString(id)
	if err != nil || len(raw) != 16 || binary.BigEndian.Uint64(raw[:8])>>16 != uint64(at.UnixMilli()) {
		t.Errorf("NewIDAt(%v) = %q (%x, %v): want its first 6 bytes to be that millisecond", at, id, raw, err)
	}
	if _, _, err := zero.Mint(baseClaims()); !errors.Is(err, io.EOF) {
		t.Errorf("Mint with exhausted Rand: err = %v, want io.EOF", err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	priv := testKey(1)
	pub := priv.Public().(ed25519.PublicKey)
	bad := append(ed25519.PrivateKey(nil), priv...)
	bad[40] ^= 1 // public half no longer matches the seed

	minterCases := []struct {
		name string
		cfg  MinterConfig
	}{
		{"no issuer", MinterConfig{Key: priv, Clock: fixedClock(t0)}},
		{"no key", MinterConfig{Issuer: "x", Clock: fixedClock(t0)}},
		{"short key", MinterConfig{Issuer: "x", Key: priv[:32], Clock: fixedClock(t0)}},
		{"inconsistent key", MinterConfig{Issuer: "x", Key: bad, Clock: fixedClock(t0)}},
		{"no clock", MinterConfig{Issuer: "x", Key: priv}},
		{"sub-second TTL", MinterConfig{Issuer: "x", Key: priv, Clock: fixedClock(t0), TTL: time.Millisecond}},
	}
	for _, tc := range minterCases {
		if _, err := NewMinter(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), "marque: new minter: ") {
			t.Errorf("NewMinter(%s): err = %v, want a config error", tc.name, err)
		}
	}
	verifierCases := []struct {
		name string
		cfg  VerifierConfig
	}{
		{"no issuer", VerifierConfig{Key: pub, Clock: fixedClock(t0)}},
		{"no key", VerifierConfig{Issuer: "x", Clock: fixedClock(t0)}},
		{"private key bytes", VerifierConfig{Issuer: "x", Key: ed25519.PublicKey(priv), Clock: fixedClock(t0)}},
		{"no clock", VerifierConfig{Issuer: "x", Key: pub}},
		{"huge leeway", VerifierConfig{Issuer: "x", Key: pub, Clock: fixedClock(t0), Leeway: time.Hour}},
		{"sub-second MaxTTL", VerifierConfig{Issuer: "x", Key: pub, Clock: fixedClock(t0), MaxTTL: time.Millisecond}},
	}
	for _, tc := range verifierCases {
		if _, err := NewVerifier(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), "marque: new verifier: ") {
			t.Errorf("NewVerifier(%s): err = %v, want a config error", tc.name, err)
		}
	}

	mc := MinterConfig{Key: priv}.WithDefaults()
	if mc.TTL != DefaultTTL || mc.KeyID != DefaultKeyID(pub) || mc.Rand == nil {
		t.Errorf("minter defaults: TTL=%s KeyID=%q Rand=%v", mc.TTL, mc.KeyID, mc.Rand)
	}
	vc := VerifierConfig{Key: pub}.WithDefaults()
	if vc.Leeway != DefaultLeeway || vc.MaxTTL != DefaultMaxTTL || vc.KeyID != DefaultKeyID(pub) {
		t.Errorf("verifier defaults: Leeway=%s MaxTTL=%s KeyID=%q", vc.Leeway, vc.MaxTTL, vc.KeyID)
	}
	if got := (VerifierConfig{Leeway: -1}).WithDefaults().Leeway; got != 0 {
		t.Errorf("negative Leeway became %s, want 0 (none)", got)
	}
	if DefaultKeyID(pub) == DefaultKeyID(testKey(2).Public().(ed25519.PublicKey)) {
		t.Error("DefaultKeyID is the same for two keys")
	}
}

// TestConcurrent mints and verifies from many goroutines; run with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	m := newMinter(t, nil)
	v := newVerifier(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				tok, _, err := m.Mint(baseClaims())
				if err == nil {
					_, err = v.Verify(tok, wantExpect())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func BenchmarkMint(b *testing.B) {
	m := newMinter(b, nil)
	c := baseClaims()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := m.Mint(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	m := newMinter(b, nil)
	v := newVerifier(b, nil)
	tok, _ := mint(b, m, baseClaims())
	want := wantExpect()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(tok, want); err != nil {
			b.Fatal(err)
		}
	}
}

// TestImports: the package's own code (not its tests) imports neither
// go-jose nor encoding/json, so the JWS path kept in jws_test.go for
// comparison cannot creep back into what the control plane and the Pilot
// link, and nothing parses a marque by reflection.
func TestImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.Contains(p, "jose") || p == "encoding/json" {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}

// BenchmarkEd25519Sign and BenchmarkEd25519Verify are the floor under
// BenchmarkMint and BenchmarkVerify: the signature alone, over the same
// message a marque signs.
func BenchmarkEd25519Sign(b *testing.B) {
	m := newMinter(b, nil)
	c := goodClaims()
	msg := appendPayload(append([]byte(nil), m.prefix...), &c)
	b.ReportAllocs()
	for b.Loop() {
		ed25519.Sign(m.key, msg)
	}
}

func BenchmarkEd25519Verify(b *testing.B) {
	m := newMinter(b, nil)
	c := goodClaims()
	msg := appendPayload(append([]byte(nil), m.prefix...), &c)
	sig := ed25519.Sign(m.key, msg)
	pub := m.key.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("does not verify")
		}
	}
}
