package marque

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Verifier defaults.
const (
	// DefaultLeeway is the clock skew Verify tolerates on iat, nbf and exp.
	DefaultLeeway = 2 * time.Second
	// DefaultMaxTTL is the longest lifetime (exp-iat) Verify accepts.
	DefaultMaxTTL = 5 * time.Minute
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Issuer is the control plane whose marques are accepted ("iss").
	// Required.
	Issuer string
	// Key is the control plane's Ed25519 public key. Required.
	Key ed25519.PublicKey
	// KeyID is the "kid" a marque must carry. Defaults to DefaultKeyID(Key).
	KeyID string
	// Clock gives the current time. Required.
	Clock func() time.Time
	// Leeway is the clock skew tolerated on iat, nbf and exp; at most one
	// minute. Defaults to 2 seconds (DefaultLeeway); set a negative value for
	// none.
	Leeway time.Duration
	// MaxTTL is the longest lifetime (exp-iat) accepted; longer marques are
	// refused with ErrClaims. Defaults to 5 minutes (DefaultMaxTTL).
	MaxTTL time.Duration
}

// WithDefaults returns a copy of the config with defaults filled in.
func (c VerifierConfig) WithDefaults() VerifierConfig {
	if c.KeyID == "" && len(c.Key) == ed25519.PublicKeySize {
		c.KeyID = DefaultKeyID(c.Key)
	}
	switch {
	case c.Leeway == 0:
		c.Leeway = DefaultLeeway
	case c.Leeway < 0:
		c.Leeway = 0
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultMaxTTL
	}
	return c
}

func (c VerifierConfig) validate() error {
	if c.Issuer == "" {
		return errors.New("Issuer is required")
	}
	if len(c.Key) != ed25519.PublicKeySize {
		return fmt.Errorf("Key is %d bytes, want %d", len(c.Key), ed25519.PublicKeySize)
	}
	if c.KeyID == "" {
		return errors.New("KeyID is required")
	}
	if c.Clock == nil {
		return errors.New("Clock is required")
	}
	if c.Leeway > time.Minute {
		return fmt.Errorf("Leeway %s is over one minute", c.Leeway)
	}
	if c.MaxTTL < time.Second {
		return fmt.Errorf("MaxTTL %s is under one second", c.MaxTTL)
	}
	return nil
}

// Verifier verifies marques. It is safe for concurrent use.
type Verifier struct {
	issuer string
	key    ed25519.PublicKey
	keyID  string
	clock  func() time.Time
	leeway time.Duration
	maxTTL time.Duration

	// header is the last protected-header segment checkHeader accepted: a
	// control plane sends the same one every time, and the check is a
	// function of the segment alone.
	header atomic.Pointer[string]
}

// NewVerifier returns a Verifier for the config, after filling defaults and
// validating it.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("marque: new verifier: %w", err)
	}
	return &Verifier{
		issuer: cfg.Issuer,
		key:    append(ed25519.PublicKey(nil), cfg.Key...),
		keyID:  cfg.KeyID,
		clock:  cfg.Clock,
		leeway: cfg.Leeway,
		maxTTL: cfg.MaxTTL,
	}, nil
}

// Expect is what the Pilot is about to execute. Both fields are required: a
// marque is only ever verified for one statement on one target.
type Expect struct {
	// Target is the target name the Pilot serves.
	Target string
	// StatementHash is StatementHash of the canonical text the Pilot will run.
	StatementHash string
}

// Verify checks the token and returns its claims if, and only if, it is a
// marque signed by the configured key and issuer, valid now, for want.Target
// and want.StatementHash. A rejected token yields an error wrapping exactly one
// of the package's sentinels. It does not check single use; the Pilot's
// receipt does.
func (v *Verifier) Verify(token string, want Expect) (Claims, error) {
	if want.Target == "" || !isSHA256Hex(want.StatementHash) {
		return Claims{}, errors.New("marque: verify: Expect needs a Target and a 64-hex-character StatementHash")
	}
	c, err := v.verify(token, want)
	if err != nil {
		return Claims{}, fmt.Errorf("marque: verify: %w", err)
	}
	return c, nil
}

func (v *Verifier) verify(token string, want Expect) (Claims, error) {
	// Everything up to the signature check runs on attacker-controlled bytes:
	// keep it small, strict and free of the payload.
	if len(token) > MaxTokenSize {
		return Claims{}, fmt.Errorf("%w: token is %d bytes, over MaxTokenSize %d", ErrMalformed, len(token), MaxTokenSize)
	}
	if err := v.splitCompact(token); err != nil {
		return Claims{}, err
	}

	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return Claims{}, fmt.Errorf("%w: %d signatures, want 1", ErrMalformed, len(jws.Signatures))
	}
	if alg := jws.Signatures[0].Protected.Algorithm; alg != string(jose.EdDSA) {
		return Claims{}, fmt.Errorf("%w: alg %q", ErrAlgorithm, alg)
	}
	payload, err := jws.Verify(v.key)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}

	// From here the bytes are the control plane's; still parse them strictly.
	c, err := decodeClaims(payload)
	if err != nil {
		return Claims{}, err
	}
	if err := c.validate(); err != nil {
		return Claims{}, err
	}
	if c.Issuer != v.issuer {
		return Claims{}, fmt.Errorf("%w: iss %q, want %q", ErrWrongIssuer, c.Issuer, v.issuer)
	}
	if life := c.Expiry.Sub(c.IssuedAt); life > v.maxTTL {
		return Claims{}, fmt.Errorf("%w: lifetime %s exceeds MaxTTL %s", ErrClaims, life, v.maxTTL)
	}
	now := v.clock()
	if now.Add(v.leeway).Before(c.IssuedAt) {
		return Claims{}, fmt.Errorf("%w: iat %s is after now %s", ErrNotYetValid, c.IssuedAt.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if now.Add(v.leeway).Before(c.NotBefore) {
		return Claims{}, fmt.Errorf("%w: nbf %s is after now %s", ErrNotYetValid, c.NotBefore.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if !now.Add(-v.leeway).Before(c.Expiry) {
		return Claims{}, fmt.Errorf("%w: exp %s is not after now %s", ErrExpired, c.Expiry.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c.Target != want.Target {
		return Claims{}, fmt.Errorf("%w: marque target %q, want %q", ErrWrongTarget, c.Target, want.Target)
	}
	if c.StatementHash != want.StatementHash {
		return Claims{}, fmt.Errorf("%w: marque statement_sha256 %s, want %s", ErrWrongStatement, c.StatementHash, want.StatementHash)
	}
	return c, nil
}

// strictB64 refuses padding, whitespace and non-zero trailing bits, so a
// marque has exactly one string form.
var strictB64 = base64.RawURLEncoding.Strict()

// splitCompact checks that token is three base64url segments, checks the
// protected header, then checks the payload and signature segments. Each
// segment must be strict base64url. The header goes first so that an "alg"
// of "none" (whose signature segment is empty) is reported as ErrAlgorithm.
func (v *Verifier) splitCompact(token string) error {
	if token == "" {
		return fmt.Errorf("%w: empty token", ErrMalformed)
	}
	if token[0] == '{' {
		return fmt.Errorf("%w: JWS JSON serialization is not accepted, only compact", ErrMalformed)
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: byte %#02x at offset %d is not base64url", ErrMalformed, c, i)
		}
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fmt.Errorf("%w: %d segments, want 3", ErrMalformed, len(parts))
	}
	if h := v.header.Load(); h == nil || *h != parts[0] {
		header, err := strictB64.DecodeString(parts[0])
		if err != nil {
			return fmt.Errorf("%w: header segment: %w", ErrMalformed, err)
		}
		if err := v.checkHeader(header); err != nil {
			return err
		}
		v.header.Store(&parts[0])
	}
	for i, p := range parts[1:] {
		if p == "" {
			return fmt.Errorf("%w: segment %d is empty", ErrMalformed, i+2)
		}
		if _, err := strictB64.DecodeString(p); err != nil {
			return fmt.Errorf("%w: segment %d: %w", ErrMalformed, i+2, err)
		}
	}
	return nil
}

// checkHeader accepts exactly {"alg":"EdDSA","kid":v.keyID,"typ":TokenType}
// in any member order. alg is checked before anything else about the key.
func (v *Verifier) checkHeader(raw []byte) error {
	if err := checkJSON(raw, nil); err != nil {
		return fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return fmt.Errorf("%w: header is not a JSON object", ErrMalformed)
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
	alg, ok := str("alg")
	if !ok {
		return fmt.Errorf("%w: header alg missing or not a string", ErrAlgorithm)
	}
	if alg != string(jose.EdDSA) {
		return fmt.Errorf("%w: alg %q, only EdDSA is accepted", ErrAlgorithm, clip(alg))
	}
	for name := range members {
		if !headerKeys[name] {
			return fmt.Errorf("%w: header parameter %q is not accepted", ErrMalformed, clip(name))
		}
	}
	if typ, ok := str("typ"); !ok || typ != TokenType {
		return fmt.Errorf("%w: typ %q, want %q", ErrMalformed, clip(typ), TokenType)
	}
	if kid, ok := str("kid"); !ok || kid != v.keyID {
		return fmt.Errorf("%w: kid %q is not the configured key %q", ErrSignature, clip(kid), v.keyID)
	}
	return nil
}

// clip shortens untrusted text quoted into an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
