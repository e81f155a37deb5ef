package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/registry"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// Errors of the queue.
var (
	ErrNotWaiting = errors.New("the request is not waiting for a decision")
	// ErrNotPreviewed: the request has no preview a human could have seen
	// (it cannot be previewed, or it reaches more rows than a preview
	// binds), so it cannot be approved here.
	ErrNotPreviewed = errors.New("the request has no preview to approve, so it cannot be approved here; deny it or run it by hand")
	// ErrPreviewChanged: the approval names a preview other than the one
	// the request has now (a human refreshed it): look again.
	ErrPreviewChanged = errors.New("the approval names another preview than the request's: the preview was refreshed, look at it again")
	ErrActRefused     = errors.New("the signed act is refused")
	ErrNotAuthorized  = errors.New("not authorized")
	// ErrAlreadyRevoked is the registry's: a revocation of a delegation
	// revoked before.
	ErrAlreadyRevoked = registry.ErrAlreadyRevoked
)

// Queue lists waiting requests on the given targets (all when nil), oldest first.
func (g *Gateway) Queue(ctx context.Context, targets []string) ([]*RequestView, error) {
	all, err := g.queryRequests(ctx, ledger.Filter{Status: StatusWaiting})
	if err != nil {
		return nil, err
	}
	if targets == nil {
		return all, nil
	}
	allowed := map[string]bool{}
	for _, t := range targets {
		allowed[t] = true
	}
	var out []*RequestView
	for _, v := range all {
		if allowed[v.Target] {
			out = append(out, v)
		}
	}
	return out, nil
}

// ProposeApproval returns the canonical approval a human would sign for a
// waiting request: it names the request's preview (computed now when it
// has none: a human is asking), and its guard is the rows the preview
// counted.
func (g *Gateway) ProposeApproval(ctx context.Context, id string) ([]byte, error) {
	v, err := g.Preview(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if v.Status != StatusWaiting {
		return nil, fmt.Errorf("gateway: %s: %w (%s)", id, ErrNotWaiting, v.Status)
	}
	pv, err := v.preview()
	if err != nil {
		if v.PreviewError != "" {
			return nil, fmt.Errorf("gateway: %s: %w: %s", id, ErrNotPreviewed, v.PreviewError)
		}
		return nil, fmt.Errorf("gateway: %s: %w", id, err)
	}
	if pv.TooMany {
		return nil, fmt.Errorf("gateway: %s: %w: it reaches more than %d rows", id, ErrNotPreviewed, pilot.MaxPreviewRows)
	}
	exp := g.cfg.Clock().Add(g.cfg.ApprovalTTL).UTC().Truncate(time.Second)
	return acts.Canonical(acts.Approval{Version: acts.ApprovalVersion, Kind: acts.KindApproval, RequestID: v.ID, Target: v.Target,
		StatementSHA256: marque.StatementHash(v.CanonicalSQL), PreviewSHA256: v.PreviewSHA256,
		MaxRows: pv.Rows, Expires: exp.Format(time.RFC3339)})
}

// Approve executes a waiting request on the strength of a human's signed
// approval. The control plane checks the approval; the Pilot checks it
// again itself before running anything.
func (g *Gateway) Approve(ctx context.Context, id string, approval, signature []byte) (*RequestView, error) {
	now := g.cfg.Clock()
	ap, err := acts.ParseApproval(approval)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	// The signature first, by a signer allowed for the target the approval
	// names (it must be the request's, below): until then nothing about
	// the request may show, neither whether it exists nor its status nor
	// whether it has a preview, which depends on rows outside the bound
	// (DESIGN.md invariant 10). The approve route needs no token.
	act := signedAct{kind: logbook.KindApproval, namespace: signing.NamespaceApproval, field: "approval", bytes: approval, sig: signature}
	signer, err := g.verifyAct(act, ap.Target)
	if err != nil {
		return nil, err
	}
	v, err := g.Request(ctx, id, "")
	if err != nil {
		return nil, err
	}
	p, ok := g.targets[v.Target]
	if !ok {
		return nil, fmt.Errorf("gateway: %w: %q", ErrUnknownTarget, v.Target)
	}
	switch {
	case ap.RequestID != v.ID || ap.Target != v.Target:
		// First: the signer may act on the target the approval names, not
		// necessarily on this request's.
		return nil, fmt.Errorf("gateway: %w: the approval is for request %s on %s", ErrActRefused, ap.RequestID, ap.Target)
	case v.Status != StatusWaiting:
		return nil, fmt.Errorf("gateway: %s: %w (%s)", id, ErrNotWaiting, v.Status)
	case v.PreviewSHA256 == "":
		return nil, fmt.Errorf("gateway: %s: %w", id, ErrNotPreviewed)
	case ap.StatementSHA256 != marque.StatementHash(v.CanonicalSQL):
		return nil, fmt.Errorf("gateway: %w: the approval is for another statement", ErrActRefused)
	case ap.PreviewSHA256 != v.PreviewSHA256:
		return nil, fmt.Errorf("gateway: %s: %w: %w", id, ErrActRefused, ErrPreviewChanged)
	case g.reg.ExpiredAt(ap.ExpiresAt(), now):
		return nil, fmt.Errorf("gateway: %w: the approval expired at %s", ErrActRefused, ap.Expires)
	}
	if pv, err := v.preview(); err != nil || pv.TooMany || ap.MaxRows > pv.Rows {
		return nil, fmt.Errorf("gateway: %w: the approval allows more rows than the preview counted", ErrActRefused)
	}
	// Claim the request before minting, so two approvals cannot both run it.
	claimed, err := g.led.Decided(ctx, id, StatusWaiting, ledger.Decision{Status: StatusRunning, Path: marque.PathApproved,
		DecidedBy: signer.Name, Act: string(approval), ActSignature: string(signature), At: now})
	if err != nil {
		return nil, fmt.Errorf("gateway: approve: %w", err)
	}
	if !claimed {
		return nil, fmt.Errorf("gateway: %s: %w", id, ErrNotWaiting)
	}
	g.led.Flying(id) // running now; periodic reconciliation waits for us
	defer g.led.Landed(id)
	req := &ledger.Request{ID: v.ID, Principal: v.Principal, Target: v.Target, SQL: v.SQL, Canonical: v.CanonicalSQL, Path: marque.PathApproved}
	if err := g.logAct(ctx, act, signer, map[string]string{"request": id, "principal": v.Principal, "target": v.Target},
		map[string]any{"request_id": id}); err != nil {
		g.unclaim(ctx, id)
		return nil, err
	}
	maxRows := ap.MaxRows
	tok, claims, err := g.minter.Mint(marque.Claims{RequestID: id, Principal: v.Principal, Target: v.Target,
		StatementHash: ap.StatementSHA256, Path: marque.PathApproved, MaxRows: &maxRows,
		Auth: marque.Auth{Kind: marque.AuthApproval, ApprovalSHA256: pilot.Digest(approval), Signer: signer.Name, Signature: string(signature)}})
	if err != nil {
		return nil, g.fail(ctx, req, fmt.Errorf("gateway: mint: %w", err))
	}
	req.MarqueID = claims.ID
	// The marque's id is durable before the Pilot can run it: a restart
	// settles the request by its receipt (Reconcile).
	if err := g.led.Executing(ctx, req, v.MarqueID); errors.Is(err, errSettledElsewhere) {
		return nil, fmt.Errorf("gateway: %s: %w (%w)", id, ErrNotWaiting, err)
	} else if err != nil {
		return nil, g.fail(ctx, req, err)
	}
	pres, err := p.ExecuteApproved(ctx, pilot.ApprovedRequest{Marque: tok, SQL: v.CanonicalSQL, Approval: approval})
	if errors.Is(err, pilot.ErrCommitUnknown) {
		// It may have run: it stays running (so the approval cannot be
		// used again) until reconciliation reads the receipt.
		g.cfg.Logger.Error("approval: commit outcome unknown", "request", id, "err", err)
		return nil, fmt.Errorf("gateway: request %s: %w", id, err)
	}
	if err != nil {
		return nil, g.fail(ctx, req, err)
	}
	req.ApplyResult(pres)
	g.cfg.Metrics.PilotRefusal(pres.Code)
	drifted := pres.Outcome != pilot.Executed && pres.Code == pilot.RefusedDrift
	if pres.Outcome != pilot.Executed {
		// A statement that would not do what its preview showed goes back
		// to the queue, for a human to look at afresh; any other refusal
		// ends the request.
		if !drifted {
			req.Status = StatusFailed
		}
		g.cfg.Metrics.Decision(marque.PathApproved, OutcomeReferred, g.cfg.Clock().Sub(now))
	} else {
		g.cfg.Metrics.Decision(marque.PathApproved, OutcomeExecuted, g.cfg.Clock().Sub(now))
	}
	// The Pilot has answered: its outcome is recorded even if the approver
	// has gone away, or the request would stay running until
	// reconciliation settled it from the receipt, seconds later.
	if err := g.led.Executed(context.WithoutCancel(ctx), req, pres); err != nil {
		return nil, err
	}
	g.cfg.Logger.Info("approval", "request", id, "principal", v.Principal, "target", v.Target, "signer", signer.Name,
		"status", req.Status, "rows", pres.RowsAffected, "code", pres.Code)
	g.led.Notify(id)
	if drifted {
		// Back in the queue with a fresh preview: the approver is a human
		// who asked, and is shown what the statement would do now. The old
		// one goes first, so that no approver is shown it again even if
		// the fresh one cannot be computed now.
		ctx := context.WithoutCancel(ctx)
		if _, err := g.led.SetPreview(ctx, id, "", "", true); err != nil {
			return nil, fmt.Errorf("gateway: %s: preview: %w", id, err)
		}
		return g.Preview(ctx, id, false)
	}
	return g.Request(ctx, id, "")
}

func (g *Gateway) unclaim(ctx context.Context, id string) {
	_ = g.led.Undecide(context.WithoutCancel(ctx), id, StatusRunning, StatusWaiting)
}

// Deny closes a waiting request on the strength of a signed denial.
func (g *Gateway) Deny(ctx context.Context, id string, denial, signature []byte) (*RequestView, error) {
	now := g.cfg.Clock()
	d, err := acts.ParseDenial(denial)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	// The signature first, as for an approval: nothing about the request
	// shows to a denial no allowed signer signed.
	act := signedAct{kind: logbook.KindDenial, namespace: signing.NamespaceDenial, field: "denial", bytes: denial, sig: signature}
	signer, err := g.verifyAct(act, d.Target)
	if err != nil {
		return nil, err
	}
	v, err := g.Request(ctx, id, "")
	if err != nil {
		return nil, err
	}
	switch {
	case d.RequestID != v.ID || d.Target != v.Target:
		// First, as for an approval.
		return nil, fmt.Errorf("gateway: %w: the denial is for another request", ErrActRefused)
	case v.Status != StatusWaiting:
		return nil, fmt.Errorf("gateway: %s: %w (%s)", id, ErrNotWaiting, v.Status)
	case d.StatementSHA256 != marque.StatementHash(v.CanonicalSQL):
		return nil, fmt.Errorf("gateway: %w: the denial is for another statement", ErrActRefused)
	}
	// Claim the request before logging, so a denial and an approval (or an
	// expiry) racing for it cannot both be recorded.
	if err := g.claim(ctx, id, StatusWaiting, StatusDeciding); err != nil {
		return nil, err
	}
	if err := g.logAct(ctx, act, signer, map[string]string{"request": id, "principal": v.Principal, "target": v.Target},
		map[string]any{"request_id": id, "reason": d.Reason}); err != nil {
		g.release(ctx, id)
		return nil, err
	}
	reasons := append(append([]string{}, v.Reasons...), "denied by "+signer.Name+": "+d.Reason)
	denied, err := g.led.Decided(ctx, id, StatusDeciding, ledger.Decision{Status: StatusDenied, DecidedBy: signer.Name,
		Act: string(denial), ActSignature: string(signature), Reasons: reasons, At: now})
	if err != nil {
		return nil, fmt.Errorf("gateway: deny: %w", err)
	}
	if !denied {
		return nil, fmt.Errorf("gateway: %s: %w", id, ErrNotWaiting)
	}
	// The reason stays in the logbook and the request; the log has ids only.
	g.cfg.Logger.Info("denial", "request", id, "principal", v.Principal, "target", v.Target, "signer", signer.Name)
	g.led.Notify(id)
	return g.Request(ctx, id, "")
}

// expireWaiting closes requests nobody answered within the queue's TTL.
func (g *Gateway) expireWaiting(ctx context.Context) error {
	now := g.cfg.Clock()
	old, err := g.queryRequests(ctx, ledger.Filter{Status: StatusWaiting, CreatedBefore: now.Add(-g.cfg.QueueTTL)})
	if err != nil {
		return err
	}
	for _, v := range old {
		if err := g.claim(ctx, v.ID, StatusWaiting, StatusDeciding); err != nil {
			continue // a human got there first
		}
		if _, err := g.append(ctx, logbook.Record{Kind: logbook.KindExpiry,
			Subjects: map[string]string{"request": v.ID, "principal": v.Principal, "target": v.Target},
			Payload:  map[string]any{"request_id": v.ID, "ttl": g.cfg.QueueTTL.String()}}); err != nil {
			g.release(ctx, v.ID)
			return err
		}
		if _, err := g.led.Move(ctx, v.ID, StatusDeciding, StatusExpired, now); err != nil {
			return err
		}
		g.led.Notify(v.ID)
	}
	return nil
}

// Revoke revokes a delegation on the strength of a signed revocation by a
// human allowed to sign revocations for its target. It takes effect for
// every statement decided after it returns.
func (g *Gateway) Revoke(ctx context.Context, revocation, signature []byte) (*Delegation, error) {
	now := g.cfg.Clock()
	r, err := acts.ParseRevocation(revocation)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	// The signature first, against the target the revocation names, as
	// for an approval: an act no allowed signer signed learns nothing of
	// the delegation (whether it exists, its target, whether it is
	// revoked).
	act := signedAct{kind: logbook.KindRevocation, namespace: signing.NamespaceRevocation, field: "revocation", bytes: revocation, sig: signature}
	signer, err := g.verifyAct(act, r.Target)
	if err != nil {
		return nil, err
	}
	d := g.reg.Delegation(r.DelegationID)
	if d == nil {
		return nil, fmt.Errorf("gateway: delegation %s: %w", r.DelegationID, ErrNotFound)
	}
	if r.Target != d.Target {
		return nil, fmt.Errorf("gateway: %w: the revocation names target %s, the delegation is on %s", ErrActRefused, r.Target, d.Target)
	}
	// The act is recorded under the registry's lock: no statement is
	// decided between the check that it is unrevoked and the revocation.
	err = g.reg.Revoke(ctx, d, now, signer.Name, string(revocation)+string(signature), func() error {
		return g.logAct(ctx, act, signer, map[string]string{"delegation": d.ID, "principal": d.Grantee, "target": d.Target},
			map[string]any{"delegation_id": d.ID, "reason": r.Reason})
	})
	switch {
	case errors.Is(err, ErrAlreadyRevoked):
		return d, fmt.Errorf("gateway: %s: %w", d.ID, ErrAlreadyRevoked)
	case err != nil:
		return nil, err
	}
	return d, nil
}

// logExpiries records, once across every node on the store, each
// delegation that has passed its expiry. A node that stops between its
// claim and the entry leaves that expiry unlogged (it is in the signed
// bound all the same).
func (g *Gateway) logExpiries(ctx context.Context) error {
	now := g.cfg.Clock()
	var due []*Delegation
	all := g.reg.Delegations("")
	g.expiryMu.Lock()
	for _, d := range all {
		exp, err := d.Bound.ExpiresAt()
		if err == nil && !now.Before(exp) && !g.expiryLogged[d.ID] {
			due = append(due, d)
		}
	}
	g.expiryMu.Unlock()
	for _, d := range due {
		// One node of all on the store logs it: the first to claim it.
		claimed, err := g.st.ClaimDelegationExpiry(ctx, d.ID, now.UnixNano())
		if err != nil {
			return err
		}
		if claimed {
			if _, err := g.append(ctx, logbook.Record{Kind: logbook.KindDelegationExpired,
				Subjects: map[string]string{"delegation": d.ID, "principal": d.Grantee, "target": d.Target},
				Payload:  map[string]any{"delegation_id": d.ID, "expires": d.Bound.Expires}}); err != nil {
				_ = g.st.ReleaseDelegationExpiry(context.WithoutCancel(ctx), d.ID)
				return err
			}
		}
		g.expiryMu.Lock()
		g.expiryLogged[d.ID] = true
		g.expiryMu.Unlock()
	}
	return nil
}

// SetSwitch records an operator's switch change in the logbook, then in the
// store, and re-reads the switches on this node at once.
func (g *Gateway) SetSwitch(ctx context.Context, k switches.Key, on bool, by string) error {
	now := g.cfg.Clock()
	if _, err := g.append(ctx, logbook.Record{Kind: logbook.KindSwitch,
		Subjects: map[string]string{"switch": k.Name + "@" + k.Scope, "signer": by},
		Payload:  map[string]any{"name": k.Name, "scope": k.Scope, "on": on, "by": by}}); err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	if err := switches.Set(ctx, g.st, k, on, by, now); err != nil {
		return err
	}
	if g.cfg.Switches != nil {
		_ = g.cfg.Switches.Poll(ctx)
	}
	return nil
}

// claim moves a request from one status to another if, and only if, it is
// still in the first: the store's conditional update is the lock.
func (g *Gateway) claim(ctx context.Context, id string, from, to Status) error {
	moved, err := g.led.Move(ctx, id, from, to, g.cfg.Clock())
	if err != nil {
		return fmt.Errorf("gateway: claim %s: %w", id, err)
	}
	if !moved {
		return fmt.Errorf("gateway: %s: %w", id, ErrNotWaiting)
	}
	return nil
}

// release returns a claimed request to waiting when its act could not be
// recorded.
func (g *Gateway) release(ctx context.Context, id string) {
	_, _ = g.led.Move(context.WithoutCancel(ctx), id, StatusDeciding, StatusWaiting, time.Time{})
}
