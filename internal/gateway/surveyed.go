package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/route"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// The surveyed path (DESIGN.md section 3 step 5, section 7): a statement that
// only a rule with a residual clause covers runs without a human only when
// Tier B is switched on for the deployment and the target, the residual
// rule was marked auditable by a reviewer and enabled for this Surveyor by
// a signed human act, the delegation's fast path is not suspended, its
// quota has room, and a unanimous panel answers conforms after seeing the
// rehearsal. The Pilot then re-verifies the human-signed bound itself and
// rolls back if the statement reaches other rows than the rehearsal showed.

// surveyFacts reads what the route needs to know of the surveyed path for
// delegation d, in the order route.Of reads it, stopping at the first fact
// that closes the path.
func (g *Gateway) surveyFacts(ctx context.Context, target string, d *Delegation, dec sqlcheck.Decision) (route.Survey, error) {
	var s route.Survey
	if g.cfg.Switches == nil {
		s.TierB = route.Switch{Off: "Tier B is switched off on this node"}
	} else {
		s.TierB.On, s.TierB.Off = g.cfg.Switches.TierBOn(target)
	}
	if !s.TierB.On || g.cfg.Surveyor == nil {
		return s, nil
	}
	s.HasSurveyor, s.Surveyor, s.Enabled = true, g.cfg.Surveyor.Identity(), map[int]string{}
	for _, u := range dec.Uses {
		if u.Rule < 0 || u.Rule >= len(d.Bound.Rules) || d.Bound.Rules[u.Rule].Residual == "" {
			continue
		}
		s.Residual = append(s.Residual, u.Rule)
		sr, found, err := g.st.SurveyorRule(ctx, d.ID, u.Rule)
		if err != nil {
			return s, err
		}
		if !found || !sr.Enabled {
			return s, nil
		}
		s.Enabled[u.Rule] = sr.Surveyor
		if sr.Surveyor != s.Surveyor {
			return s, nil
		}
	}
	if g.cfg.Auditor == nil {
		return s, nil
	}
	s.HasAudit = true
	var err error
	s.Suspended, s.SuspendedWhy, err = g.cfg.Auditor.Suspended(ctx, d.ID)
	return s, err
}

// survey rehearses the statement inside the bound and convenes the panel.
// It returns the judgment and the rehearsal, or a reason to refer.
func (g *Gateway) survey(ctx context.Context, p pilot.Rehearser, req *ledger.Request, d *Delegation, dec sqlcheck.Decision) (*surveyed, string, error) {
	reh, err := p.Rehearse(ctx, req.Canonical, d.Canonical, delegationAuth(d), req.Principal, marque.PathSurveyed)
	if err != nil {
		return nil, "", err
	}
	if reh.Outcome != pilot.Rehearsed {
		// The Pilot's reasons are fixed per class; its detail is for humans.
		req.Detail = reh.Detail
		return nil, "the rehearsal inside the signed bound failed: " + strings.Join(reh.Reasons, "; "), nil
	}
	if reh.RowsAffected == 0 && len(reh.Rows) == 0 {
		// Nothing inside the bound would change: there is nothing for the
		// panel to judge, and an attempt at rows outside the read fence
		// should reach a human rather than pass as a no-op.
		return nil, "the statement reaches no row inside the signed bound, so there is nothing for the Surveyor to judge", nil
	}
	if reh.Rehearsal.ImagesTruncated {
		// The panel would judge rows it is not shown, and the reviewer
		// audit them from an evidence set that lacks them.
		return nil, "the statement reaches more rows than its rehearsal can show the Surveyor, so a human decides", nil
	}
	report := reh.Rehearsal.PanelReport()
	// Every residual clause the statement relies on must hold, so the
	// panel is shown each of them (the write's and the reads').
	var clauses, labelled []string
	seen := map[string]bool{}
	var summaries []string
	for _, u := range dec.Uses {
		r := d.Bound.Rules[u.Rule]
		if r.Residual != "" && !seen[r.Residual] {
			seen[r.Residual] = true
			clauses = append(clauses, r.Residual)
			labelled = append(labelled, fmt.Sprintf("rule %d (%s %s): %s", u.Rule, r.Op, r.Table, r.Residual))
		}
		// The bound goes to every framing, the shape screen included, which
		// must not see the residual clause: summarise the rule without it.
		r.Residual = ""
		summaries = append(summaries, bound.Summary(r))
	}
	if len(clauses) == 0 {
		return nil, "", fmt.Errorf("gateway: a surveyed statement relies on no residual clause")
	}
	residual := clauses[0]
	if len(clauses) > 1 {
		residual = "every one of these clauses must hold: " + strings.Join(labelled, "; ")
	}
	in := surveyor.Input{Sentence: d.Bound.Sentence, Residual: residual, Bound: strings.Join(summaries, "; "),
		Statement: req.Canonical, Rehearsal: string(report)}
	j := g.cfg.Surveyor.Judge(ctx, in)
	s := &surveyed{judgment: j, id: newID("jdg_", req.Created), rehearsal: reh, report: report, input: in}
	return s, "", nil
}

// surveyStillOpen says why the surveyed path closed while the panel
// deliberated (up to surveyor.timeout), or "": the delegation must still
// be in force and unrevoked, and the switches, the rule's enablement and
// the audit's suspension must still open the path, when its conforms is
// acted on.
func (g *Gateway) surveyStillOpen(ctx context.Context, req *ledger.Request, d *Delegation, dec sqlcheck.Decision) string {
	if !g.reg.IsInForce(d, g.cfg.Clock()) {
		return "the delegation was revoked or expired while the Surveyor judged the statement, so a human decides"
	}
	s, err := g.surveyFacts(ctx, req.Target, d, dec)
	if err != nil {
		s.Unreadable = true
		g.cfg.Logger.Error("surveyed path", "request", req.ID, "err", err)
	}
	rt := route.Of(route.Input{Principal: req.Principal, Target: req.Target,
		Checks: []route.Check{{Delegation: d.ID, Decision: dec}}, Survey: s, Stale: g.reg.Stale()})
	if rt.Path != route.Surveyed {
		return "the surveyed path closed while the Surveyor judged the statement: " + strings.Join(route.Strings(rt.Reasons), "; ")
	}
	return ""
}

type surveyed struct {
	id        string
	judgment  surveyor.Judgment
	rehearsal *pilot.Result
	report    []byte
	input     surveyor.Input
}

// recordJudgment writes the judgment to the logbook (before the decision
// that rests on it) and the store.
func (g *Gateway) recordJudgment(ctx context.Context, req *ledger.Request, d *Delegation, rule int, s *surveyed) error {
	j := s.judgment
	if _, err := g.append(ctx, logbook.Record{Kind: logbook.KindJudgment,
		Subjects: map[string]string{"judgment": s.id, "request": req.ID, "delegation": d.ID, "surveyor": j.Surveyor},
		Payload: map[string]any{"judgment_id": s.id, "request_id": req.ID, "delegation_id": d.ID, "rule": rule,
			"surveyor": j.Surveyor, "bundle": j.Bundle, "jurors": j.Jurors, "correlated": j.Correlated,
			"max_per_provider": j.MaxPerProvider, "outcome": j.Outcome, "reasons": j.Reasons, "panel_ms": j.PanelMS}}); err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrLogUnavailable, err)
	}
	rec, _ := json.Marshal(j)
	corr := 0
	if j.Correlated {
		corr = 1
	}
	err := g.st.InsertJudgment(ctx, store.Judgment{ID: s.id, RequestID: req.ID, DelegationID: d.ID, Rule: rule,
		Outcome: j.Outcome, Correlated: corr == 1, Record: string(rec), CreatedNS: g.cfg.Clock().UnixNano()})
	if err != nil {
		return fmt.Errorf("gateway: record judgment: %w", err)
	}
	g.cfg.Metrics.Judgment(j)
	return nil
}

// sampleAudit queues a surveyed conforms for review when sampled.
func (g *Gateway) sampleAudit(ctx context.Context, req *ledger.Request, d *Delegation, s *surveyed) {
	if g.cfg.Auditor == nil {
		return
	}
	evidence := map[string]any{
		"statement_submitted": req.SQL,
		"statement_signed":    req.Canonical,
		"sentence":            d.Bound.Sentence,
		"bound":               d.Bound.Rules,
		"residual":            s.input.Residual,
		"jurors":              s.judgment.Jurors,
		"correlated":          s.judgment.Correlated,
		"rehearsal":           json.RawMessage(s.report),
		"judgment_id":         s.id,
		"bundle":              s.judgment.Bundle,
	}
	if _, _, err := g.cfg.Auditor.Consider(context.WithoutCancel(ctx), audit.Candidate{JudgmentID: s.id, RequestID: req.ID,
		DelegationID: d.ID, Correlated: s.judgment.Correlated, Evidence: evidence}); err != nil {
		g.cfg.Logger.Error("audit sampling failed", "request", req.ID, "err", err)
	}
}

// MarkAuditable records a reviewer's signed statement that a residual
// clause can be judged from the evidence set.
func (g *Gateway) MarkAuditable(ctx context.Context, act, sig []byte) error {
	a, err := acts.ParseAuditable(act)
	if err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	sa := signedAct{kind: logbook.KindAuditable, namespace: signing.NamespaceReview, field: "act", bytes: act, sig: sig, signedAt: a.Time}
	if err := g.freshAct(sa); err != nil {
		return err
	}
	d, err := g.residualRule(a.DelegationID, a.Rule)
	if err != nil {
		return err
	}
	signer, err := g.verifyAct(sa, d.Target)
	if err != nil {
		return err
	}
	if err := g.logAct(ctx, sa, signer, map[string]string{"delegation": d.ID},
		map[string]any{"delegation_id": d.ID, "rule": a.Rule, "note": a.Note, "by": signer.Name}); err != nil {
		return err
	}
	return g.st.MarkAuditable(ctx, d.ID, a.Rule, signer.Name, string(act)+string(sig), g.cfg.Clock().UnixNano())
}

// EnableSurveyor records a signed act enabling (or disabling) the Surveyor
// for one residual rule. Enabling needs the rule marked auditable first.
func (g *Gateway) EnableSurveyor(ctx context.Context, act, sig []byte) error {
	e, err := acts.ParseEnable(act)
	if err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	sa := signedAct{kind: logbook.KindSurveyorEnable, namespace: signing.NamespaceEnable, field: "act", bytes: act, sig: sig, signedAt: e.Time}
	if err := g.freshAct(sa); err != nil {
		return err
	}
	signedAt, _ := time.Parse(time.RFC3339, e.Time)
	prev, found, err := g.st.SurveyorRule(ctx, e.DelegationID, e.Rule)
	if err == nil && found && prev.EnabledNS != 0 && signedAt.Before(time.Unix(0, prev.EnabledNS)) {
		// An older act replayed after a newer one must not undo it.
		return fmt.Errorf("gateway: %w: a newer enable act for this rule was already applied", ErrActRefused)
	}
	d, err := g.residualRule(e.DelegationID, e.Rule)
	if err != nil {
		return err
	}
	signer, err := g.verifyAct(sa, d.Target)
	if err != nil {
		return err
	}
	if e.On && g.cfg.Surveyor != nil && e.Bundle != g.cfg.Surveyor.Bundle().Version {
		return fmt.Errorf("gateway: %w: the act names bundle %s; the bundle in force is %s", ErrActRefused, e.Bundle, g.cfg.Surveyor.Bundle().Version)
	}
	if e.On {
		sr, found, err := g.st.SurveyorRule(ctx, d.ID, e.Rule)
		if err != nil {
			return err
		}
		if !found || sr.AuditableBy == "" {
			return fmt.Errorf("gateway: %w: a reviewer must mark rule %d auditable before the Surveyor can be enabled for it", ErrActRefused, e.Rule)
		}
	}
	if err := g.logAct(ctx, sa, signer, map[string]string{"delegation": d.ID, "surveyor": e.Surveyor},
		map[string]any{"delegation_id": d.ID, "rule": e.Rule, "surveyor": e.Surveyor, "bundle": e.Bundle, "on": e.On, "by": signer.Name}); err != nil {
		return err
	}
	// enabled_ns holds the act's signing time, so older acts are refused.
	return g.st.SetEnablement(ctx, store.Enablement{DelegationID: d.ID, Rule: e.Rule, On: e.On, By: signer.Name,
		Act: string(act) + string(sig), Surveyor: e.Surveyor, Bundle: e.Bundle, SignedNS: signedAt.UnixNano()})
}

func (g *Gateway) residualRule(id string, rule int) (*Delegation, error) {
	d := g.reg.Delegation(id)
	if d == nil {
		return nil, fmt.Errorf("gateway: delegation %s: %w", id, ErrNotFound)
	}
	if rule < 0 || rule >= len(d.Bound.Rules) || d.Bound.Rules[rule].Residual == "" {
		return nil, fmt.Errorf("gateway: %w: rule %d of %s has no residual clause", ErrActRefused, rule, id)
	}
	return d, nil
}

// ReviewAudit records a reviewer's signed verdict on a sampled judgment.
func (g *Gateway) ReviewAudit(ctx context.Context, act, sig []byte) (bool, error) {
	if g.cfg.Auditor == nil {
		return false, errors.New("gateway: no sampled audit is configured")
	}
	r, err := acts.ParseReview(act)
	if err != nil {
		return false, fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	au, err := g.cfg.Auditor.Get(ctx, r.AuditID)
	if err != nil {
		return false, fmt.Errorf("gateway: %w", ErrNotFound)
	}
	d := g.reg.Delegation(au.DelegationID)
	if d == nil {
		return false, fmt.Errorf("gateway: delegation %s: %w", au.DelegationID, ErrNotFound)
	}
	// The audit logs and stores the review itself (audit.Auditor.Review).
	signer, err := g.verifyAct(signedAct{namespace: signing.NamespaceReview, bytes: act, sig: sig}, d.Target)
	if err != nil {
		return false, err
	}
	return g.cfg.Auditor.Review(ctx, r.AuditID, r.Verdict, r.Note, signer.Name, act, sig)
}

// Reinstate lifts an audit suspension on a grantor's signed act.
func (g *Gateway) Reinstate(ctx context.Context, act, sig []byte) error {
	if g.cfg.Auditor == nil {
		return errors.New("gateway: no sampled audit is configured")
	}
	r, err := acts.ParseReinstate(act)
	if err != nil {
		return fmt.Errorf("gateway: %w: %w", ErrActRefused, err)
	}
	sa := signedAct{namespace: signing.NamespaceEnable, bytes: act, sig: sig, signedAt: r.Time}
	if err := g.freshAct(sa); err != nil {
		return err
	}
	d := g.reg.Delegation(r.DelegationID)
	if d == nil {
		return fmt.Errorf("gateway: delegation %s: %w", r.DelegationID, ErrNotFound)
	}
	// The audit logs and stores the reinstatement itself (audit.Auditor.Reinstate).
	signer, err := g.verifyAct(sa, d.Target)
	if err != nil {
		return err
	}
	suspended, _, since, err := g.cfg.Auditor.Suspension(ctx, d.ID)
	if err != nil {
		return err
	}
	signedAt, _ := time.Parse(time.RFC3339, r.Time)
	if !suspended {
		return fmt.Errorf("gateway: %w: the delegation is not suspended", ErrActRefused)
	}
	if signedAt.Before(since.Truncate(time.Second)) {
		// A reinstatement signed before the suspension cannot lift it.
		return fmt.Errorf("gateway: %w: the act was signed before the suspension it would lift", ErrActRefused)
	}
	return g.cfg.Auditor.Reinstate(ctx, d.ID, signer.Name, act, sig)
}

// Audits lists sampled judgments with status ("" for all) on the given
// targets.
func (g *Gateway) Audits(ctx context.Context, status string, targets []string) ([]audit.Audit, error) {
	if g.cfg.Auditor == nil {
		return []audit.Audit{}, nil
	}
	all, err := g.cfg.Auditor.List(ctx, status)
	if err != nil {
		return nil, err
	}
	allowed := map[string]bool{}
	for _, t := range targets {
		allowed[t] = true
	}
	out := []audit.Audit{}
	for _, a := range all {
		if d := g.reg.Delegation(a.DelegationID); d != nil && allowed[d.Target] {
			out = append(out, a)
		}
	}
	return out, nil
}
