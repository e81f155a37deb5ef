package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/route"
)

// Requests: their lifecycle is the ledger's (internal/ledger), which the
// statement path calls in DESIGN.md section 3's order: Decide (step 6),
// Executing before an approved statement runs, Executed or RecordLater
// (step 9). What is here are the views the fronts show, drawn from
// ledger.Request, and the forwards the fronts call.

// Status is a request's state in the store (ledger.Status).
type Status = ledger.Status

// Request statuses (ledger's).
const (
	StatusRejected   = ledger.StatusRejected
	StatusWaiting    = ledger.StatusWaiting
	StatusRunning    = ledger.StatusRunning
	StatusExecuted   = ledger.StatusExecuted
	StatusFailed     = ledger.StatusFailed
	StatusDenied     = ledger.StatusDenied
	StatusExpired    = ledger.StatusExpired
	StatusDeciding   = ledger.StatusDeciding
	StatusRefused    = ledger.StatusRefused
	StatusRolledBack = ledger.StatusRolledBack
)

// Outcomes of a request, as the agent reads them.
const (
	OutcomeExecuted   = string(ledger.OutcomeExecuted)
	OutcomeReferred   = string(ledger.OutcomeReferred)
	OutcomeRejected   = string(ledger.OutcomeRejected)
	OutcomeRefused    = string(ledger.OutcomeRefused)
	OutcomeRolledBack = string(ledger.OutcomeRolledBack)
)

// Reasons the agent reads when its statement is referred for a cause on
// the target's side. Each is fixed (DESIGN.md invariant 10): the error
// behind it, which can quote the target's rows, goes to Detail, which only
// humans see.
const (
	ReasonNotExecuted  = "the statement could not be executed, so a human decides"
	ReasonUnreachable  = "the target could not be reached, so a human decides"
	ReasonNotRehearsed = "the statement could not be rehearsed for the Surveyor, so a human decides"
)

// response is the agent's answer drawn from its request.
func response(r *ledger.Request) *Response {
	resp := &Response{Outcome: string(r.Outcome), RequestID: r.ID, RowsAffected: r.RowsAffected, Reasons: r.Reasons,
		Path: r.Path, DelegationID: r.DelegationID, Rows: [][]any{}}
	if resp.Reasons == nil {
		resp.Reasons = []string{}
	}
	return resp
}

// decide records the decision (step 6) in the ledger. A statement that
// runs records why the other delegations did not cover it by their
// outcomes only: every reason would be in every entry.
func (g *Gateway) decide(ctx context.Context, req *ledger.Request, evals []route.Evaluation, chosen *Delegation) error {
	return g.led.Decide(ctx, req, evaluated(req, evals, chosen))
}

// evaluated is what a decision entry says of the delegations the route
// evaluated: on a path, only the chosen one's in full (route.Lean).
func evaluated(req *ledger.Request, evals []route.Evaluation, chosen *Delegation) []map[string]any {
	if req.Path != "" && chosen != nil {
		evals = route.Lean(evals, chosen.ID)
	}
	return route.FieldsOf(evals)
}

// errSettledElsewhere: an approved request was settled by a
// reconciliation before its marque could be recorded (ledger.Executing).
var errSettledElsewhere = ledger.ErrSettledElsewhere

// fail records that a request on the fast path could not be executed for
// an infrastructure reason, and returns err. The Pilot rolled back (or
// never started), so the request is referred.
func (g *Gateway) fail(ctx context.Context, req *ledger.Request, err error) error {
	if ferr := g.led.Failed(ctx, req, err, ReasonNotExecuted); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// didNotRun answers a statement the Pilot failed to run (an unknown commit
// is settled apart, by its receipt): it is recorded as waiting for a
// human, queued, and the agent is told it was referred, with its request
// id, as for any referral.
func (g *Gateway) didNotRun(ctx context.Context, req *ledger.Request, err error) (*Response, error) {
	reason := ReasonNotExecuted
	if errors.Is(err, pilot.ErrUnreachable) {
		reason = ReasonUnreachable
	}
	if ferr := g.led.Failed(ctx, req, err, reason); ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	g.refs.Take(req.Principal)
	g.refs.Referred(req)
	return response(req), nil
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

// view is a request's view. A principal other than "" sees only what an
// agent may: the preview holds row images the agent may not read, and
// whether it exists, what it counted and its digest depend on rows
// outside the bound and on whether a human has looked; the detail holds
// the target's own error text (DESIGN.md invariant 10).
func view(r *ledger.Request, principal string) *RequestView {
	v := &RequestView{ID: r.ID, Principal: r.Principal, Target: r.Target, SQL: r.SQL, CanonicalSQL: r.Canonical,
		Outcome: string(r.Outcome), Status: r.Status, Path: r.Path, DelegationID: r.DelegationID, Rule: r.Rule,
		Reasons: r.Reasons, Detail: r.Detail, MarqueID: r.MarqueID, RowsAffected: r.RowsAffected,
		Created: r.Created, Updated: r.Updated, PreviewSHA256: r.PreviewSHA256, DecidedBy: r.DecidedBy}
	if r.Preview != "" {
		v.Preview = json.RawMessage(r.Preview)
	}
	if principal != "" {
		v.Preview, v.PreviewSHA256, v.Detail = nil, "", ""
	}
	return v
}

// Request returns one request. A principal other than "" may only see its own.
func (g *Gateway) Request(ctx context.Context, id, principal string) (*RequestView, error) {
	r, err := g.led.Get(ctx, id, principal)
	if err != nil {
		return nil, err
	}
	return view(r, principal), nil
}

// queryRequests lists the views of the requests f selects.
func (g *Gateway) queryRequests(ctx context.Context, f ledger.Filter) ([]*RequestView, error) {
	rows, err := g.led.List(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]*RequestView, 0, len(rows))
	for _, r := range rows {
		out = append(out, view(r, ""))
	}
	return out, nil
}

// Reconcile resolves requests left running by a crash (ledger.Reconcile).
func (g *Gateway) Reconcile(ctx context.Context, grace time.Duration) (int, error) {
	return g.led.Reconcile(ctx, grace)
}

// Drain waits until every execution entry written after its answer is
// written (ledger.Drain). The control plane calls it before it stops its
// logbook.
func (g *Gateway) Drain() { g.led.Drain() }

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
	r, err := g.led.Wait(ctx, id, wait, func(ctx context.Context) (*ledger.Request, error) { return g.led.Get(ctx, id, principal) })
	if err != nil {
		return nil, err
	}
	return view(r, principal), nil
}
