package gateway

import (
	"context"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Every act a human signs (a delegation, an approval, a denial, a
// revocation, an auditable mark, a Surveyor enablement, an audit review,
// a reinstatement) goes through one mechanism, in this order:
//
//  1. parse: acts.Parse* (bound.ParseCanonical for a delegation) checks
//     the act's own fields;
//  2. freshness: an act that carries its signing time must be within
//     acts.MaxActAge of now, so an old act cannot be replayed later;
//  3. lookup: what the act governs (a request, a delegation, an audit),
//     and so the target whose signers may sign it. An approval, a denial
//     and a revocation name their target themselves: they are verified
//     (step 4) against it before the lookup, so an act no allowed signer
//     signed learns nothing of what it names (whether it exists, its
//     status, whether it has a preview: DESIGN.md invariant 10), and the
//     target of what they govern must then be the one they name;
//  4. verify: the signature, in the act's own namespace, by a signer the
//     signers file allows for that target;
//  5. log: one logbook entry naming the signer, with the act's bytes and
//     its signature, so the logbook alone proves who decided what;
//  6. store: the state change, after the entry is durable.
//
// Steps 1, 3 and 6 are each act's own; freshAct, verifyAct and logAct are
// 2, 4 and 5.

// signedAct is one act and its signature on its way through the mechanism.
type signedAct struct {
	// kind is the logbook entry's kind; namespace the signature's.
	kind      logbook.Kind
	namespace string
	// field is the entry's payload key for the act's bytes.
	field string
	// bytes and sig are the act and its armored signature.
	bytes, sig []byte
	// signedAt is the act's own signing time, checked for freshness; ""
	// for an act that carries none (it is bound to one request or
	// expires by itself).
	signedAt string
}

// freshAct is step 2: an act that carries its signing time must be within
// acts.MaxActAge of now. It comes before the lookup, so a stale act is
// refused for what it is whatever it names.
func (g *Gateway) freshAct(a signedAct) error {
	if a.signedAt != "" && !acts.Fresh(a.signedAt, g.cfg.Clock()) {
		return fmt.Errorf("gateway: %w: the act was signed at %s, more than %s from now", ErrActRefused, a.signedAt, acts.MaxActAge)
	}
	return nil
}

// verifyAct is step 4 (with step 2 again): the act's signature, by a signer
// allowed for target.
func (g *Gateway) verifyAct(a signedAct, target string) (signing.Signer, error) {
	if err := g.freshAct(a); err != nil {
		return signing.Signer{}, err
	}
	signer, err := g.signers.Verify(a.bytes, a.sig, a.namespace, target, g.cfg.Clock())
	if err != nil {
		return signing.Signer{}, fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	return signer, nil
}

// logAct appends the act's entry: subjects and payload as given, plus the
// signer, its key's fingerprint, the act and its signature.
func (g *Gateway) logAct(ctx context.Context, a signedAct, signer signing.Signer, subjects map[string]string, payload map[string]any) error {
	subjects["signer"] = signer.Name
	payload["signer"], payload["fingerprint"] = signer.Name, signer.Fingerprint
	payload[a.field], payload["signature"] = string(a.bytes), string(a.sig)
	if _, err := g.append(ctx, logbook.Record{Kind: a.kind, Subjects: subjects, Payload: payload}); err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	return nil
}
