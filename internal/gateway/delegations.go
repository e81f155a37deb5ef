package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"harbormaster/internal/bound"
	"harbormaster/internal/logbook"
	"harbormaster/internal/signing"
	"harbormaster/internal/sqlcheck"
	"harbormaster/internal/store"
)

// Delegation is a signed delegation as the control plane holds it. It
// never changes; revocation is separate state.
type Delegation struct {
	ID          string
	Target      string
	Grantee     string
	Signer      string
	Canonical   []byte
	Signature   []byte
	BoundSHA256 string
	Bound       *bound.Bound
	Rules       []sqlcheck.Rule
	Source      string
	Created     time.Time
	Revoked     *time.Time
}

// Active reports whether the delegation is in force at now.
func (d *Delegation) Active(now time.Time) bool {
	return d.Revoked == nil && d.Bound.ActiveAt(now)
}

func (g *Gateway) loadDelegations(ctx context.Context) error {
	rows, err := g.st.Delegations(ctx)
	if err != nil {
		return fmt.Errorf("gateway: load delegations: %w", err)
	}
	var out []*Delegation
	for _, r := range rows {
		d, err := newDelegation([]byte(r.Canonical), []byte(r.Signature), r.Signer, r.Source, time.Unix(0, r.CreatedNS).UTC())
		if err != nil {
			return fmt.Errorf("gateway: load delegation %s: %w", r.ID, err)
		}
		if r.RevokedNS.Valid {
			t := time.Unix(0, r.RevokedNS.Int64).UTC()
			d.Revoked = &t
		}
		out = append(out, d)
	}
	g.mu.Lock()
	g.delegations = out
	g.mu.Unlock()
	return nil
}

func newDelegation(canonical, sig []byte, signer, source string, created time.Time) (*Delegation, error) {
	b, err := bound.ParseCanonical(canonical)
	if err != nil {
		return nil, err
	}
	rules, err := b.CheckRules()
	if err != nil {
		return nil, err
	}
	return &Delegation{ID: bound.ID(canonical), Target: b.Target, Grantee: b.Grantee, Signer: signer,
		Canonical: canonical, Signature: sig, BoundSHA256: bound.SHA256(canonical), Bound: b, Rules: rules,
		Source: source, Created: created}, nil
}

// DelegationError is a delegation the control plane will not accept, with
// every reason.
type DelegationError struct {
	Problems []string
}

func (e *DelegationError) Error() string { return strings.Join(e.Problems, "; ") }

// Unwrap makes errors.Is(err, ErrBadDelegation) true.
func (e *DelegationError) Unwrap() error { return ErrBadDelegation }

// ErrDelegationRevoked: the delegation was added before and revoked since.
// A revocation is final: the same signed delegation cannot be added again
// (the grantor signs a new one, with another id, to grant again).
var ErrDelegationRevoked = errors.New("the delegation was revoked")

// AddDelegation compiles a delegation (YAML) against its target's catalog,
// verifies the grantor's signature over the canonical bytes with the
// signers file, and stores it. Adding the same signed delegation twice is
// a no-op that returns the stored one, unless it was revoked: then the
// error wraps ErrDelegationRevoked. A delegation refused on its merits is a
// *DelegationError.
func (g *Gateway) AddDelegation(ctx context.Context, yaml, signature []byte, source string) (*Delegation, *bound.Report, error) {
	dy, err := bound.Parse(yaml, source)
	if err != nil {
		return nil, nil, &DelegationError{Problems: strings.Split(err.Error(), "\n")}
	}
	p, ok := g.targets[dy.Target]
	if !ok {
		return nil, nil, &DelegationError{Problems: []string{fmt.Sprintf("unknown target %q", dy.Target)}}
	}
	b, rep := bound.Compile(dy, p.Catalog(), bound.Options{Now: g.cfg.Clock})
	if !rep.Signable {
		var probs []string
		for _, pr := range rep.Problems {
			probs = append(probs, fmt.Sprintf("%s: %s", pr.Field, pr.Message))
		}
		return nil, rep, &DelegationError{Problems: probs}
	}
	canonical, err := b.Canonical()
	if err != nil {
		return nil, rep, err
	}
	return g.addCanonical(ctx, canonical, signature, source, rep)
}

func (g *Gateway) addCanonical(ctx context.Context, canonical, signature []byte, source string, rep *bound.Report) (*Delegation, *bound.Report, error) {
	now := g.cfg.Clock()
	b, err := bound.ParseCanonical(canonical)
	if err != nil {
		return nil, rep, &DelegationError{Problems: []string{err.Error()}}
	}
	signer, err := g.signers.Verify(canonical, signature, signing.NamespaceDelegation, b.Target, now)
	if err != nil {
		return nil, rep, &DelegationError{Problems: []string{"the signature does not verify: " + err.Error()}}
	}
	id := bound.ID(canonical)
	if d := g.Delegation(id); d != nil {
		g.mu.RLock() // Revoke sets Revoked under the lock
		revoked := d.Revoked
		g.mu.RUnlock()
		if revoked != nil {
			return nil, rep, fmt.Errorf("gateway: delegation %s: %w at %s; sign a new delegation to grant again",
				id, ErrDelegationRevoked, revoked.UTC().Format(time.RFC3339))
		}
		return d, rep, nil
	}
	d, err := newDelegation(canonical, signature, signer.Name, source, now.UTC())
	if err != nil {
		return nil, rep, &DelegationError{Problems: []string{err.Error()}}
	}
	_, err = g.append(ctx, logbook.Record{Kind: "delegation",
		Subjects: map[string]string{"delegation": id, "principal": d.Grantee, "target": d.Target, "signer": d.Signer},
		Payload: map[string]any{"delegation_id": id, "signer": d.Signer, "fingerprint": signer.Fingerprint,
			"canonical": string(canonical), "signature": string(signature), "source": source, "tier": b.Tier()}})
	if err != nil {
		return nil, rep, fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	err = g.st.InsertDelegation(ctx, store.Delegation{ID: id, Target: d.Target, Grantee: d.Grantee, Signer: d.Signer,
		Canonical: string(canonical), Signature: string(signature), Source: source, CreatedNS: now.UnixNano()})
	if err != nil {
		return nil, rep, fmt.Errorf("gateway: store delegation: %w", err)
	}
	g.mu.Lock()
	g.delegations = append(g.delegations, d)
	g.mu.Unlock()
	return d, rep, nil
}

// Delegation returns a stored delegation by id, or nil.
func (g *Gateway) Delegation(id string) *Delegation {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, d := range g.delegations {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// Delegations returns the stored delegations of a principal ("" for all).
func (g *Gateway) Delegations(principal string) []*Delegation {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []*Delegation
	for _, d := range g.delegations {
		if principal == "" || d.Grantee == principal {
			out = append(out, d)
		}
	}
	return out
}

// activeDelegations are those in force for (principal, target) at now, in
// the order they were added.
func (g *Gateway) activeDelegations(principal, target string, now time.Time) []*Delegation {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []*Delegation
	for _, d := range g.delegations {
		if d.Grantee == principal && d.Target == target && d.Active(now) {
			out = append(out, d)
		}
	}
	return out
}

// ErrRevoked is returned when revoking a delegation twice.
var ErrRevoked = errors.New("already revoked")
