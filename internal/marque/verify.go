package marque

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
	"strings"
	"time"
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
	// KeyID is the key id the minter signed under (MinterConfig.KeyID); a
	// marque signed under another fails the signature. Defaults to
	// DefaultKeyID(Key).
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
	if err := checkKeyID(c.KeyID); err != nil {
		return err
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

// verifyOptions is Ed25519 as RFC 8032 and FIPS 186-5 specify it (pure,
// cofactored, canonical encodings), verified with the public key's
// precomputed tables (curve25519-voi: about half the time of
// crypto/ed25519's, which decodes the key on every call).
var verifyOptions = &voi.Options{Verify: voi.VerifyOptionsFIPS_186_5}

// Verifier verifies marques. It is safe for concurrent use.
type Verifier struct {
	issuer string
	key    *voi.ExpandedPublicKey
	keyID  string
	prefix []byte // signingPrefix(keyID)
	clock  func() time.Time
	leeway time.Duration
	maxTTL time.Duration
}

// NewVerifier returns a Verifier for the config, after filling defaults and
// validating it.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("marque: new verifier: %w", err)
	}
	key, err := voi.NewExpandedPublicKey(voi.PublicKey(cfg.Key))
	if err != nil {
		return nil, fmt.Errorf("marque: new verifier: Key: %w", err)
	}
	return &Verifier{
		issuer: cfg.Issuer,
		key:    key,
		keyID:  cfg.KeyID,
		prefix: signingPrefix(cfg.KeyID),
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
	payloadB64, sig, err := split(token)
	if err != nil {
		return Claims{}, err
	}
	msg := make([]byte, len(v.prefix), len(v.prefix)+strictB64.DecodedLen(len(payloadB64)))
	copy(msg, v.prefix)
	if msg, err = strictB64.AppendDecode(msg, payloadB64); err != nil {
		return Claims{}, fmt.Errorf("%w: payload segment: %w", ErrMalformed, err)
	}
	if !voi.VerifyExpandedWithOptions(v.key, msg, sig[:], verifyOptions) {
		return Claims{}, fmt.Errorf("%w: the signature does not verify under key id %q", ErrSignature, v.keyID)
	}

	// From here the bytes are the control plane's; still parse them strictly.
	c, err := decodePayload(msg[len(v.prefix):])
	if err != nil {
		return Claims{}, err
	}
	return v.check(c, want)
}

// VerifyGrant checks a grant (Minter.Grant: an authorization passed as a
// value inside one process) exactly as Verify checks a token's claims
// once its signature holds: well formed, this issuer, a lifetime within
// MaxTTL, valid now, for want's target and statement.
func (v *Verifier) VerifyGrant(g Grant, want Expect) (Claims, error) {
	if want.Target == "" || !isSHA256Hex(want.StatementHash) {
		return Claims{}, errors.New("marque: verify grant: Expect needs a Target and a 64-hex-character StatementHash")
	}
	if !g.ok {
		return Claims{}, fmt.Errorf("marque: verify grant: %w: not made by Minter.Grant", ErrClaims)
	}
	c, err := v.check(g.c, want)
	if err != nil {
		return Claims{}, fmt.Errorf("marque: verify grant: %w", err)
	}
	return c, nil
}

// check is what a token's claims and a grant's must both pass.
func (v *Verifier) check(c Claims, want Expect) (Claims, error) {
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

// split checks the token's form and returns its payload segment, still in
// base64url, and its signature. The form is exactly
// Prefix + payload + "." + signature, of base64url characters only; the
// version goes first so that a token of another format (a JWS, a PASETO, a
// marque of another version) is reported as such.
func split(token string) ([]byte, [64]byte, error) {
	var sig [64]byte
	if len(token) > MaxTokenSize {
		return nil, sig, fmt.Errorf("%w: token is %d bytes, over MaxTokenSize %d", ErrMalformed, len(token), MaxTokenSize)
	}
	if token == "" {
		return nil, sig, fmt.Errorf("%w: empty token", ErrMalformed)
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return nil, sig, fmt.Errorf("%w: byte %#02x at offset %d is not base64url", ErrMalformed, c, i)
		}
	}
	version, rest, ok := strings.Cut(token, ".")
	if !ok {
		return nil, sig, fmt.Errorf("%w: no version prefix", ErrMalformed)
	}
	if version != formatVersion {
		return nil, sig, fmt.Errorf("%w: version %q, only %q is accepted", ErrAlgorithm, clip(version), formatVersion)
	}
	payload, sigB64, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, sig, fmt.Errorf("%w: 2 segments, want 3", ErrMalformed)
	}
	if strings.IndexByte(sigB64, '.') >= 0 {
		return nil, sig, fmt.Errorf("%w: more than 3 segments", ErrMalformed)
	}
	if payload == "" {
		return nil, sig, fmt.Errorf("%w: empty payload segment", ErrMalformed)
	}
	if len(sigB64) != sigChars {
		return nil, sig, fmt.Errorf("%w: signature segment is %d characters, want %d", ErrMalformed, len(sigB64), sigChars)
	}
	if _, err := strictB64.Decode(sig[:], []byte(sigB64)); err != nil {
		return nil, sig, fmt.Errorf("%w: signature segment: %w", ErrMalformed, err)
	}
	return []byte(payload), sig, nil
}

// clip shortens untrusted text quoted into an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
