package gateway

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/route"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Status is a request's state in the store. A request moves only forward:
// rejected and refused are final at once; waiting becomes running
// (approved), deciding (a denial or an expiry being recorded) or stays;
// running becomes executed, failed or, after a crash before it ran,
// waiting again.
type Status = store.RequestStatus

// Request statuses.
const (
	StatusRejected Status = "rejected" // did not parse: nothing to decide
	StatusWaiting  Status = "waiting"  // referred: waiting for a human
	StatusRunning  Status = "running"  // marque minted (fast path or approved), not yet resolved
	StatusExecuted Status = "executed" // on the fast path, or approved and executed
	StatusFailed   Status = "failed"   // approved, but the Pilot refused or failed
	StatusDenied   Status = "denied"   // a human denied it
	StatusExpired  Status = "expired"  // nobody answered within the queue's time-to-live
	StatusDeciding Status = "deciding" // a denial or expiry is being recorded
	// StatusRefused: a referral past the principal's rate or waiting cap,
	// recorded and never queued (floods.go).
	StatusRefused Status = "refused"
)

type request struct {
	ID           string
	Principal    string
	Target       string
	SQL          string
	Canonical    string
	Outcome      string
	Status       Status
	Path         string
	DelegationID string
	Rule         *int
	Reasons      []string
	// Detail is for humans only: the target's error text, counts.
	Detail       string
	MarqueID     string
	TxID         string
	RowsAffected int64
	Created      time.Time
	Updated      time.Time

	JudgmentID string
}

func (r *request) response() *Response {
	resp := &Response{Outcome: r.Outcome, RequestID: r.ID, RowsAffected: r.RowsAffected, Reasons: r.Reasons,
		Path: r.Path, DelegationID: r.DelegationID, Rows: []map[string]any{}}
	if resp.Reasons == nil {
		resp.Reasons = []string{}
	}
	return resp
}

func (r *request) applyResult(res *pilot.Result) {
	r.TxID, r.Detail = res.TxID, res.Detail
	switch res.Outcome {
	case pilot.Executed:
		r.Outcome, r.Status, r.RowsAffected = OutcomeExecuted, StatusExecuted, res.RowsAffected
		r.Reasons = nil
	default:
		// A guard failure rolls back and refers (DESIGN.md section 6).
		r.Outcome, r.Status, r.RowsAffected = OutcomeReferred, StatusWaiting, 0
		r.Reasons = append([]string(nil), res.Reasons...)
	}
}

// Reasons the agent reads when its statement is referred for a cause on
// the target's side. Each is fixed (DESIGN.md invariant 10): the error
// behind it, which can quote the target's rows, goes to Detail, which only
// humans see.
const (
	ReasonNotExecuted  = "the statement could not be executed, so a human decides"
	ReasonUnreachable  = "the target could not be reached, so a human decides"
	ReasonNotRehearsed = "the statement could not be rehearsed for the Surveyor, so a human decides"
)

// decide records the decision (step 6): durably in the logbook first, then
// the request row. If the logbook cannot be written, nothing executes.
func (g *Gateway) decide(ctx context.Context, req *request, evals []route.Evaluation, chosen *Delegation) error {
	switch {
	case req.Outcome == OutcomeRejected:
		req.Status = StatusRejected
	case req.Outcome == OutcomeRefused:
		req.Status = StatusRefused
	case req.Path != "":
		req.Status, req.Outcome = StatusRunning, "run"
	default:
		req.Status = StatusWaiting
	}
	subjects := map[string]string{"request": req.ID, "principal": req.Principal, "target": req.Target}
	if req.DelegationID != "" {
		subjects["delegation"] = req.DelegationID
	}
	if req.JudgmentID != "" {
		subjects["judgment"] = req.JudgmentID
	}
	if req.Path != "" && chosen != nil {
		// A statement that runs records why the other delegations did not
		// cover it by their outcomes only: every reason would be in every
		// entry.
		evals = route.Lean(evals, chosen.ID)
	}
	payload := map[string]any{
		"request_id": req.ID, "principal": req.Principal, "target": req.Target,
		"statement": req.SQL, "canonical_sql": req.Canonical, "statement_sha256": marque.StatementHash(req.Canonical),
		"outcome": req.Outcome, "path": req.Path, "delegation_id": req.DelegationID, "rule": req.Rule,
		"reasons": nonNil(req.Reasons), "evaluated": evals, "judgment_id": req.JudgmentID,
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
	if agentOutcome == "run" {
		// The agent sees executed or referred, never "run".
		agentOutcome = OutcomeReferred
	}
	req.Updated = req.Created
	reasons, _ := json.Marshal(nonNil(req.Reasons))
	var rule sql.NullInt64
	if req.Rule != nil {
		rule = sql.NullInt64{Int64: int64(*req.Rule), Valid: true}
	}
	// The request row commits with its decision entry, in one group commit.
	insert := func(ctx context.Context, tx *sql.Tx) error {
		return g.rq.Insert(ctx, tx, store.Request{ID: req.ID, Principal: req.Principal, Target: req.Target, SQL: req.SQL,
			Canonical: req.Canonical, Outcome: agentOutcome, Status: req.Status, Path: req.Path, DelegationID: req.DelegationID,
			Rule: rule, Reasons: string(reasons), Detail: req.Detail, TxID: req.TxID, MarqueID: req.MarqueID,
			CreatedNS: req.Created.UnixNano(), UpdatedNS: req.Updated.UnixNano()})
	}
	if _, err := g.append(ctx, logbook.Record{Kind: logbook.KindDecision, Subjects: subjects, Payload: payload, With: insert}); err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	req.Outcome = agentOutcome
	return nil
}

// maxLoggedStatement is the most of a statement's text a decision entry
// holds: the static check's own limit (sqlcheck.Limits.MaxBytes), so only
// a statement it refuses unread is cut.
const maxLoggedStatement = 64 << 10

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// executing records an approved statement's marque id durably before the
// Pilot may run it, so a crash is reconciled from the receipt under that
// id, never re-executed.
func (g *Gateway) executing(ctx context.Context, req *request, previous string) error {
	// Another node's reconciliation may have settled the request while this
	// one was slow to get here (a stalled store): the marque is recorded,
	// with its entry, only while the request is still running with the
	// marque id it had when this node claimed it (previous: none, or the
	// fast path's refused one); otherwise neither is, and nothing runs.
	claim := func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return g.rq.ClaimMarque(ctx, tx, req.ID, previous, req.MarqueID, StatusRunning, g.cfg.Clock().UnixNano())
	}
	_, err := g.append(ctx, logbook.Record{Kind: logbook.KindExecutionPending,
		Subjects: map[string]string{"request": req.ID, "marque": req.MarqueID, "target": req.Target},
		Payload:  map[string]any{"request_id": req.ID, "marque_id": req.MarqueID}, If: claim})
	switch {
	case errors.Is(err, logbook.ErrNotApplied):
		return errSettledElsewhere
	case err != nil:
		return fmt.Errorf("%w: %w", ErrLogUnavailable, err)
	}
	return nil
}

// errSettledElsewhere: an approved request was settled by a reconciliation
// (this node's or another's) before its marque could be recorded; it did
// not run and will not.
var errSettledElsewhere = errors.New("the request was settled while this node was recording its marque; it did not run")

// recordLater records an executed statement's outcome (step 9) while the
// agent is answered. Request waits for it, so a read after the answer sees
// the final state; Drain waits for all of them.
func (g *Gateway) recordLater(ctx context.Context, req *request, res *pilot.Result) {
	done := make(chan struct{})
	g.pendMu.Lock()
	if g.draining {
		// Stopping: record it now, before the answer.
		g.pendMu.Unlock()
		if err := g.record(context.WithoutCancel(ctx), req, executedPayload(req, res), false, nil); err != nil {
			g.cfg.Logger.Error("execution entry", "request", req.ID, "err", err)
		}
		return
	}
	if g.pending == nil {
		g.pending = map[string]chan struct{}{}
	}
	g.pending[req.ID] = done
	g.inflight.Add(1)
	g.pendMu.Unlock()
	g.flying(req.ID)
	go func() {
		defer g.inflight.Done()
		defer g.landed(req.ID)
		if err := g.record(context.WithoutCancel(ctx), req, executedPayload(req, res), true, nil); err != nil {
			// The request stays running; Reconcile resolves it from the receipt.
			g.cfg.Logger.Error("execution entry", "request", req.ID, "err", err)
		}
		g.pendMu.Lock()
		delete(g.pending, req.ID)
		g.pendMu.Unlock()
		close(done)
	}()
}

// flying marks request id as in flight on this node (between its decision
// and its execution entry), so periodic reconciliation leaves it alone;
// landed undoes one flying. The marks nest: Submit and recordLater each
// hold one.
func (g *Gateway) flying(id string) {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	if g.flights == nil {
		g.flights = map[string]int{}
	}
	g.flights[id]++
}

func (g *Gateway) landed(id string) {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	if g.flights[id]--; g.flights[id] <= 0 {
		delete(g.flights, id)
	}
}

func (g *Gateway) isInFlight(id string) bool {
	g.pendMu.Lock()
	defer g.pendMu.Unlock()
	return g.flights[id] > 0
}

// settled waits until request id's execution entry, if one is being
// written, is written (or ctx ends).
func (g *Gateway) settled(ctx context.Context, id string) {
	g.pendMu.Lock()
	done, ok := g.pending[id]
	g.pendMu.Unlock()
	if ok {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
}

// Drain waits until every execution entry written after its answer is
// written; from then on they are written before the answer. The control
// plane calls it before it stops its logbook.
func (g *Gateway) Drain() {
	g.pendMu.Lock()
	g.draining = true
	g.pendMu.Unlock()
	g.inflight.Wait()
}

// executed records the execution's outcome (step 9).
func (g *Gateway) executed(ctx context.Context, req *request, res *pilot.Result) error {
	return g.finish(ctx, req, executedPayload(req, res))
}

func executedPayload(req *request, res *pilot.Result) map[string]any {
	p := map[string]any{"request_id": req.ID, "marque_id": req.MarqueID, "outcome": string(res.Outcome),
		"code": res.Code, "rows_affected": res.RowsAffected, "reasons": nonNil(res.Reasons), "txid": res.TxID,
		"executed_sql": res.ExecutedSQL, "detail": res.Detail}
	if len(res.ExecutedArgs) > 0 {
		// A template ran: these are the values bound to its $1..$n.
		p["executed_args"] = res.ExecutedArgs
	}
	return p
}

// finish records a request's outcome with its execution entry.
func (g *Gateway) finish(ctx context.Context, req *request, payload map[string]any) error {
	return g.record(ctx, req, payload, false, nil)
}

// settle is finish on the condition that cond holds in the entry's
// transaction; it returns logbook.ErrNotApplied when it did not (nothing
// was written).
func (g *Gateway) settle(ctx context.Context, req *request, payload map[string]any, cond func(context.Context, *sql.Tx) (bool, error)) error {
	err := g.record(ctx, req, payload, false, cond)
	if errors.Is(err, logbook.ErrNotApplied) {
		return logbook.ErrNotApplied
	}
	return err
}

// record writes the execution entry and the request's final state; a
// lazy one shares the next decision's commit (logbook.Record.Lazy).
func (g *Gateway) record(ctx context.Context, req *request, payload map[string]any, lazy bool, cond func(context.Context, *sql.Tx) (bool, error)) error {
	subjects := map[string]string{"request": req.ID, "target": req.Target}
	if req.MarqueID != "" {
		// No marque id when minting failed, or when a crash came before the
		// execution was recorded as pending (Reconcile); an empty subject
		// value is an invalid record.
		subjects["marque"] = req.MarqueID
	}
	reasons, _ := json.Marshal(nonNil(req.Reasons))
	update := func(ctx context.Context, tx *sql.Tx) error {
		return g.rq.Finish(ctx, tx, store.RequestOutcome{ID: req.ID, Outcome: req.Outcome, Status: req.Status,
			Reasons: string(reasons), Detail: req.Detail, RowsAffected: req.RowsAffected, TxID: req.TxID,
			MarqueID: req.MarqueID, UpdatedNS: g.cfg.Clock().UnixNano()})
	}
	_, err := g.append(ctx, logbook.Record{Kind: logbook.KindExecution, Subjects: subjects, Payload: payload, If: cond, With: update, Lazy: lazy})
	if err != nil {
		// The request stays running; Reconcile resolves it from the receipt.
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	return nil
}

// fail records that a request on the fast path could not be executed for
// an infrastructure reason, and returns err. The Pilot rolled back (or
// never started), so the request is referred.
func (g *Gateway) fail(ctx context.Context, req *request, err error) error {
	if ferr := g.recordFailure(ctx, req, err, ReasonNotExecuted); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// recordFailure records that a request did not run, with the fixed reason
// of its class: it waits for a human.
func (g *Gateway) recordFailure(ctx context.Context, req *request, err error, reason string) error {
	g.cfg.Logger.Error("statement path failed", "request", req.ID, "err", err)
	req.Outcome, req.Status = OutcomeReferred, StatusWaiting
	// The error can carry the target's text (a deferred constraint's
	// message quotes row values): the agent gets the class, humans the text.
	req.Reasons, req.Detail = []string{reason}, err.Error()
	return g.finish(context.WithoutCancel(ctx), req, map[string]any{"request_id": req.ID, "marque_id": req.MarqueID,
		"outcome": "failed", "reasons": req.Reasons, "detail": req.Detail})
}

// didNotRun answers a statement the Pilot failed to run (an unknown commit
// is settled apart, by its receipt): it is recorded as waiting for a
// human, queued, and the agent is told it was referred, with its request
// id, as for any referral.
func (g *Gateway) didNotRun(ctx context.Context, p pilot.Executor, req *request, err error) (*Response, error) {
	reason := ReasonNotExecuted
	if errors.Is(err, pilot.ErrUnreachable) {
		reason = ReasonUnreachable
	}
	if ferr := g.recordFailure(ctx, req, err, reason); ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	g.takeReferral(req.Principal)
	g.referred(req)
	return req.response(), nil
}

// RequestView is what GET /v1/requests/{id} shows.
type RequestView struct {
	ID           string   `json:"id"`
	Principal    string   `json:"principal"`
	Target       string   `json:"target"`
	SQL          string   `json:"sql"`
	CanonicalSQL string   `json:"canonical_sql"`
	Outcome      string   `json:"outcome"`
	Status       Status   `json:"status"`
	Path         string   `json:"path,omitempty"`
	DelegationID string   `json:"delegation_id,omitempty"`
	Rule         *int     `json:"rule"`
	Reasons      []string `json:"reasons"`
	// Detail is what the reasons' class does not say (the target's own
	// error text and SQLSTATE, counts). Humans only.
	Detail       string    `json:"detail,omitempty"`
	MarqueID     string    `json:"marque_id,omitempty"`
	RowsAffected int64     `json:"rows_affected"`
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
	// Preview is a waiting request's preview (pilot.Preview), computed
	// when a human first asked for it, and PreviewSHA256 its digest, which
	// an approval signs. Humans only.
	Preview       json.RawMessage `json:"preview,omitempty"`
	PreviewSHA256 string          `json:"preview_sha256,omitempty"`
	// PreviewError says why a waiting request has no preview, when a human
	// asked for one: it cannot be previewed (so it can only be denied, or
	// run by hand), or the target did not answer. Humans only; not stored.
	PreviewError string `json:"preview_error,omitempty"`
	// DecidedBy is the human who approved or denied it.
	DecidedBy string `json:"decided_by,omitempty"`
}

// Request returns one request. A principal other than "" may only see its own.
func (g *Gateway) Request(ctx context.Context, id, principal string) (*RequestView, error) {
	// Whose it is comes first: another principal's request is not found at
	// once, never after waiting for its execution to be recorded, so the
	// time of the answer says nothing of it (DESIGN.md invariant 10).
	rows, err := g.queryRequests(ctx, store.RequestFilter{ID: id})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || principal != "" && rows[0].Principal != principal {
		return nil, fmt.Errorf("gateway: request %s: %w", id, ErrNotFound)
	}
	// A request read as running may have its execution entry being
	// written: wait for that, then read it again (a settled one stays so).
	if rows[0].Status == StatusRunning {
		g.settled(ctx, id)
		if rows, err = g.queryRequests(ctx, store.RequestFilter{ID: id}); err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("gateway: request %s: %w", id, ErrNotFound)
		}
	}
	if principal != "" {
		// What only humans see (DESIGN.md invariant 10): the preview holds
		// row images the agent may not read, and whether it exists, what it
		// counted and its digest depend on rows outside the bound and on
		// whether a human has looked; the detail holds the target's own
		// error text.
		rows[0].Preview, rows[0].PreviewSHA256, rows[0].Detail = nil, "", ""
	}
	return rows[0], nil
}

func (g *Gateway) queryRequests(ctx context.Context, f store.RequestFilter) ([]*RequestView, error) {
	rows, err := g.rq.List(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("gateway: requests: %w", err)
	}
	out := make([]*RequestView, 0, len(rows))
	for _, r := range rows {
		v := RequestView{ID: r.ID, Principal: r.Principal, Target: r.Target, SQL: r.SQL, CanonicalSQL: r.Canonical,
			Outcome: r.Outcome, Status: r.Status, Path: r.Path, DelegationID: r.DelegationID, Detail: r.Detail,
			MarqueID: r.MarqueID, RowsAffected: r.RowsAffected, PreviewSHA256: r.PreviewSHA256, DecidedBy: r.DecidedBy}
		if r.Rule.Valid {
			n := int(r.Rule.Int64)
			v.Rule = &n
		}
		_ = json.Unmarshal([]byte(r.Reasons), &v.Reasons)
		if r.Preview != "" {
			v.Preview = json.RawMessage(r.Preview)
		}
		v.Created, v.Updated = time.Unix(0, r.CreatedNS).UTC(), time.Unix(0, r.UpdatedNS).UTC()
		out = append(out, &v)
	}
	return out, nil
}

// Reconcile resolves requests left running by a crash: from the receipt in
// the target (committed: executed) or the transaction's status (aborted, or
// never reached COMMIT: not executed). It never re-executes anything.
// Requests younger than grace are left alone (their marque may still be in
// flight to a Pilot).
func (g *Gateway) Reconcile(ctx context.Context, grace time.Duration) (int, error) {
	resolved, err := g.reconcileOrphans(ctx)
	if err != nil {
		return resolved, err
	}
	n, err := g.reconcileDeciding(ctx, grace)
	resolved += n
	if err != nil {
		return resolved, err
	}
	n, err = g.reconcileRunning(ctx, grace)
	return resolved + n, err
}

// reconcileRunning resolves requests left running (a marque was minted)
// whose last update is older than grace, from the receipt and the
// transaction's status. Run calls it periodically too: a request this node
// still has in flight is skipped, so it only ever meets requests whose
// outcome could not be recorded (the logbook failed after COMMIT, or
// COMMIT's outcome was unknown), or that a stopped node left.
func (g *Gateway) reconcileRunning(ctx context.Context, grace time.Duration) (int, error) {
	// One reconciler at a time: the one at start and Run's.
	g.reconcileMu.Lock()
	defer g.reconcileMu.Unlock()
	resolved := 0
	cutoff := g.cfg.Clock().Add(-grace).UnixNano()
	running, err := g.queryRequests(ctx, store.RequestFilter{Status: StatusRunning, UpdatedBefore: cutoff})
	if err != nil {
		return resolved, err
	}
	for _, v := range running {
		p, ok := g.targets[v.Target]
		if !ok || g.isInFlight(v.ID) {
			continue
		}
		req := &request{ID: v.ID, Target: v.Target, MarqueID: v.MarqueID, Principal: v.Principal}
		cur, err := g.rq.List(ctx, store.RequestFilter{ID: v.ID})
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
		// approving node slow to record its own (executing) then finds it
		// settled and runs nothing, and one that recorded it first is left
		// to its receipt.
		marque := v.MarqueID
		still := func(ctx context.Context, tx *sql.Tx) (bool, error) {
			return g.rq.MoveIfMarque(ctx, tx, req.ID, marque, StatusRunning, req.Status, g.cfg.Clock().UnixNano())
		}
		switch err := g.settle(ctx, req, payload, still); {
		case errors.Is(err, logbook.ErrNotApplied):
			continue
		case err != nil:
			return resolved, err
		}
		resolved++
	}
	return resolved, nil
}

// MaxWait is the longest an agents' front waits for a request to be
// decided in one call (GET /v1/requests/{id}?wait=, MCP request_status's
// wait_seconds, harbormaster_wait's default cap), so every front keeps
// an agent waiting alike.
const MaxWait = 60 * time.Second

// WaitRequest returns the request once it is settled (neither waiting for
// a human nor running: an approved statement is waited for until the Pilot
// has done with it), or when wait has passed, whichever is first. A
// principal other than "" may only see its own requests.
func (g *Gateway) WaitRequest(ctx context.Context, id, principal string, wait time.Duration) (*RequestView, error) {
	deadline := time.Now().Add(wait)
	for {
		v, err := g.Request(ctx, id, principal)
		if err != nil || (v.Status != StatusWaiting && v.Status != StatusRunning) || wait <= 0 || !time.Now().Before(deadline) {
			return v, err
		}
		ch := g.changed(id)
		t := time.NewTimer(min(time.Until(deadline), time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, nil
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// changed returns a channel closed at the next change of request id.
func (g *Gateway) changed(id string) <-chan struct{} {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	if g.waiters == nil {
		g.waiters = map[string]chan struct{}{}
	}
	ch, ok := g.waiters[id]
	if !ok {
		ch = make(chan struct{})
		g.waiters[id] = ch
	}
	return ch
}

// notify wakes everyone waiting on request id.
func (g *Gateway) notify(id string) {
	g.waitMu.Lock()
	defer g.waitMu.Unlock()
	if ch, ok := g.waiters[id]; ok {
		close(ch)
		delete(g.waiters, id)
	}
}

// orphanWindow is how many of the newest logbook entries reconcileOrphans
// reads: only requests in flight at a stop can be orphaned.
const orphanWindow = 100000

// reconcileOrphans finds decisions the logbook holds but the store does
// not (a stop between the decision entry and the request row). No marque
// was minted for them, so nothing ran: each becomes a waiting request with
// that reason, and an execution entry records that it did not run.
func (g *Gateway) reconcileOrphans(ctx context.Context) (int, error) {
	head, _, err := g.lb.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("gateway: reconcile: %w", err)
	}
	from := max(int64(1), head-orphanWindow)
	var orphans []logbook.Entry
	err = g.lb.Iterate(ctx, logbook.Query{From: from, Kind: logbook.KindDecision}, func(e logbook.Entry) error {
		found, err := g.rq.Exists(ctx, e.Subjects["request"])
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
		var d struct {
			RequestID    string   `json:"request_id"`
			Principal    string   `json:"principal"`
			Target       string   `json:"target"`
			Statement    string   `json:"statement"`
			Canonical    string   `json:"canonical_sql"`
			Outcome      string   `json:"outcome"`
			DelegationID string   `json:"delegation_id"`
			Reasons      []string `json:"reasons"`
		}
		if err := json.Unmarshal(e.Payload, &d); err != nil || d.RequestID == "" {
			continue
		}
		req := &request{ID: d.RequestID, Principal: d.Principal, Target: d.Target, SQL: d.Statement, Canonical: d.Canonical,
			DelegationID: d.DelegationID, Outcome: OutcomeReferred, Status: StatusWaiting, Created: e.Time, Updated: g.cfg.Clock()}
		req.Reasons = d.Reasons
		switch d.Outcome {
		case OutcomeRejected:
			req.Outcome, req.Status = OutcomeRejected, StatusRejected
		case OutcomeRefused:
			req.Outcome, req.Status = OutcomeRefused, StatusRefused
		}
		if d.Outcome == "run" {
			req.Reasons = []string{"the control plane stopped before this statement ran; it did not run"}
			if _, err := g.append(ctx, logbook.Record{Kind: logbook.KindExecution,
				Subjects: map[string]string{"request": req.ID, "target": req.Target},
				Payload:  map[string]any{"request_id": req.ID, "outcome": "not_executed", "reconciled": true, "reasons": req.Reasons}}); err != nil {
				return 0, fmt.Errorf("gateway: reconcile: %w", err)
			}
		}
		reasons, _ := json.Marshal(nonNil(req.Reasons))
		if err := g.rq.InsertIfMissing(ctx, store.Request{ID: req.ID, Principal: req.Principal, Target: req.Target, SQL: req.SQL,
			Canonical: req.Canonical, Outcome: req.Outcome, Status: req.Status, DelegationID: req.DelegationID, Reasons: string(reasons),
			CreatedNS: req.Created.UnixNano(), UpdatedNS: req.Updated.UnixNano()}); err != nil {
			return 0, fmt.Errorf("gateway: reconcile: %w", err)
		}
	}
	return len(orphans), nil
}

// reconcileDeciding finishes denials and expiries a stop interrupted: the
// logbook says whether the act was recorded; if not, the request waits again.
func (g *Gateway) reconcileDeciding(ctx context.Context, grace time.Duration) (int, error) {
	// Only what has been deciding for longer than grace: another node may
	// be recording a denial or an expiry right now.
	deciding, err := g.queryRequests(ctx, store.RequestFilter{Status: StatusDeciding, UpdatedBefore: g.cfg.Clock().Add(-grace).UnixNano()})
	if err != nil {
		return 0, err
	}
	for _, v := range deciding {
		final := StatusWaiting
		err := g.lb.Iterate(ctx, logbook.Query{SubjectKey: "request", SubjectValue: v.ID}, func(e logbook.Entry) error {
			switch e.Kind {
			case "denial":
				final = StatusDenied
			case "expiry":
				final = StatusExpired
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("gateway: reconcile: %w", err)
		}
		if _, err := g.rq.Move(ctx, v.ID, StatusDeciding, final, 0); err != nil {
			return 0, fmt.Errorf("gateway: reconcile: %w", err)
		}
	}
	return len(deciding), nil
}
