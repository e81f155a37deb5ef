package marque

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// TokenType is the value of the "typ" header of every marque. Verify compares
// it exactly.
const TokenType = "harbormaster-marque+jwt"

// MaxTokenSize is the largest token, in bytes, that Verify will look at and
// Mint will produce. A marque is about 1 KiB; an armored RSA-4096 sshsig
// signature in its auth block adds under 1 KiB more.
const MaxTokenSize = 64 << 10

// Paths: which route through DESIGN.md section 3 a marque authorizes.
const (
	// PathCompiled: a Tier A rule covers the statement (no model ran).
	PathCompiled = "compiled"
	// PathSurveyed: a residual rule covers it and the Surveyor was unanimous.
	PathSurveyed = "surveyed"
	// PathApproved: a human approver signed an approval of this statement.
	PathApproved = "approved"
)

// Auth kinds: which kind of human signature a marque rests on.
const (
	// AuthDelegation: the grantor's signature over a delegation.
	AuthDelegation = "delegation"
	// AuthApproval: an approver's signature over an approval of one statement.
	AuthApproval = "approval"
)

// Sentinel errors. Every error Verify returns for a bad token wraps exactly one
// of them; Mint returns ErrClaims for claims it refuses to sign.
var (
	// ErrMalformed: not a well-formed compact JWS marque (size, encoding,
	// segments, JSON, header parameters, typ).
	ErrMalformed = errors.New("malformed marque")
	// ErrAlgorithm: the "alg" header is not EdDSA.
	ErrAlgorithm = errors.New("marque algorithm not allowed")
	// ErrSignature: the signature does not verify with the configured key, or
	// the token names another key id.
	ErrSignature = errors.New("marque signature invalid")
	// ErrExpired: now is past exp (beyond the leeway).
	ErrExpired = errors.New("marque expired")
	// ErrNotYetValid: now is before nbf or iat (beyond the leeway).
	ErrNotYetValid = errors.New("marque not yet valid")
	// ErrWrongTarget: the marque is for another target.
	ErrWrongTarget = errors.New("marque is for another target")
	// ErrWrongStatement: the marque is for another statement.
	ErrWrongStatement = errors.New("marque is for another statement")
	// ErrWrongIssuer: the marque was issued by another control plane.
	ErrWrongIssuer = errors.New("marque from another issuer")
	// ErrClaims: a required claim is missing or invalid, a claim is unknown,
	// or the lifetime exceeds the verifier's MaxTTL.
	ErrClaims = errors.New("marque claims invalid")
)

// Claims are the payload of a marque. The JSON field names are the wire
// contract between the control plane and the Pilot.
type Claims struct {
	// ID ("jti") is 128 random bits as 26 lowercase base32 characters, filled
	// by Mint. It is the primary key of the Pilot's receipt in the target, which
	// is what makes a marque single-use.
	ID string `json:"jti"`
	// Issuer ("iss") names the control plane that minted it; filled by Mint.
	Issuer string `json:"iss"`
	// RequestID ("request_id") is the gateway's request id, for correlation
	// with the logbook and the queue. Required.
	RequestID string `json:"request_id"`
	// Principal ("sub") is the agent principal the statement is run for,
	// e.g. "agent:ops-bot". Required.
	Principal string `json:"sub"`
	// Target ("target") is the target database name. Required.
	Target string `json:"target"`
	// StatementHash ("statement_sha256") is the lowercase hex SHA-256 of the
	// canonical SQL text (see StatementHash). Required.
	StatementHash string `json:"statement_sha256"`
	// Path ("path") is PathCompiled, PathSurveyed or PathApproved. Required.
	Path string `json:"path"`
	// Auth ("auth") names the human signature the marque rests on. Required.
	Auth Auth `json:"auth"`
	// JudgmentID ("judgment_id") is the Surveyor judgment; required on the
	// surveyed path.
	JudgmentID string `json:"judgment_id,omitempty"`
	// RuleIndex ("rule") is the index of the delegation rule that covered the
	// statement; required on the surveyed path, optional otherwise, >= 0.
	RuleIndex *int `json:"rule,omitempty"`
	// MaxRows ("max_rows") is the approval guard: the statement may reach no
	// more rows than its rehearsal did. Optional, >= 0.
	MaxRows *int64 `json:"max_rows,omitempty"`

	// IssuedAt ("iat"), NotBefore ("nbf") and Expiry ("exp") are JWT
	// NumericDates (integer seconds since the epoch), filled by Mint.
	IssuedAt  time.Time `json:"-"`
	NotBefore time.Time `json:"-"`
	Expiry    time.Time `json:"-"`
}

// Auth names the human signature a marque rests on (invariant 1). The Pilot
// re-verifies Signature itself; the control plane's word is not enough.
type Auth struct {
	// Kind ("kind") is AuthDelegation or AuthApproval. It must be
	// AuthApproval on PathApproved and AuthDelegation otherwise.
	Kind string `json:"kind"`
	// DelegationID ("delegation_id") is the delegation; required for
	// AuthDelegation.
	DelegationID string `json:"delegation_id,omitempty"`
	// BoundSHA256 ("bound_sha256") is the lowercase hex SHA-256 of the signed
	// canonical delegation bytes; required for AuthDelegation.
	BoundSHA256 string `json:"bound_sha256,omitempty"`
	// Signer ("signer") is the human principal that signed. Required.
	Signer string `json:"signer"`
	// Signature ("signature") is the armored sshsig signature
	// ("-----BEGIN SSH SIGNATURE-----"). Required.
	Signature string `json:"signature"`
	// ApprovalSHA256 ("approval_sha256") is the lowercase hex SHA-256 of the
	// signed canonical approval bytes; required for AuthApproval and forbidden
	// for AuthDelegation.
	ApprovalSHA256 string `json:"approval_sha256,omitempty"`
}

// StatementHash returns the lowercase hex SHA-256 of the canonical SQL text,
// the value of the statement_sha256 claim.
func StatementHash(canonicalSQL string) string {
	sum := sha256.Sum256([]byte(canonicalSQL))
	return hex.EncodeToString(sum[:])
}

// DefaultKeyID is the key id ("kid") used when a config leaves KeyID empty:
// "ed25519:" and the first 16 bytes of the SHA-256 of the raw public key, in
// hex.
func DefaultKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:16])
}

// wireClaims is the JSON form of Claims.
type wireClaims struct {
	ID            string `json:"jti"`
	Issuer        string `json:"iss"`
	RequestID     string `json:"request_id"`
	Principal     string `json:"sub"`
	Target        string `json:"target"`
	StatementHash string `json:"statement_sha256"`
	Path          string `json:"path"`
	Auth          Auth   `json:"auth"`
	JudgmentID    string `json:"judgment_id,omitempty"`
	RuleIndex     *int   `json:"rule,omitempty"`
	MaxRows       *int64 `json:"max_rows,omitempty"`
	IssuedAt      int64  `json:"iat"`
	NotBefore     int64  `json:"nbf"`
	Expiry        int64  `json:"exp"`
}

// payloadSchema lists the exact, case-sensitive member names allowed in a
// marque payload. encoding/json matches names case-insensitively, so the
// verifier checks the names itself before decoding.
var payloadSchema = &jsonSchema{
	members: keySet("jti", "iss", "request_id", "sub", "target", "statement_sha256",
		"path", "auth", "judgment_id", "rule", "max_rows", "iat", "nbf", "exp"),
	children: map[string]*jsonSchema{
		"auth": {members: keySet("kind", "delegation_id", "bound_sha256", "signer",
			"signature", "approval_sha256")},
	},
}

// headerKeys are the protected header parameters a marque may carry.
var headerKeys = keySet("alg", "kid", "typ")

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func (c Claims) wire() wireClaims {
	return wireClaims{
		ID:            c.ID,
		Issuer:        c.Issuer,
		RequestID:     c.RequestID,
		Principal:     c.Principal,
		Target:        c.Target,
		StatementHash: c.StatementHash,
		Path:          c.Path,
		Auth:          c.Auth,
		JudgmentID:    c.JudgmentID,
		RuleIndex:     c.RuleIndex,
		MaxRows:       c.MaxRows,
		IssuedAt:      numericDate(c.IssuedAt),
		NotBefore:     numericDate(c.NotBefore),
		Expiry:        numericDate(c.Expiry),
	}
}

func (w wireClaims) claims() Claims {
	return Claims{
		ID:            w.ID,
		Issuer:        w.Issuer,
		RequestID:     w.RequestID,
		Principal:     w.Principal,
		Target:        w.Target,
		StatementHash: w.StatementHash,
		Path:          w.Path,
		Auth:          w.Auth,
		JudgmentID:    w.JudgmentID,
		RuleIndex:     w.RuleIndex,
		MaxRows:       w.MaxRows,
		IssuedAt:      fromNumericDate(w.IssuedAt),
		NotBefore:     fromNumericDate(w.NotBefore),
		Expiry:        fromNumericDate(w.Expiry),
	}
}

func numericDate(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func fromNumericDate(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// MarshalJSON writes the wire form, with iat, nbf and exp as NumericDates.
func (c Claims) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.wire())
}

// UnmarshalJSON reads the wire form. It does not validate; only Verify does.
func (c *Claims) UnmarshalJSON(data []byte) error {
	var w wireClaims
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = w.claims()
	return nil
}

// decodeClaims parses a verified payload strictly: no duplicate or unknown
// members at any level, no trailing data.
func decodeClaims(payload []byte) (Claims, error) {
	// The minter writes json.Marshal of the wire claims: a payload that
	// decodes and encodes back to exactly its own bytes has no duplicate,
	// unknown or trailing members. Anything else gets the strict walk,
	// which says what is wrong.
	var w wireClaims
	if json.Unmarshal(payload, &w) == nil {
		if again, err := json.Marshal(w); err == nil && bytes.Equal(again, payload) {
			return w.claims(), nil
		}
	}
	if err := checkJSON(payload, payloadSchema); err != nil {
		if errors.Is(err, errUnknownMember) {
			return Claims{}, fmt.Errorf("%w: %w", ErrClaims, err)
		}
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrMalformed, err)
	}
	w = wireClaims{}
	if err := json.Unmarshal(payload, &w); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrClaims, err)
	}
	return w.claims(), nil
}

// jsonSchema constrains an object: which member names it may have, and the
// schemas of member values that must themselves be objects.
type jsonSchema struct {
	members  map[string]bool
	children map[string]*jsonSchema
}

var errUnknownMember = errors.New("unknown member")

// maxJSONDepth bounds nesting in untrusted JSON; a marque needs 2.
const maxJSONDepth = 8

// checkJSON reports whether data is exactly one JSON value with no duplicate
// object member names at any depth, nesting no deeper than maxJSONDepth, and,
// if schema is not nil, an object that conforms to it.
func checkJSON(data []byte, schema *jsonSchema) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walkJSON(dec, 0, schema); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

func walkJSON(dec *json.Decoder, depth int, schema *jsonSchema) error {
	if depth > maxJSONDepth {
		return errors.New("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if schema != nil && (!ok || delim != '{') {
		return fmt.Errorf("%v is not a JSON object", tok)
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
			if !ok {
				return errors.New("object member name is not a string")
			}
			if seen[key] {
				return fmt.Errorf("duplicate member %q", clip(key))
			}
			seen[key] = true
			var child *jsonSchema
			if schema != nil {
				if !schema.members[key] {
					return fmt.Errorf("%w %q", errUnknownMember, clip(key))
				}
				child = schema.children[key]
			}
			if err := walkJSON(dec, depth+1, child); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkJSON(dec, depth+1, nil); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unexpected %q", delim)
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// validate checks the claims that do not depend on the verifier's clock or
// expectations. Mint runs it before signing and Verify after, so the minter
// never signs what a verifier would refuse on its face.
func (c Claims) validate() error {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	if !validID(c.ID) {
		bad("jti %q is not 26 lowercase base32 characters", c.ID)
	}
	if c.Issuer == "" {
		bad("iss is empty")
	}
	if c.RequestID == "" {
		bad("request_id is empty")
	}
	if c.Principal == "" {
		bad("sub is empty")
	}
	if c.Target == "" {
		bad("target is empty")
	}
	if !isSHA256Hex(c.StatementHash) {
		bad("statement_sha256 is not 64 lowercase hex characters")
	}
	wantKind := ""
	switch c.Path {
	case PathCompiled:
		wantKind = AuthDelegation
	case PathSurveyed:
		wantKind = AuthDelegation
		if c.JudgmentID == "" {
			bad("judgment_id is required on the surveyed path")
		}
		if c.RuleIndex == nil {
			bad("rule is required on the surveyed path")
		}
	case PathApproved:
		wantKind = AuthApproval
	default:
		bad("path %q is not one of compiled, surveyed, approved", c.Path)
	}
	if c.RuleIndex != nil && *c.RuleIndex < 0 {
		bad("rule %d is negative", *c.RuleIndex)
	}
	if c.MaxRows != nil && *c.MaxRows < 0 {
		bad("max_rows %d is negative", *c.MaxRows)
	}

	a := c.Auth
	switch a.Kind {
	case AuthDelegation:
		if a.DelegationID == "" {
			bad("auth.delegation_id is required for a delegation")
		}
		if !isSHA256Hex(a.BoundSHA256) {
			bad("auth.bound_sha256 is not 64 lowercase hex characters")
		}
		if a.ApprovalSHA256 != "" {
			bad("auth.approval_sha256 is set on a delegation")
		}
	case AuthApproval:
		if !isSHA256Hex(a.ApprovalSHA256) {
			bad("auth.approval_sha256 is not 64 lowercase hex characters")
		}
		if a.BoundSHA256 != "" && !isSHA256Hex(a.BoundSHA256) {
			bad("auth.bound_sha256 is not 64 lowercase hex characters")
		}
	default:
		bad("auth.kind %q is not one of delegation, approval", a.Kind)
	}
	if wantKind != "" && a.Kind != "" && a.Kind != wantKind {
		bad("path %s rests on auth.kind %s, want %s", c.Path, a.Kind, wantKind)
	}
	if a.Signer == "" {
		bad("auth.signer is empty")
	}
	if !strings.HasPrefix(strings.TrimSpace(a.Signature), "-----BEGIN SSH SIGNATURE-----") {
		bad("auth.signature is not an armored SSH signature")
	}

	if c.IssuedAt.IsZero() || c.NotBefore.IsZero() || c.Expiry.IsZero() {
		bad("iat, nbf and exp are required")
	} else {
		if c.NotBefore.Before(c.IssuedAt) {
			bad("nbf %d is before iat %d", c.NotBefore.Unix(), c.IssuedAt.Unix())
		}
		if !c.Expiry.After(c.NotBefore) {
			bad("exp %d is not after nbf %d", c.Expiry.Unix(), c.NotBefore.Unix())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrClaims, strings.Join(problems, "; "))
	}
	return nil
}

// idLen is the length of a jti: 16 random bytes in unpadded base32.
const idLen = 26

func validID(s string) bool {
	if len(s) != idLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
