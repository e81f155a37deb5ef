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
	"github.com/harbormaster-dev/harbormaster/internal/registry"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Delegation is a signed delegation as the control plane holds it: the
// registry's (internal/registry), which holds the delegations in force.
type Delegation = registry.Delegation

// delegationAuth is the delegation's part of a marque: the grantor's
// signature over its bound, which the Pilot verifies.
func delegationAuth(d *Delegation) marque.Auth {
	return marque.Auth{Kind: marque.AuthDelegation, DelegationID: d.ID, BoundSHA256: d.BoundSHA256,
		Signer: d.Signer, Signature: string(d.Signature)}
}

// Registry is the node's delegations in force: read them there.
func (g *Gateway) Registry() *registry.Registry { return g.reg }

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

// addCanonical verifies the grantor's signature over a canonical bound,
// records the act in the logbook and has the registry store and hold it.
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
	if d := g.reg.Delegation(id); d != nil {
		if revoked := g.reg.Revoked(d); revoked != nil {
			return nil, rep, fmt.Errorf("gateway: delegation %s: %w at %s; sign a new delegation to grant again",
				id, ErrDelegationRevoked, revoked.UTC().Format(time.RFC3339))
		}
		return d, rep, nil
	}
	d, err := registry.NewDelegation(canonical, signature, signer.Name, source, now.UTC())
	if err != nil {
		return nil, rep, &DelegationError{Problems: []string{err.Error()}}
	}
	if err := g.logAct(ctx, act, signer, map[string]string{"delegation": id, "principal": d.Grantee, "target": d.Target},
		map[string]any{"delegation_id": id, "source": source, "tier": b.Tier()}); err != nil {
		return nil, rep, err
	}
	if d, err = g.reg.Add(ctx, d); err != nil {
		return nil, rep, fmt.Errorf("gateway: %w", err)
	}
	return d, rep, nil
}
