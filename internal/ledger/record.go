package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Decide records the decision (DESIGN.md section 3, step 6): durably in
// the logbook first, with the request row in the same commit. If the
// logbook cannot be written, nothing executes. The request's status
// follows from its outcome and path; its outcome becomes the one the
// agent reads. evaluated is what the entry says of the delegations the
// route evaluated.
func (l *Ledger) Decide(ctx context.Context, req *Request, evaluated any) error {
	rec, agentOutcome, err := l.decision(req, evaluated)
	if err != nil {
		return err
	}
	if _, err := l.cfg.Append(ctx, rec); err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	req.Outcome = agentOutcome
	return nil
}

// DecideExecuted records the decision on a read that ran while it was
// being made (authorized in process for a read: no receipt) and the read's
// outcome, res, in one commit: the decision entry and right after it the
// execution entry (logbook.Record.Then), with the request row, executed.
// It is called before any of the read's rows leave (DESIGN.md invariant
// 7); if it fails, neither entry exists and the rows must be dropped. No
// crash leaves such a read running for reconciliation to guess at: the
// read changed nothing, and either both entries are durable or neither.
func (l *Ledger) DecideExecuted(ctx context.Context, req *Request, evaluated any, res *pilot.Result) error {
	if res.Outcome != pilot.Executed {
		return fmt.Errorf("gateway: request %s: DecideExecuted with outcome %q", req.ID, res.Outcome)
	}
	rec, _, err := l.decision(req, evaluated)
	if err != nil {
		return err
	}
	if req.Status != StatusRunning {
		return fmt.Errorf("gateway: request %s: DecideExecuted on a decision that is %s, not running: %w", req.ID, req.Status, ErrForbidden)
	}
	req.ApplyResult(res)
	payload := ExecutedPayload(req, res)
	// No receipt in the target proves it ran: this entry, committed with
	// its decision, is the record (faults.Check reads it so).
	payload["receipt"] = false
	exec, logged, err := l.execution(req, payload, false, true)
	if err != nil {
		return err
	}
	// One row, written as it ends: the decision's insert carries the
	// outcome, and the execution entry has no update of its own (they
	// commit together, so no reader ever sees it running).
	req.Updated = l.cfg.Clock()
	row := req.row(req.Outcome)
	row.RowsAffected = req.RowsAffected
	// As a View: the two entries and the row may commit in the logbook's
	// journal first, the row reaching the store with them.
	q, args := l.rq.InsertView(row)
	rec.With, rec.View = nil, &logbook.View{SQL: q, Args: args}
	exec.With = nil
	rec.Then = &exec
	if _, err := l.cfg.Append(ctx, rec); err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	logged()
	return nil
}

// Recording reports whether the logbook is known to be taking entries
// (logbook.Logbook.Recording): a hint for what may run before its
// decision is recorded, never a promise that the next entry will be.
func (l *Ledger) Recording() bool { return l.lb != nil && l.lb.Recording() }

// decision is the decision entry of req, with its request row, and the
// outcome the agent reads once it is recorded; it sets req's status.
func (l *Ledger) decision(req *Request, evaluated any) (logbook.Record, Outcome, error) {
	to := StatusWaiting
	switch {
	case req.Outcome == OutcomeRejected:
		to = StatusRejected
	case req.Outcome == OutcomeRefused:
		to = StatusRefused
	case req.Path != "":
		to, req.Outcome = StatusRunning, OutcomeRun
	}
	if err := l.transit(StatusNew, to); err != nil {
		return logbook.Record{}, "", err
	}
	req.Status = to
	subjects := map[string]string{"request": req.ID, "principal": req.Principal, "target": req.Target}
	if req.DelegationID != "" {
		subjects["delegation"] = req.DelegationID
	}
	if req.JudgmentID != "" {
		subjects["judgment"] = req.JudgmentID
	}
	payload := map[string]any{
		"request_id": req.ID, "principal": req.Principal, "target": req.Target,
		"statement": req.SQL, "canonical_sql": req.Canonical, "statement_sha256": marque.StatementHash(req.Canonical),
		"outcome": string(req.Outcome), "path": req.Path, "delegation_id": req.DelegationID, "rule": req.Rule,
		"reasons": nonNil(req.Reasons), "evaluated": evaluated, "judgment_id": req.JudgmentID,
	}
	if len(req.SQL) > maxLoggedStatement {
		// A statement past the check's limit is refused unread; its entry
		// keeps a prefix, its length and its hash, so the entry (at most
		// 1 MiB of canonical JSON, escapes included) is always recorded.
		sum := sha256.Sum256([]byte(req.SQL))
		payload["statement"] = strings.ToValidUTF8(req.SQL[:maxLoggedStatement], "")
		payload["statement_bytes"] = len(req.SQL)
		payload["statement_text_sha256"] = hex.EncodeToString(sum[:])
	}
	if req.Detail != "" {
		payload["detail"] = req.Detail
	}
	if req.MarqueID != "" {
		// The id the marque will carry: a restart settles the request by
		// it (its receipt, or a void receipt under it).
		payload["marque_id"] = req.MarqueID
	}
	if req.TxID != "" {
		// The surveyed path's target transaction, open already.
		payload["txid"] = req.TxID
	}
	agentOutcome := req.Outcome
	if agentOutcome == OutcomeRun {
		// The agent sees executed or referred, never "run".
		agentOutcome = OutcomeReferred
	}
	req.Updated = req.Created
	row := req.row(agentOutcome)
	rec := logbook.Record{Kind: logbook.KindDecision, Subjects: subjects, Payload: payload}
	if to == StatusRunning {
		// A statement decided to run: its row is read through List (which
		// waits for logbook.Logbook.Visible) and moved only by records
		// that commit in the store after every entry before them (an If
		// or a With), so it may be a View and the decision may commit in
		// the logbook's journal first.
		q, args := l.rq.InsertView(row)
		rec.View = &logbook.View{SQL: q, Args: args}
	} else {
		// A referral's row is the queue's: humans' acts and the referral
		// limits move and count it in the store directly. It commits
		// with its decision entry, in one group commit.
		rec.With = func(ctx context.Context, tx *sql.Tx) error { return l.rq.Insert(ctx, tx, row) }
	}
	return rec, agentOutcome, nil
}

// maxLoggedStatement is the most of a statement's text a decision entry
// holds: the static check's own limit (sqlcheck.Limits.MaxBytes), so only
// a statement it refuses unread is cut.
const maxLoggedStatement = 64 << 10

// Executing records an approved statement's marque id durably before the
// Pilot may run it, so a crash is reconciled from the receipt under that
// id, never re-executed. previous is the marque id the request had when
// this node claimed it (none, or the fast path's refused one).
// ErrSettledElsewhere: it was settled meanwhile, and must not run.
func (l *Ledger) Executing(ctx context.Context, req *Request, previous string) error {
	// Another node's reconciliation may have settled the request while this
	// one was slow to get here (a stalled store): the marque is recorded,
	// with its entry, only while the request is still running with the
	// marque id it had when this node claimed it; otherwise neither is,
	// and nothing runs.
	claim := func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return l.rq.ClaimMarque(ctx, tx, req.ID, previous, req.MarqueID, store.RequestStatus(StatusRunning), l.cfg.Clock().UnixNano())
	}
	_, err := l.cfg.Append(ctx, logbook.Record{Kind: logbook.KindExecutionPending,
		Subjects: map[string]string{"request": req.ID, "marque": req.MarqueID, "target": req.Target},
		Payload:  map[string]any{"request_id": req.ID, "marque_id": req.MarqueID}, If: claim})
	switch {
	case errors.Is(err, logbook.ErrNotApplied):
		return ErrSettledElsewhere
	case err != nil:
		return fmt.Errorf("%w: %w", ErrLogUnavailable, err)
	}
	return nil
}

// RecordLater records an executed statement's outcome (step 9) while the
// agent is answered. Get waits for it, so a read after the answer sees
// the final state; Drain waits for all of them.
func (l *Ledger) RecordLater(ctx context.Context, req *Request, res *pilot.Result) {
	done := make(chan struct{})
	l.pendMu.Lock()
	if l.draining {
		// Stopping: record it now, before the answer.
		l.pendMu.Unlock()
		if err := l.record(context.WithoutCancel(ctx), req, ExecutedPayload(req, res), false, true); err != nil {
			l.cfg.Logger.Error("execution entry", "request", req.ID, "err", err)
		}
		return
	}
	if l.pending == nil {
		l.pending = map[string]chan struct{}{}
	}
	l.pending[req.ID] = done
	l.inflight.Add(1)
	l.pendMu.Unlock()
	l.Flying(req.ID)
	go func() {
		defer l.inflight.Done()
		defer l.Landed(req.ID)
		if err := l.record(context.WithoutCancel(ctx), req, ExecutedPayload(req, res), true, true); err != nil {
			// The request stays running; Reconcile resolves it from the receipt.
			l.cfg.Logger.Error("execution entry", "request", req.ID, "err", err)
		}
		l.pendMu.Lock()
		delete(l.pending, req.ID)
		l.pendMu.Unlock()
		close(done)
	}()
}

// Flying marks request id as in flight on this node (between its decision
// and its execution entry), so periodic reconciliation leaves it alone;
// Landed undoes one Flying. The marks nest: the statement path and
// RecordLater each hold one.
func (l *Ledger) Flying(id string) {
	l.pendMu.Lock()
	defer l.pendMu.Unlock()
	if l.flights == nil {
		l.flights = map[string]int{}
	}
	l.flights[id]++
}

// Landed undoes one Flying.
func (l *Ledger) Landed(id string) {
	l.pendMu.Lock()
	defer l.pendMu.Unlock()
	if l.flights[id]--; l.flights[id] <= 0 {
		delete(l.flights, id)
	}
}

func (l *Ledger) isInFlight(id string) bool {
	l.pendMu.Lock()
	defer l.pendMu.Unlock()
	return l.flights[id] > 0
}

// settled waits until request id's execution entry, if one is being
// written, is written (or ctx ends).
func (l *Ledger) settled(ctx context.Context, id string) {
	l.pendMu.Lock()
	done, ok := l.pending[id]
	l.pendMu.Unlock()
	if ok {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
}

// HoldExecutionEntry makes request id look as if its execution entry were
// still being written, until release is called (tests).
func (l *Ledger) HoldExecutionEntry(id string) (release func()) {
	done := make(chan struct{})
	l.pendMu.Lock()
	if l.pending == nil {
		l.pending = map[string]chan struct{}{}
	}
	l.pending[id] = done
	l.pendMu.Unlock()
	return func() {
		l.pendMu.Lock()
		delete(l.pending, id)
		l.pendMu.Unlock()
		close(done)
	}
}

// Drain waits until every execution entry written after its answer is
// written; from then on they are written before the answer. The control
// plane calls it before it stops its logbook.
func (l *Ledger) Drain() {
	l.pendMu.Lock()
	l.draining = true
	l.pendMu.Unlock()
	l.inflight.Wait()
}

// Executed records the execution's outcome (step 9): the request, its
// status set from the Pilot's result (ApplyResult, and then the caller's
// judgment: failed, or back to waiting), moves from running.
func (l *Ledger) Executed(ctx context.Context, req *Request, res *pilot.Result) error {
	return l.record(ctx, req, ExecutedPayload(req, res), false, true)
}

// ExecutedPayload is the execution entry of a statement the Pilot ran
// (or refused).
func ExecutedPayload(req *Request, res *pilot.Result) map[string]any {
	p := map[string]any{"request_id": req.ID, "marque_id": req.MarqueID, "outcome": string(res.Outcome),
		"code": res.Code, "rows_affected": res.RowsAffected, "reasons": nonNil(res.Reasons), "txid": res.TxID,
		"executed_sql": res.ExecutedSQL, "detail": res.Detail}
	if len(res.ExecutedArgs) > 0 {
		// A template ran: these are the values bound to its $1..$n.
		p["executed_args"] = res.ExecutedArgs
	}
	return p
}

// record writes the execution entry and the request's final state, a move
// from running; a lazy one (an executed statement's, final) shares the
// next decision's commit (logbook.Record.Lazy), its row as a View. With
// cond, the entry and the row are written only while the row is still
// running under the marque id the request holds (a reconciler that
// settled it first keeps its answer), and logbook.ErrNotApplied says they
// were not.
func (l *Ledger) record(ctx context.Context, req *Request, payload map[string]any, lazy, unconditional bool) error {
	rec, logged, err := l.execution(req, payload, lazy, unconditional)
	if err != nil {
		return err
	}
	_, err = l.cfg.Append(ctx, rec)
	switch {
	case errors.Is(err, logbook.ErrNotApplied):
		return logbook.ErrNotApplied
	case err != nil:
		// The request stays running; Reconcile resolves it from the receipt.
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	logged()
	return nil
}

// execution is record's entry, with the request row's move from running;
// logged is called once it has committed (executedOnce).
func (l *Ledger) execution(req *Request, payload map[string]any, lazy, unconditional bool) (rec logbook.Record, logged func(), err error) {
	if err := l.transit(StatusRunning, req.Status); err != nil {
		return logbook.Record{}, nil, err
	}
	subjects := map[string]string{"request": req.ID, "target": req.Target}
	if req.MarqueID != "" {
		// No marque id when minting failed, or when a crash came before the
		// execution was recorded as pending (Reconcile); an empty subject
		// value is an invalid record.
		subjects["marque"] = req.MarqueID
	}
	reasons, _ := json.Marshal(nonNil(req.Reasons))
	out := store.RequestOutcome{ID: req.ID, Outcome: string(req.Outcome), Status: store.RequestStatus(req.Status),
		Reasons: string(reasons), Detail: req.Detail, RowsAffected: req.RowsAffected, TxID: req.TxID, MarqueID: req.MarqueID}
	var update func(ctx context.Context, tx *sql.Tx) error
	var view *logbook.View
	if lazy {
		// An executed statement's outcome on the compiled path (RecordLater):
		// final, so nothing moves its row again, and it may be a View that
		// commits in the logbook's journal first, as its decision's did.
		out.UpdatedNS = l.cfg.Clock().UnixNano()
		q, args := l.rq.FinishView(out)
		view = &logbook.View{SQL: q, Args: args}
	} else {
		update = func(ctx context.Context, tx *sql.Tx) error {
			out.UpdatedNS = l.cfg.Clock().UnixNano()
			return l.rq.Finish(ctx, tx, out)
		}
	}
	var cond func(context.Context, *sql.Tx) (bool, error)
	if !unconditional {
		marque, to := req.MarqueID, store.RequestStatus(req.Status)
		cond = func(ctx context.Context, tx *sql.Tx) (bool, error) {
			return l.rq.MoveIfMarque(ctx, tx, req.ID, marque, store.RequestStatus(StatusRunning), to, l.cfg.Clock().UnixNano())
		}
	}
	var byHash string
	if logged, byHash = l.executedOnce(payload); byHash != "" {
		// Indexed, so that a prune finds the entries that name a text by
		// its hash alone (carryTexts).
		subjects[textSubject] = byHash
	}
	return logbook.Record{Kind: logbook.KindExecution, Subjects: subjects, Payload: payload, If: cond, With: update, View: view, Lazy: lazy}, logged, nil
}

// executedOnce names an execution entry's executed_sql by its SHA-256
// (executed_sql_sha256) and drops the text when an entry of this ledger
// has already committed it: the guarded text of a remembered shape is the
// same for every statement of that shape (its values are executed_args),
// and logging kilobytes of it with every execution was most of what the
// logbook wrote (issue 25). The text is in the logbook, in the first
// entry of this node that carries that hash, from the first execution of
// the shape on; logged, called once the entry has committed, remembers it
// (an entry that did not commit leaves the next one to carry the text).
func (l *Ledger) executedOnce(payload map[string]any) (logged func(), byHash string) {
	text, _ := payload["executed_sql"].(string)
	if text == "" {
		return func() {}, ""
	}
	sum := sha256.Sum256([]byte(text))
	hexSum := hex.EncodeToString(sum[:])
	payload["executed_sql_sha256"] = hexSum
	if at, ok := l.executedTexts.Get(sum); ok && l.cfg.Clock().Sub(at) < executedTextFresh {
		delete(payload, "executed_sql")
		return func() {}, hexSum
	}
	return func() { l.executedTexts.Put(sum, l.cfg.Clock()) }, ""
}

// Failed records that a request decided to run did not, with the fixed
// reason of its class (DESIGN.md invariant 10: the error, which can quote
// the target's rows, goes to Detail, which only humans see): it waits
// for a human.
func (l *Ledger) Failed(ctx context.Context, req *Request, err error, reason string) error {
	l.cfg.Logger.Error("statement path failed", "request", req.ID, "err", err)
	req.Outcome, req.Status = OutcomeReferred, StatusWaiting
	req.Reasons, req.Detail = []string{reason}, err.Error()
	return l.record(context.WithoutCancel(ctx), req, map[string]any{"request_id": req.ID, "marque_id": req.MarqueID,
		"outcome": "failed", "reasons": req.Reasons, "detail": req.Detail}, false, true)
}

// reasonRolledBack is a rolled-back statement's reason.
const reasonRolledBack = "the transaction it ran in was rolled back: nothing of it remains"

// Committed records a statement of a client transaction that committed
// as the Pilot's result says, while its request is still running under
// its marque: a reconciler (another node's, once this one looked gone)
// that settled it first keeps its answer.
func (l *Ledger) Committed(ctx context.Context, req *Request, res *pilot.Result, txid string, statements int) error {
	req.ApplyResult(res)
	p := ExecutedPayload(req, res)
	p["transaction"] = map[string]any{"txid": txid, "outcome": "committed", "statements": statements}
	return l.settleRunning(ctx, req, p)
}

// RolledBack records a statement undone by its client transaction's
// rollback (why), as Committed does.
func (l *Ledger) RolledBack(ctx context.Context, req *Request, txid, why string) error {
	req.Outcome, req.Status, req.RowsAffected = OutcomeRolledBack, StatusRolledBack, 0
	req.Reasons, req.TxID = []string{reasonRolledBack}, txid
	return l.settleRunning(ctx, req, map[string]any{"request_id": req.ID, "marque_id": req.MarqueID,
		"outcome": string(OutcomeRolledBack), "txid": txid,
		"transaction": map[string]any{"txid": txid, "outcome": "rolled_back", "by": why}})
}

func (l *Ledger) settleRunning(ctx context.Context, req *Request, payload map[string]any) error {
	if err := l.record(ctx, req, payload, false, false); err != nil && !errors.Is(err, logbook.ErrNotApplied) {
		return err
	}
	return nil
}

// ExecutedText finds the executed text an execution entry names by its
// SHA-256 (executedOnce): the first execution entry that carries it, or
// the logbook.pruned entry that carried it past a prune (carryTexts). ""
// when no entry does.
func ExecutedText(ctx context.Context, lb *logbook.Logbook, sum string) (string, error) {
	var text string
	errFound := errors.New("found")
	for _, kind := range []logbook.Kind{logbook.KindExecution, logbook.KindPruned} {
		err := lb.Iterate(ctx, logbook.Query{Kind: kind}, func(e logbook.Entry) error {
			if got, t := executedOf(e.Payload); got == sum && t != "" {
				text = t
			} else if t := carriedTexts(e.Payload)[sum]; t != "" {
				text = t
			}
			if text != "" {
				return errFound
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFound) {
			return "", err
		}
		if text != "" {
			break
		}
	}
	return text, nil
}
