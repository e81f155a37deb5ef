package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
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

// auth is the delegation's part of a marque: the grantor's signature over
// its bound, which the Pilot verifies.
func (d *Delegation) auth() marque.Auth {
	return marque.Auth{Kind: marque.AuthDelegation, DelegationID: d.ID, BoundSHA256: d.BoundSHA256,
		Signer: d.Signer, Signature: string(d.Signature)}
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
		d := g.Delegation(r.ID)
		if d != nil {
			// Known: only a revocation can have changed.
			d = &Delegation{ID: r.ID}
		} else if d, err = newDelegation([]byte(r.Canonical), []byte(r.Signature), r.Signer, r.Source, time.Unix(0, r.CreatedNS).UTC()); err != nil {
			return fmt.Errorf("gateway: load delegation %s: %w", r.ID, err)
		}
		if r.RevokedNS.Valid {
			t := time.Unix(0, r.RevokedNS.Int64).UTC()
			d.Revoked = &t
		}
		out = append(out, d)
	}
	g.absorb(out)
	now := time.Now()
	g.delegationsRead.Store(&now)
	return nil
}

// absorb merges delegations read from the store into the node's: new ones
// are added in order, a revocation recorded since is applied. Nothing is
// ever removed, and a delegation revoked here stays revoked.
func (g *Gateway) absorb(read []*Delegation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	known := make(map[string]*Delegation, len(g.delegations))
	for _, d := range g.delegations {
		known[d.ID] = d
	}
	for _, d := range read {
		switch k, ok := known[d.ID]; {
		case !ok:
			g.delegations = append(g.delegations, d)
			known[d.ID] = d
			g.cfg.Metrics.InitDelegation(d.ID)
		case k.Revoked == nil && d.Revoked != nil:
			k.Revoked = d.Revoked
		}
	}
}

// refreshDelegations is the delegations service: it reads the delegations
// other nodes added or revoked.
func (g *Gateway) refreshDelegations(ctx context.Context) error { return g.loadDelegations(ctx) }

// delegationsStale says why the node's delegations are too old to run
// anything on, or "" while they are fresh or no delegations service runs
// (one node alone, whose own writes are all it needs).
func (g *Gateway) delegationsStale() string {
	if !g.delegationsWatched.Load() {
		return ""
	}
	last := g.delegationsRead.Load()
	if last == nil {
		return "the delegations have not been read yet"
	}
	if age := time.Since(*last); age > g.cfg.Services.DelegationsStale {
		return fmt.Sprintf("the delegations could not be read from the store for %s", age.Round(time.Millisecond))
	}
	return ""
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
	// Without the planner's row estimates: anyone who reaches the API may
	// upload, and a refusal carries the report, whose lints would quote
	// how many rows a table holds (invariant 10).
	b, rep := bound.Compile(dy, p.Catalog().WithoutEstimates(), bound.Options{Now: g.cfg.Clock})
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
	act := signedAct{kind: logbook.KindDelegation, namespace: signing.NamespaceDelegation, field: "canonical", bytes: canonical, sig: signature}
	signer, err := g.signers.Verify(canonical, signature, act.namespace, b.Target, now)
	if err != nil {
		// A delegation refused on its merits lists every problem.
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
	if err := g.logAct(ctx, act, signer, map[string]string{"delegation": id, "principal": d.Grantee, "target": d.Target},
		map[string]any{"delegation_id": id, "source": source, "tier": b.Tier()}); err != nil {
		return nil, rep, err
	}
	err = g.st.InsertDelegation(ctx, store.Delegation{ID: id, Target: d.Target, Grantee: d.Grantee, Signer: d.Signer,
		Canonical: string(canonical), Signature: string(signature), Source: source, CreatedNS: now.UnixNano()})
	if err != nil {
		return nil, rep, fmt.Errorf("gateway: store delegation: %w", err)
	}
	g.absorb([]*Delegation{d})
	return g.Delegation(id), rep, nil
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

// InForce are the delegations in force for (principal, target) at now,
// as the statement path checks against them, in the order they were
// added.
func (g *Gateway) InForce(principal, target string, now time.Time) []*Delegation {
	return g.activeDelegations(principal, target, now)
}

// activeDelegations are those in force for (principal, target) at now, in
// the order they were added.
func (g *Gateway) activeDelegations(principal, target string, now time.Time) []*Delegation {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []*Delegation
	for _, d := range g.delegations {
		if d.Grantee == principal && d.Target == target && g.inForce(d, now) {
			out = append(out, d)
		}
	}
	return out
}

// ErrRevoked is returned when revoking a delegation twice.
var ErrRevoked = errors.New("already revoked")
