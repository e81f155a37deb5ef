package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger/entry"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Reconcile resolves requests left running by a crash: from the receipt in
// the target (committed: executed) or the transaction's status (aborted, or
// never reached COMMIT: not executed). It never re-executes anything.
// Requests younger than grace are left alone (their marque may still be in
// flight to a Pilot).
func (l *Ledger) Reconcile(ctx context.Context, grace time.Duration) (int, error) {
	resolved, err := l.reconcileOrphans(ctx)
	if err != nil {
		return resolved, err
	}
	n, err := l.ReconcileDeciding(ctx, grace)
	resolved += n
	if err != nil {
		return resolved, err
	}
	n, err = l.ReconcileRunning(ctx, grace)
	return resolved + n, err
}

// ReconcileRunning resolves requests left running (a marque was minted)
// whose last update is older than grace, from the receipt and the
// transaction's status. The reconcile service calls it periodically too:
// a request this node still has in flight is skipped, so it only ever
// meets requests whose outcome could not be recorded (the logbook failed
// after COMMIT, or COMMIT's outcome was unknown), or that a stopped node
// left.
func (l *Ledger) ReconcileRunning(ctx context.Context, grace time.Duration) (int, error) {
	// One reconciler at a time: the one at start and the service's.
	l.reconcileMu.Lock()
	defer l.reconcileMu.Unlock()
	resolved := 0
	running, err := l.List(ctx, Filter{Status: StatusRunning, UpdatedBefore: l.cfg.Clock().Add(-grace)})
	if err != nil {
		return resolved, err
	}
	for _, v := range running {
		p, ok := l.cfg.Targets[v.Target]
		if !ok || l.isInFlight(v.ID) {
			continue
		}
		req := &Request{ID: v.ID, Target: v.Target, MarqueID: v.MarqueID, Principal: v.Principal}
		cur, err := l.rq.List(ctx, store.RequestFilter{ID: v.ID})
		if err != nil || len(cur) != 1 {
			return resolved, fmt.Errorf("gateway: reconcile %s: %w", v.ID, errors.Join(err, ErrNotFound))
		}
		txid := cur[0].TxID
		req.TxID = txid
		// The transaction's status first: once it is final (not in
		// progress), whether the receipt exists is final too.
		if txid != "" {
			st, err := p.XactStatus(ctx, txid)
			if err != nil {
				return resolved, fmt.Errorf("gateway: reconcile %s: %w", v.ID, err)
			}
			if st == "in progress" {
				continue
			}
		}
		payload := map[string]any{"request_id": v.ID, "marque_id": v.MarqueID, "txid": txid, "reconciled": true}
		found, rows := false, int64(0)
		switch {
		case v.MarqueID != "" && txid == "":
			// One round trip, no transaction id recorded ahead: a void
			// receipt under the marque id settles it exactly (it waits for
			// a transaction still holding the key; a conflict means it
			// committed, a success burns the marque).
			if found, rows, err = p.VoidReceipt(ctx, v.MarqueID, v.ID, v.Principal); err != nil {
				return resolved, fmt.Errorf("gateway: reconcile %s: %w", v.ID, err)
			}
			payload["voided"] = !found
		case v.MarqueID != "":
			if found, rows, err = p.Receipt(ctx, v.MarqueID); err != nil {
				return resolved, fmt.Errorf("gateway: reconcile %s: %w", v.ID, err)
			}
		}
		switch {
		case found:
			req.Outcome, req.Status, req.RowsAffected = OutcomeExecuted, StatusExecuted, rows
			payload["outcome"], payload["rows_affected"] = string(pilot.Executed), rows
		default:
			req.Outcome, req.Status = OutcomeReferred, StatusWaiting
			req.Reasons = []string{"the control plane stopped before this statement committed; it did not run"}
			payload["outcome"], payload["reasons"] = "not_executed", req.Reasons
		}
		// Settled only while the marque read is still the one recorded: an
		// approving node slow to record its own (Executing) then finds it
		// settled and runs nothing, and one that recorded it first is left
		// to its receipt.
		switch err := l.record(ctx, req, payload, false, false); {
		case errors.Is(err, logbook.ErrNotApplied):
			continue
		case err != nil:
			return resolved, err
		}
		resolved++
	}
	return resolved, nil
}

// orphanWindow is how many of the newest logbook entries reconcileOrphans
// reads: only requests in flight at a stop can be orphaned.
const orphanWindow = 100000

// reconcileOrphans finds decisions the logbook holds but the store does
// not (a stop between the decision entry and the request row). No marque
// was minted for them, so nothing ran: each becomes a waiting request with
// that reason, and an execution entry records that it did not run.
func (l *Ledger) reconcileOrphans(ctx context.Context) (int, error) {
	head, _, err := l.lb.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("gateway: reconcile: %w", err)
	}
	from := max(int64(1), head-orphanWindow)
	var orphans []logbook.Entry
	err = l.lb.Iterate(ctx, logbook.Query{From: from, Kind: logbook.KindDecision}, func(e logbook.Entry) error {
		found, err := l.rq.Exists(ctx, e.Subjects["request"])
		if err != nil {
			return err
		}
		if !found {
			orphans = append(orphans, e)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("gateway: reconcile: %w", err)
	}
	for _, e := range orphans {
		d, err := entry.ReadDecision(e.Payload)
		if err != nil || d.RequestID == "" {
			continue
		}
		req := &Request{ID: d.RequestID, Principal: d.Principal, Target: d.Target, SQL: d.Statement, Canonical: d.Canonical,
			DelegationID: d.DelegationID, Outcome: OutcomeReferred, Status: StatusWaiting, Created: e.Time, Updated: l.cfg.Clock()}
		req.Reasons = d.Reasons
		switch Outcome(d.Outcome) {
		case OutcomeRejected:
			req.Outcome, req.Status = OutcomeRejected, StatusRejected
		case OutcomeRefused:
			req.Outcome, req.Status = OutcomeRefused, StatusRefused
		}
		if err := l.transit(StatusNew, req.Status); err != nil {
			return 0, err
		}
		if Outcome(d.Outcome) == OutcomeRun {
			req.Reasons = []string{"the control plane stopped before this statement ran; it did not run"}
			if _, err := l.cfg.Append(ctx, logbook.Record{Kind: logbook.KindExecution,
				Subjects: map[string]string{"request": req.ID, "target": req.Target},
				Payload:  map[string]any{"request_id": req.ID, "outcome": "not_executed", "reconciled": true, "reasons": req.Reasons}}); err != nil {
				return 0, fmt.Errorf("gateway: reconcile: %w", err)
			}
		}
		if err := l.rq.InsertIfMissing(ctx, req.row(req.Outcome)); err != nil {
			return 0, fmt.Errorf("gateway: reconcile: %w", err)
		}
	}
	return len(orphans), nil
}

// ReconcileDeciding finishes denials and expiries a stop interrupted: the
// logbook says whether the act was recorded; if not, the request waits
// again.
func (l *Ledger) ReconcileDeciding(ctx context.Context, grace time.Duration) (int, error) {
	// Only what has been deciding for longer than grace: another node may
	// be recording a denial or an expiry right now.
	deciding, err := l.List(ctx, Filter{Status: StatusDeciding, UpdatedBefore: l.cfg.Clock().Add(-grace)})
	if err != nil {
		return 0, err
	}
	for _, v := range deciding {
		final := StatusWaiting
		err := l.lb.Iterate(ctx, logbook.Query{SubjectKey: "request", SubjectValue: v.ID}, func(e logbook.Entry) error {
			switch e.Kind {
			case logbook.KindDenial:
				final = StatusDenied
			case logbook.KindExpiry:
				final = StatusExpired
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("gateway: reconcile: %w", err)
		}
		if _, err := l.Move(ctx, v.ID, StatusDeciding, final, time.Time{}); err != nil {
			return 0, fmt.Errorf("gateway: reconcile: %w", err)
		}
	}
	return len(deciding), nil
}
