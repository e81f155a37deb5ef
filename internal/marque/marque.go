package marque

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Prefix begins every marque: the name and version of its format, "hm2", and
// a dot. The version pins everything a JWS header would have said: the
// algorithm (Ed25519), the payload encoding and the signing context. There is
// no algorithm field to choose another.
const Prefix = formatVersion + "."

const formatVersion = "hm2"

// MaxTokenSize is the largest token, in bytes, that Verify will look at and
// Mint will produce. A marque is under 1 KiB; an armored RSA-4096 sshsig
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
	// ErrMalformed: not a well-formed marque (size, characters, segments,
	// base64url, signature length, payload structure).
	ErrMalformed = errors.New("malformed marque")
	// ErrAlgorithm: the token is of another version or encoding than Prefix
	// pins (a JWS, a PASETO, a marque of another version): its algorithm is
	// not Ed25519 under this package's rules, whatever it says.
	ErrAlgorithm = errors.New("marque algorithm not allowed")
	// ErrSignature: the signature does not verify with the configured key
	// under the configured key id.
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
	// ErrClaims: a required claim is missing or invalid, the payload goes on
	// past its last claim (which is how an unknown claim would show), or the
	// lifetime exceeds the verifier's MaxTTL.
	ErrClaims = errors.New("marque claims invalid")
)

// Claims are the payload of a marque. The names in parentheses are the claims'
// names in errors and in the documentation; on the wire a claim is known by its
// place in a fixed order (doc.go), never by a name.
type Claims struct {
	// ID ("jti") is 128 random bits as 26 lowercase base32 characters, filled
	// by Mint. It is the primary key of the Pilot's receipt in the target, which
	// is what makes a marque single-use.
	ID string
	// Issuer ("iss") names the control plane that minted it; filled by Mint.
	Issuer string
	// RequestID ("request_id") is the gateway's request id, for correlation
	// with the logbook and the queue. Required.
	RequestID string
	// Principal ("sub") is the agent principal the statement is run for,
	// e.g. "agent:ops-bot". Required.
	Principal string
	// Target ("target") is the target database name. Required.
	Target string
	// StatementHash ("statement_sha256") is the lowercase hex SHA-256 of the
	// canonical SQL text (see StatementHash). Required.
	StatementHash string
	// Path ("path") is PathCompiled, PathSurveyed or PathApproved. Required.
	Path string
	// Auth ("auth") names the human signature the marque rests on. Required.
	Auth Auth
	// JudgmentID ("judgment_id") is the Surveyor judgment; required on the
	// surveyed path.
	JudgmentID string
	// RuleIndex ("rule") is the index of the delegation rule that covered the
	// statement; required on the surveyed path, optional otherwise, >= 0.
	RuleIndex *int
	// MaxRows ("max_rows") is the approval guard: the statement may reach no
	// more rows than its preview counted. Optional, >= 0.
	MaxRows *int64

	// IssuedAt ("iat"), NotBefore ("nbf") and Expiry ("exp") are whole
	// seconds since the Unix epoch on the wire, filled by Mint.
	IssuedAt  time.Time
	NotBefore time.Time
	Expiry    time.Time
}

// Auth names the human signature a marque rests on (invariant 1). The Pilot
// re-verifies Signature itself; the control plane's word is not enough.
type Auth struct {
	// Kind ("kind") is AuthDelegation or AuthApproval. It must be
	// AuthApproval on PathApproved and AuthDelegation otherwise.
	Kind string
	// DelegationID ("delegation_id") is the delegation; required for
	// AuthDelegation.
	DelegationID string
	// BoundSHA256 ("bound_sha256") is the lowercase hex SHA-256 of the signed
	// canonical delegation bytes; required for AuthDelegation.
	BoundSHA256 string
	// Signer ("signer") is the human principal that signed. Required.
	Signer string
	// Signature ("signature") is the armored sshsig signature
	// ("-----BEGIN SSH SIGNATURE-----"). Required.
	Signature string
	// ApprovalSHA256 ("approval_sha256") is the lowercase hex SHA-256 of the
	// signed canonical approval bytes; required for AuthApproval and forbidden
	// for AuthDelegation.
	ApprovalSHA256 string
}

// StatementHash returns the lowercase hex SHA-256 of the canonical SQL text,
// the value of the statement_sha256 claim.
func StatementHash(canonicalSQL string) string {
	sum := sha256.Sum256([]byte(canonicalSQL))
	return hex.EncodeToString(sum[:])
}

// DefaultKeyID is the key id used when a config leaves KeyID empty:
// "ed25519:" and the first 16 bytes of the SHA-256 of the raw public key, in
// hex.
func DefaultKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:16])
}

// validate checks the claims that do not depend on the verifier's clock or
// expectations. Mint runs it before signing and Verify after, so the minter
// never signs what a verifier would refuse on its face.
func (c Claims) validate() error {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for i, p := range c.wireStrings() {
		if len(*p) > maxString {
			bad("%s is %d bytes, over %d", wireStringNames[i], len(*p), maxString)
		} else if !utf8.ValidString(*p) {
			bad("%s is not valid UTF-8", wireStringNames[i])
		}
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
	} else if !inRange(c.IssuedAt) || !inRange(c.NotBefore) || !inRange(c.Expiry) {
		bad("iat %d, nbf %d or exp %d is outside 1970 to 9999", c.IssuedAt.Unix(), c.NotBefore.Unix(), c.Expiry.Unix())
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

// inRange reports whether t is a time a marque can carry: after the Unix
// epoch and before the year 10000, where every comparison is exact.
func inRange(t time.Time) bool {
	n := t.Unix()
	return n > 0 && n < 253402300800
}

// idLen is the length of a jti: 16 bytes (a millisecond time and 10
// random bytes) in unpadded base32.
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
