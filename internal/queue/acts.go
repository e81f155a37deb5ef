// Package queue defines the human acts that close a referred request: a
// signed approval or a signed denial. Approval is a signature, not a click:
// the approver signs the canonical approval bytes with their SSH key
// (namespace harbormaster-approval), and the Pilot verifies that signature
// itself before it runs anything (invariant 1).
//
// An approval names exactly one request, target and canonical statement
// (by hash), the rehearsal the approver saw (by hash) and the guard that
// follows from it: the statement may reach no more rows than the rehearsal
// did. It expires.
package queue

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
	RehearsalSHA256 string `json:"rehearsal_sha256"`
	// MaxRows is the guard: no more rows than the rehearsal reached.
	MaxRows int64  `json:"max_rows"`
	Expires string `json:"expires"`
}

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
		return nil, fmt.Errorf("queue: canonical: %w", err)
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
	case a.Version != 1 || a.Kind != KindApproval:
		return nil, fmt.Errorf("%w: not a version 1 approval", ErrInvalid)
	case !idRE.MatchString(a.RequestID):
		return nil, fmt.Errorf("%w: bad request id", ErrInvalid)
	case a.Target == "":
		return nil, fmt.Errorf("%w: no target", ErrInvalid)
	case !hexRE.MatchString(a.StatementSHA256) || !hexRE.MatchString(a.RehearsalSHA256):
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
