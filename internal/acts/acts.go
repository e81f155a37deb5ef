// Package acts defines the signed human acts: the approval or denial that
// closes a referred request, the revocation of a delegation, and the Tier B
// acts (auditable, surveyor-enable, review, reinstate). Approval is a signature, not a click:
// the approver signs the canonical approval bytes with their SSH key
// (namespace harbormaster-approval), and the Pilot verifies that signature
// itself before it runs anything (invariant 1).
//
// An approval names exactly one request, target and canonical statement
// (by hash), the preview the approver saw (by its digest) and the guard
// that follows from it: the statement may reach no more rows than the
// preview counted, and runs only if it does what the preview showed. It
// expires.
package acts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Kinds of act.
const (
	KindApproval   = "approval"
	KindDenial     = "denial"
	KindRevocation = "revocation"
	KindAuditable  = "auditable"
	KindEnable     = "surveyor-enable"
	KindReview     = "review"
	KindReinstate  = "reinstate"
)

// MaxActBytes caps a canonical act.
const MaxActBytes = 64 << 10

// Approval is what an approver signs.
type Approval struct {
	Version         int    `json:"version"`
	Kind            string `json:"kind"`
	RequestID       string `json:"request_id"`
	Target          string `json:"target"`
	StatementSHA256 string `json:"statement_sha256"`
	// PreviewSHA256 is the digest of the preview the approver was shown
	// (pilot.Preview.Digest): the Pilot computes the preview again in the
	// statement's own snapshot and runs it only if it is the same.
	PreviewSHA256 string `json:"preview_sha256"`
	// MaxRows is the guard: no more rows than the preview counted.
	MaxRows int64  `json:"max_rows"`
	Expires string `json:"expires"`
}

// ApprovalVersion is the version of the approval format: 2 names a
// preview's digest (version 1 named a rehearsal, which ran the statement
// on referral, and is no longer accepted).
const ApprovalVersion = 2

// Denial is what a human signs to deny a request.
type Denial struct {
	Version         int    `json:"version"`
	Kind            string `json:"kind"`
	RequestID       string `json:"request_id"`
	Target          string `json:"target"`
	StatementSHA256 string `json:"statement_sha256"`
	Reason          string `json:"reason"`
}

// Revocation is what a grantor or operator signs to revoke a delegation.
type Revocation struct {
	Version      int    `json:"version"`
	Kind         string `json:"kind"`
	DelegationID string `json:"delegation_id"`
	Target       string `json:"target"`
	Reason       string `json:"reason"`
	Time         string `json:"time"`
}

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid act")

// Canonical renders an act as the exact bytes that are signed: JSON with
// fields in declaration order, no HTML escaping, a final newline.
func Canonical(act any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(act); err != nil {
		return nil, fmt.Errorf("acts: canonical: %w", err)
	}
	return buf.Bytes(), nil
}

// parse decodes data into v and refuses anything not exactly canonical.
func parse(data []byte, v any) error {
	if len(data) > MaxActBytes {
		return fmt.Errorf("%w: over %d bytes", ErrInvalid, MaxActBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	again, err := Canonical(v)
	if err != nil {
		return err
	}
	if !bytes.Equal(again, data) {
		return fmt.Errorf("%w: not in canonical form", ErrInvalid)
	}
	return nil
}

var (
	hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	idRE  = regexp.MustCompile(`^[a-z]{2,4}_[a-z2-7]{8,40}$`)
)

// ParseApproval reads and validates canonical approval bytes.
func ParseApproval(data []byte) (*Approval, error) {
	var a Approval
	if err := parse(data, &a); err != nil {
		return nil, err
	}
	switch {
	case a.Version != ApprovalVersion || a.Kind != KindApproval:
		return nil, fmt.Errorf("%w: not a version %d approval", ErrInvalid, ApprovalVersion)
	case !idRE.MatchString(a.RequestID):
		return nil, fmt.Errorf("%w: bad request id", ErrInvalid)
	case a.Target == "":
		return nil, fmt.Errorf("%w: no target", ErrInvalid)
	case !hexRE.MatchString(a.StatementSHA256) || !hexRE.MatchString(a.PreviewSHA256):
		return nil, fmt.Errorf("%w: bad hash", ErrInvalid)
	case a.MaxRows < 0:
		return nil, fmt.Errorf("%w: negative max_rows", ErrInvalid)
	}
	if _, err := time.Parse(time.RFC3339, a.Expires); err != nil {
		return nil, fmt.Errorf("%w: bad expires", ErrInvalid)
	}
	return &a, nil
}

// ExpiresAt is the approval's expiry.
func (a *Approval) ExpiresAt() time.Time {
	t, _ := time.Parse(time.RFC3339, a.Expires)
	return t
}

// ParseDenial reads and validates canonical denial bytes.
func ParseDenial(data []byte) (*Denial, error) {
	var d Denial
	if err := parse(data, &d); err != nil {
		return nil, err
	}
	if d.Version != 1 || d.Kind != KindDenial || !idRE.MatchString(d.RequestID) || d.Target == "" || !hexRE.MatchString(d.StatementSHA256) {
		return nil, fmt.Errorf("%w: not a valid version 1 denial", ErrInvalid)
	}
	return &d, nil
}

// ParseRevocation reads and validates canonical revocation bytes.
func ParseRevocation(data []byte) (*Revocation, error) {
	var r Revocation
	if err := parse(data, &r); err != nil {
		return nil, err
	}
	if r.Version != 1 || r.Kind != KindRevocation || r.DelegationID == "" || r.Target == "" {
		return nil, fmt.Errorf("%w: not a valid version 1 revocation", ErrInvalid)
	}
	if _, err := time.Parse(time.RFC3339, r.Time); err != nil {
		return nil, fmt.Errorf("%w: bad time", ErrInvalid)
	}
	return &r, nil
}

// Auditable is a reviewer's statement that a residual clause can be judged
// from the evidence set, so the sampled audit can correct it.
type Auditable struct {
	Version      int    `json:"version"`
	Kind         string `json:"kind"`
	DelegationID string `json:"delegation_id"`
	Rule         int    `json:"rule"`
	Note         string `json:"note"`
	// Time is when it was signed (RFC 3339); acts are refused when stale.
	Time string `json:"time"`
}

// Enable turns the Surveyor on (or off) for one residual rule, naming the
// Surveyor identity and the bundle in force.
type Enable struct {
	Version      int    `json:"version"`
	Kind         string `json:"kind"`
	DelegationID string `json:"delegation_id"`
	Rule         int    `json:"rule"`
	Surveyor     string `json:"surveyor"`
	Bundle       string `json:"bundle"`
	On           bool   `json:"on"`
	Time         string `json:"time"`
}

// Review is a reviewer's verdict on a sampled judgment.
type Review struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	AuditID string `json:"audit_id"`
	Verdict string `json:"verdict"` // "right" or "wrong"
	Note    string `json:"note"`
}

// Reinstate lifts an audit suspension of a delegation's fast path.
type Reinstate struct {
	Version      int    `json:"version"`
	Kind         string `json:"kind"`
	DelegationID string `json:"delegation_id"`
	Note         string `json:"note"`
	Time         string `json:"time"`
}

// ParseAuditable, ParseEnable, ParseReview and ParseReinstate read and
// validate canonical acts.
func ParseAuditable(data []byte) (*Auditable, error) {
	var a Auditable
	if err := parse(data, &a); err != nil {
		return nil, err
	}
	if a.Version != 1 || a.Kind != KindAuditable || a.DelegationID == "" || a.Rule < 0 || !validTime(a.Time) {
		return nil, fmt.Errorf("%w: not a valid version 1 auditable mark", ErrInvalid)
	}
	return &a, nil
}

// ParseEnable reads a canonical enable act.
func ParseEnable(data []byte) (*Enable, error) {
	var e Enable
	if err := parse(data, &e); err != nil {
		return nil, err
	}
	if e.Version != 1 || e.Kind != KindEnable || e.DelegationID == "" || e.Rule < 0 || e.Surveyor == "" || e.Bundle == "" || !validTime(e.Time) {
		return nil, fmt.Errorf("%w: not a valid version 1 enable act", ErrInvalid)
	}
	return &e, nil
}

// ParseReview reads a canonical review.
func ParseReview(data []byte) (*Review, error) {
	var r Review
	if err := parse(data, &r); err != nil {
		return nil, err
	}
	if r.Version != 1 || r.Kind != KindReview || r.AuditID == "" || (r.Verdict != "right" && r.Verdict != "wrong") {
		return nil, fmt.Errorf("%w: not a valid version 1 review", ErrInvalid)
	}
	return &r, nil
}

// ParseReinstate reads a canonical reinstatement.
func ParseReinstate(data []byte) (*Reinstate, error) {
	var r Reinstate
	if err := parse(data, &r); err != nil {
		return nil, err
	}
	if r.Version != 1 || r.Kind != KindReinstate || r.DelegationID == "" || !validTime(r.Time) {
		return nil, fmt.Errorf("%w: not a valid version 1 reinstatement", ErrInvalid)
	}
	return &r, nil
}

// Stamp renders a signing time for an act.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// MaxActAge is how far from now a time-stamped act may be signed.
const MaxActAge = 10 * time.Minute

// Fresh reports whether a stamped act was signed within MaxActAge of now.
func Fresh(stamp string, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return false
	}
	d := now.Sub(t)
	return d <= MaxActAge && d >= -MaxActAge
}

func validTime(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}
