package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/route"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// The steps of the statement path (DESIGN.md section 3), in the order
// submit takes them. Each does one step and says which.

// countDecision counts a statement's decision and its time in the metrics.
func (g *Gateway) countDecision(start time.Time, resp *Response, err error) {
	switch {
	case resp != nil:
		g.cfg.Metrics.Decision(resp.Path, resp.Outcome, g.cfg.Clock().Sub(start))
	case err != nil:
		g.cfg.Metrics.Decision("", OutcomeRejected, g.cfg.Clock().Sub(start))
	}
}

// parse (2) parses the statement with the real Postgres parser, against
// the catalog the first delegation's bound sees (bound.Catalog): what the
// target holds outside the bound is, to the check and every reason, as if
// it did not exist (DESIGN.md invariant 10). The canonical text and
// whether the statement is rejected at once do not depend on the catalog.
func (g *Gateway) parse(req *ledger.Request, cat *sqlcheck.Catalog, delegs []*Delegation) (*sqlcheck.Analysis, sqlcheck.Key) {
	var first *Delegation
	if len(delegs) > 0 {
		first = delegs[0]
	}
	a, key := g.analyze(req.SQL, g.scope(cat, first))
	req.Canonical = a.Canonical
	return a, key
}

// rejectAtOnce (2) records and answers as an error a statement that does
// not parse, or that no human could approve (several statements, DDL, a
// placeholder: known from the text alone), rather than queueing it for a
// human who could only deny it (sqlcheck.Analysis.Rejected, which the
// backtest reads too). It returns nil for every other statement.
func (g *Gateway) rejectAtOnce(ctx context.Context, req *ledger.Request, a *sqlcheck.Analysis) error {
	r, ok := a.Rejected()
	if !ok {
		return nil
	}
	req.Outcome, req.Reasons = ledger.OutcomeRejected, []string{r.String()}
	if err := g.decide(ctx, req, nil, nil); err != nil {
		return err
	}
	msg := r.Message
	if !a.Unparseable() {
		msg += "; it was not queued, since no human could approve it"
	}
	return &SQLError{RequestID: req.ID, Code: r.Code, Message: msg}
}

// checkEach (3) checks the statement against each delegation in force.
// Each delegation's check carries the reasons of its own analysis (its
// catalog is its bound's), so none is the statement's as a whole.
func (g *Gateway) checkEach(req *ledger.Request, a *sqlcheck.Analysis, key sqlcheck.Key, cat *sqlcheck.Catalog, delegs []*Delegation) route.Input {
	in := route.Input{Principal: req.Principal, Target: req.Target}
	for i, d := range delegs {
		ad, kd := a, key
		if i > 0 {
			ad, kd = g.analyze(req.SQL, g.scope(cat, d))
		}
		c := g.check(ad, kd, d)
		in.Checks = append(in.Checks, route.Check{Delegation: d.ID, Decision: c.dec, Reasons: c.reasons, Quota: quotaText(d)})
	}
	return in
}

// decideRoute (4) decides the route: the compiled path, the surveyed
// path, or refer. The route is a value (internal/route), decided once; it
// reads its facts through routeFacts, each only when it gets that far,
// for the delegation it would choose, and a quota's token is taken only
// for a path that is otherwise open.
func (g *Gateway) decideRoute(ctx context.Context, in route.Input, req *ledger.Request, delegs []*Delegation, tx *Tx) (route.Route, *Delegation) {
	in.InTransaction, in.InTransactionText = tx != nil, ReasonSurveyedInTx
	rt := route.Decide(in, routeFacts{g: g, ctx: ctx, req: req, delegs: delegs, checks: in.Checks})
	var chosen *Delegation
	if rt.Chosen >= 0 {
		chosen = delegs[rt.Chosen]
		req.DelegationID, req.Rule = rt.Delegation, rt.Rule
	}
	return rt, chosen
}

// follow takes the route: the referral's reasons, the compiled path, or
// (5) the surveyed path, which rehearses the statement inside the bound
// and convenes the panel, and runs only on a unanimous conforms while
// what opened the path still holds.
func (g *Gateway) follow(ctx context.Context, p pilot.Executor, req *ledger.Request, rt route.Route, chosen *Delegation, tx *Tx) (*surveyed, error) {
	var survey *surveyed
	switch rt.Path {
	case route.Refer:
		req.Outcome, req.Reasons = ledger.OutcomeReferred, route.Strings(rt.Reasons)
	case route.Compiled:
		req.Path = marque.PathCompiled
	case route.Surveyed:
		req.Outcome = ledger.OutcomeReferred
		sv, why, err := g.survey(ctx, p, req, chosen, rt.Decision)
		switch {
		case err != nil:
			req.Reasons, req.Detail = []string{ReasonNotRehearsed}, err.Error()
		case why != "":
			req.Reasons = []string{why}
		default:
			survey = sv
			req.JudgmentID = sv.id
			if err := g.recordJudgment(ctx, req, chosen, *rt.Rule, sv); err != nil {
				return nil, err
			}
			if sv.judgment.Outcome != surveyor.OutcomeConforms {
				// Which juror refused, under which framing, and why one
				// failed (a provider's own error text) are for humans: told
				// to the agent, they would coach its next attempt past the
				// framing that caught it.
				req.Reasons = []string{"the Surveyor referred it (judgment " + sv.id + "): a human decides"}
				req.Detail = strings.Join(sv.judgment.Reasons, "; ")
			} else if why := g.surveyStillOpen(ctx, req, chosen, rt.Decision); why != "" {
				// The panel took its time: what opened the path before it
				// must still hold when its answer is acted on.
				req.Reasons = []string{why}
			} else {
				req.Path = marque.PathSurveyed
			}
		}
	}
	if tx != nil && req.Path == "" && req.Outcome == ledger.OutcomeReferred {
		req.Reasons = append(req.Reasons, ReasonReferredInTx)
	}
	return survey, nil
}

// refer records (6) and answers a referral. A referral is a human's time:
// past the principal's referral rate or waiting cap, the statement is
// refused, recorded and not queued.
func (g *Gateway) refer(ctx context.Context, req *ledger.Request, evals []route.Evaluation, chosen *Delegation) (*Response, error) {
	flood, err := g.refs.Admit(ctx, req.Principal)
	if err != nil {
		return nil, err
	}
	if flood != nil {
		req.Outcome, req.Reasons = ledger.OutcomeRefused, []string{flood.Message}
		if err := g.decide(ctx, req, evals, chosen); err != nil {
			return nil, err
		}
		flood.RequestID = req.ID
		return nil, flood
	}
	if err := g.decide(ctx, req, evals, chosen); err != nil {
		return nil, err
	}
	resp := response(req)
	g.refs.Referred(req)
	return resp, nil
}

// readsFirst reports whether the statement is a read that runs while its
// decision is made and is recorded with its outcome (recordRead): a read
// on the compiled path, outside a client transaction, for a Pilot in this
// process, which then writes no receipt (pilot.Authority.AuthorizeRead).
// A read changes nothing, so invariant 7 asks only that its decision be
// durable before any of its rows leave; a write, a surveyed statement, a
// statement in a transaction or one for a Pilot in another process has
// its decision recorded first, as before. So does every statement while
// the logbook is known not to be recording (its writer stopped, or its
// last commit failed, ledger.Ledger.Recording): then the decision fails
// first and nothing runs (invariant 3); a read already under way when the
// store fails returns no rows.
func (g *Gateway) readsFirst(p pilot.Executor, req *ledger.Request, a *sqlcheck.Analysis, tx *Tx) bool {
	return tx == nil && req.Path == marque.PathCompiled && a.Facts != nil && a.Facts.Kind == sqlcheck.OpSelect && authorityOf(p) != nil &&
		g.led.Recording()
}

// authorize records the decision (6) and returns the Pilot's request with
// the statement's authorization (7), naming the delegation and its
// grantor signature. The marque's id is recorded with the decision: a
// restart settles a statement whose outcome nobody recorded by a void
// receipt under it (Reconcile). A Pilot in this process takes the
// authorization as a value (pilot.Authority: no signature the process
// makes for itself); one in another process gets a marque, signed while
// the decision commits. Either leaves only once the decision is durable:
// a decision that cannot be recorded drops it unsent. A read that runs
// first (readsFirst) is the exception: its decision is recorded with its
// outcome (recordRead), and its authorization asks for no receipt.
func (g *Gateway) authorize(ctx context.Context, p pilot.Executor, req *ledger.Request, rt route.Route, chosen *Delegation, canonical string, readFirst bool) (pilot.Request, error) {
	var err error
	if req.MarqueID, err = g.minter.NewIDAt(req.Created); err != nil {
		return pilot.Request{}, fmt.Errorf("gateway: %w", err)
	}
	claims := marque.Claims{
		RequestID: req.ID, Principal: req.Principal, Target: req.Target,
		StatementHash: marque.StatementHash(canonical), Path: req.Path, RuleIndex: rt.Rule,
		Auth:       delegationAuth(chosen),
		JudgmentID: req.JudgmentID,
	}
	var minted chan mintResult
	var granted marque.Grant
	var grantErr error
	local := authorityOf(p)
	if local != nil {
		granted, grantErr = g.minter.Grant(req.MarqueID, claims)
	} else {
		minted = make(chan mintResult, 1)
		go func() {
			tok, _, err := g.minter.MintID(req.MarqueID, claims)
			minted <- mintResult{tok, err}
		}()
	}
	preq := pilot.Request{SQL: canonical, Bound: chosen.Canonical}
	if readFirst && grantErr == nil {
		return local.AuthorizeRead(preq, granted), nil
	}
	if err := g.decide(ctx, req, rt.Evaluated, chosen); err != nil {
		return pilot.Request{}, err
	}
	if local != nil {
		if grantErr != nil {
			return pilot.Request{}, g.fail(ctx, req, fmt.Errorf("gateway: grant: %w", grantErr))
		}
		return local.Authorize(preq, granted), nil
	}
	m := <-minted
	if m.err != nil {
		return pilot.Request{}, g.fail(ctx, req, fmt.Errorf("gateway: mint: %w", m.err))
	}
	preq.Marque = m.token
	return preq, nil
}

// expect makes the Pilot run the statement only if it reaches exactly
// what the panel was shown (the surveyed path); nothing without a survey.
func (s *surveyed) expect(preq *pilot.Request) {
	if s == nil {
		return
	}
	preq.ExpectBefore = s.rehearsal.Rehearsal.BeforeDigest
	preq.ExpectAfter = s.rehearsal.Rehearsal.AfterDigest
	rows := s.rehearsal.RowsAffected
	preq.ExpectRows = &rows
}

// runInTx runs the statement (8) in the client transaction's target
// transaction; its outcome is recorded when the transaction ends.
func (g *Gateway) runInTx(ctx context.Context, tx *Tx, sess pilot.TxSession, req *ledger.Request, preq pilot.Request, chosen *Delegation) (*Response, error) {
	res, err := sess.Execute(ctx, preq)
	if err != nil {
		// The transaction's state on the target is unknown: it is rolled
		// back, with whatever ran in it.
		tx.lose(ctx)
		return g.didNotRun(ctx, req, err)
	}
	if res.Outcome != pilot.Executed {
		// Referred by the Pilot: recorded and queued.
		return g.pilotReferred(ctx, req, res, true)
	}
	req.ApplyResult(res)
	tx.executedIn(req, res)
	g.cfg.Metrics.FastPath(req.Path, chosen.ID)
	return answer(req, res), nil
}

// executed records the execution's outcome (9) and answers the agent
// (10). A statement executed on the compiled path is answered while its
// entry group-commits: the receipt that committed with it already proves
// the outcome, and if this process stops first, Reconcile records it from
// that receipt. Either way the outcome is recorded even if the agent has
// gone away.
func (g *Gateway) executed(ctx context.Context, req *ledger.Request, res *pilot.Result, err error, chosen *Delegation, survey *surveyed) (*Response, error) {
	if errors.Is(err, pilot.ErrCommitUnknown) {
		// Only the receipt can tell whether it committed: the request
		// stays running, and Reconcile resolves it.
		g.cfg.Logger.Error("statement path: commit outcome unknown", "request", req.ID, "err", err)
		return nil, fmt.Errorf("gateway: request %s: %w", req.ID, err)
	}
	if err != nil {
		return g.didNotRun(ctx, req, err)
	}
	if res.Outcome != pilot.Executed {
		return g.pilotReferred(ctx, req, res, false)
	}
	req.ApplyResult(res)
	if survey == nil {
		g.led.RecordLater(ctx, req, res)
	} else if err := g.led.Executed(context.WithoutCancel(ctx), req, res); err != nil {
		return nil, err
	}
	g.cfg.Metrics.FastPath(req.Path, chosen.ID)
	if survey != nil {
		g.sampleAudit(ctx, req, chosen, survey)
	}
	g.cfg.Metrics.PilotRefusal(res.Code)
	return answer(req, res), nil
}

// recordRead records (6, 9) a read that ran while its decision was made
// (readsFirst) and answers it (10): the decision and the read's outcome in
// one commit (ledger.DecideExecuted) before any of its rows leave; if
// they cannot be recorded, the rows are dropped and the agent gets the
// error. A read the Pilot refused, or could not run, has its decision
// recorded as any statement's, then its outcome: it did not run (a read
// without a receipt commits nothing, so an unknown commit is no
// different).
func (g *Gateway) recordRead(ctx context.Context, req *ledger.Request, rt route.Route, chosen *Delegation, res *pilot.Result, err error) (*Response, error) {
	if err == nil && res.Outcome == pilot.Executed {
		if err := g.led.DecideExecuted(context.WithoutCancel(ctx), req, evaluated(req, rt.Evaluated, chosen), res); err != nil {
			return nil, err
		}
		g.cfg.Metrics.FastPath(req.Path, chosen.ID)
		g.cfg.Metrics.PilotRefusal(res.Code)
		return answer(req, res), nil
	}
	// Recorded even if the agent has gone: the read may have run.
	ctx = context.WithoutCancel(ctx)
	if derr := g.decide(ctx, req, rt.Evaluated, chosen); derr != nil {
		return nil, errors.Join(derr, err)
	}
	if err != nil {
		return g.didNotRun(ctx, req, err)
	}
	return g.executed(ctx, req, res, nil, chosen, nil)
}

// answer is the agent's answer to a statement that executed: its
// request, and the result's columns and rows.
func answer(req *ledger.Request, res *pilot.Result) *Response {
	resp := response(req)
	resp.Columns, resp.Truncated = res.Columns, res.Truncated
	if res.Rows != nil {
		// A write without RETURNING has no rows: keep "rows": [].
		resp.Rows = res.Rows
	}
	return resp
}
