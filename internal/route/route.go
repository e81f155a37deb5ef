// Package route decides the route of a statement (DESIGN.md section 3 step
// 4) as a value: a pure function from what the statement path has learned
// (the analysis, the static check of each of the caller's delegations in
// force, the switches, the Surveyor's enablements, the audit's suspension
// and the quotas) to a Route: the path it takes, the delegation and rule it
// runs under, and typed reasons when it is referred. In the manner of
// cedar-go's (Decision, Diagnostic): the decision and why, computed once,
// never edited afterwards.
//
// Of reads nothing and changes nothing. The statement path gathers the
// facts Of needs (Choose says for which delegation), takes the quota's
// token, and hands the answers in; Of then reads them in a fixed order, so
// the same facts give the same route.
package route

import (
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Path is the way a statement goes.
type Path string

const (
	// Compiled: a Tier A rule covers it; it runs with no model involved.
	Compiled Path = "compiled"
	// Surveyed: only a rule with a residual clause covers it; it runs if
	// the Surveyor's panel is unanimous after the rehearsal.
	Surveyed Path = "surveyed"
	// Refer: a human decides.
	Refer Path = "refer"
)

// Code is the kind of a reason to refer.
type Code string

// Reason codes.
const (
	// NoDelegation: the caller has no delegation in force on the target.
	NoDelegation Code = "no_delegation"
	// NotCovered: no delegation covers the statement; Text is one of the
	// static check's reasons (the parse's, or one delegation's).
	NotCovered Code = "not_covered"
	// QuotaDelegation and QuotaPrincipal: a fast-path quota is used up.
	QuotaDelegation Code = "quota_delegation"
	QuotaPrincipal  Code = "quota_principal"
	// QuotaUnknown: the shared quota could not be checked.
	QuotaUnknown Code = "quota_unknown"
	// The surveyed path is closed (Cause says why).
	SurveyClosed Code = "survey_closed"
	// Stale: this node's view of the delegations is too old to run on.
	Stale Code = "stale_delegations"
	// InTransaction: the surveyed path would take it, but it was sent
	// inside a client's transaction, where only compiled statements run.
	InTransaction Code = "in_transaction"
)

// Causes the surveyed path is closed.
const (
	// Unreadable: the switches or the Surveyor's enablement could not be read.
	Unreadable Code = "facts_unreadable"
	// TierBOff: Tier B is switched off (or the switches are stale).
	TierBOff Code = "tier_b_off"
	// NoSurveyor: no Surveyor is configured on this node.
	NoSurveyor Code = "no_surveyor"
	// NotEnabled: a residual rule relied on is not enabled for this Surveyor.
	NotEnabled Code = "not_enabled"
	// OtherSurveyor: it is enabled for another Surveyor than this node's.
	OtherSurveyor Code = "other_surveyor"
	// NoAudit: no sampled audit is configured; Tier B does not run without one.
	NoAudit Code = "no_audit"
	// Suspended: the sampled audit suspended the delegation's fast path.
	Suspended Code = "suspended"
)

// Reason is one typed reason a statement is referred. Text is its clause,
// rendered into a sentence by String.
type Reason struct {
	Code Code `json:"code"`
	// Delegation, when set, is the delegation the reason is about.
	Delegation string `json:"delegation_id,omitempty"`
	// Text is the clause: a static check's reason, or the cause's own words.
	Text string `json:"text"`
	// Cause is why the surveyed path is closed (SurveyClosed only).
	Cause *Reason `json:"cause,omitempty"`
}

// clause is the reason's words as part of a sentence.
func (r Reason) clause() string {
	if r.Cause != nil {
		return "only a rule with a residual clause covers this statement, and " + r.Cause.clause()
	}
	return r.Text
}

// String is the sentence the agent and the queue read.
func (r Reason) String() string {
	switch r.Code {
	case NoDelegation, NotCovered, InTransaction:
		return r.Text
	}
	return r.clause() + ", so a human decides"
}

// Check is the static check of the statement against one delegation in
// force.
type Check struct {
	Delegation string
	Decision   sqlcheck.Decision
	// Reasons are the check's reasons as sentences (Decision.ReasonStrings).
	Reasons []string
	// Quota is the delegation's signed fast-path quota as written
	// ("3/minute"), or "" when it has none.
	Quota string
}

// Quota is the answer of the fast-path quotas for the chosen delegation:
// whether its token was taken.
type Quota struct {
	// Empty is false when a token was taken from every bucket that
	// applies (or none applies).
	Empty bool
	// Principal is true when the principal's bucket was the empty one,
	// false when it was the delegation's.
	Principal bool
	// Unknown: the shared buckets could not be read, so no token was taken.
	Unknown bool
}

// Switch is a switch's state as this node sees it.
type Switch struct {
	On bool
	// Off says why it is off (its scope, or that the switches are stale).
	Off string
}

// Survey is what the surveyed path needs to be open, for the chosen
// delegation. Of reads it in field order and stops at the first fact that
// closes the path; facts after that one may be left unread.
type Survey struct {
	// Unreadable: a fact below could not be read from the store.
	Unreadable bool
	// TierB is the Tier B switch for the target on this node.
	TierB Switch
	// Surveyor is this node's Surveyor's identity; HasSurveyor is false
	// when none is configured.
	HasSurveyor bool
	Surveyor    string
	// Residual lists the residual rules the decision relies on, in order,
	// and Enabled the Surveyor each one is enabled for (absent: none).
	Residual []int
	Enabled  map[int]string
	// HasAudit is false when no sampled audit is configured.
	HasAudit bool
	// Suspended, with its reason, when the audit suspended the fast path.
	Suspended    bool
	SuspendedWhy string
}

// Input is everything a route depends on.
type Input struct {
	Principal string
	Target    string
	// Analysis is the parsed statement; its Reasons are the parse-level ones.
	Analysis *sqlcheck.Analysis
	// Checks has one entry per delegation of (principal, target) in force.
	Checks []Check
	// Survey is read when the chosen check says survey.
	Survey Survey
	// Stale, when set, says why this node's delegations are too old to
	// run anything on (a revocation elsewhere may not have reached it).
	Stale string
	// Quota is read when the path is otherwise open.
	Quota Quota
	// InTransaction: the statement was sent inside a client's transaction,
	// where the surveyed path does not run (the panel judges a statement
	// against a rehearsal in a snapshot of its own).
	InTransaction bool
	// InTransactionText is the reason given when that refers it.
	InTransactionText string
}

// Facts are what a route reads beyond the checks: each is asked at most
// once, and only when the route gets that far, for the delegation it
// would choose (as cedar-go's Authorize reads entities).
type Facts interface {
	// Stale says why this node's delegations are too old to run anything
	// on, or "".
	Stale() string
	// Survey is the surveyed path's facts for the chosen delegation; asked
	// only when its check says survey.
	Survey(chosen int) Survey
	// Quota takes a fast-path token for the chosen delegation; asked only
	// for a path that is otherwise open.
	Quota(chosen int) Quota
}

// Decide is the route of a statement, reading its facts through f: the
// delegation it would go under is chosen once, and the quota is applied
// to the route the other facts give.
func Decide(in Input, f Facts) Route {
	if i, ok := choose(in.Checks); ok {
		if in.Stale = f.Stale(); in.Stale == "" && in.Checks[i].Decision.Outcome == sqlcheck.Survey {
			in.Survey = f.Survey(i)
		}
	}
	in.Quota = Quota{}
	r := Of(in)
	if r.Path == Refer {
		return r
	}
	if q := f.Quota(r.Chosen); q.Empty || q.Unknown {
		in.Quota = q
		r.Path, r.Reasons = Refer, []Reason{quotaRefusal(in, in.Checks[r.Chosen], r.Decision)}
	}
	return r
}

// Route is a statement's route.
type Route struct {
	Path Path
	// Chosen is the index in Input.Checks of the delegation the statement
	// runs under, or is surveyed under; -1 when none covers it.
	Chosen int
	// Delegation and Rule name it (empty and nil when Chosen is -1).
	Delegation string
	Rule       *int
	// Decision is the chosen delegation's static decision.
	Decision sqlcheck.Decision
	// Reasons say why it is referred; none when it runs.
	Reasons []Reason
	// Evaluated is each delegation's decision, for the logbook.
	Evaluated []Evaluation
}

// Evaluation is one delegation's decision on a statement, as the decision
// entry records it.
type Evaluation struct {
	Delegation string   `json:"delegation_id"`
	Decision   string   `json:"decision"`
	Rule       *int     `json:"rule"`
	Reasons    []string `json:"reasons,omitempty"`
}

// Fields is e's JSON as a map, which the logbook writes as canonical JSON
// directly, not by way of encoding/json and a second parse.
func (e Evaluation) Fields() map[string]any {
	m := map[string]any{"delegation_id": e.Delegation, "decision": e.Decision, "rule": e.Rule}
	if len(e.Reasons) > 0 {
		m["reasons"] = e.Reasons
	}
	return m
}

// FieldsOf is Fields of each evaluation (nil for nil, as the JSON of
// a nil slice is null).
func FieldsOf(evals []Evaluation) []map[string]any {
	if evals == nil {
		return nil
	}
	out := make([]map[string]any, len(evals))
	for i, e := range evals {
		out[i] = e.Fields()
	}
	return out
}

// Choose picks the delegation a statement would go under: the first that
// covers it on the compiled path, else the first that covers it on the
// surveyed path. ok is false when none covers it. The statement path's
// route is Decide's, which chooses with it; Choose is for a caller that
// needs only which delegation covers a statement (a Describe).
func Choose(checks []Check) (i int, ok bool) { return choose(checks) }

func choose(checks []Check) (i int, ok bool) {
	i = -1
	for j, c := range checks {
		switch c.Decision.Outcome {
		case sqlcheck.Conforms:
			return j, true
		case sqlcheck.Survey:
			if i < 0 {
				i = j
			}
		}
	}
	return i, i >= 0
}

// Of is the route of a statement.
func Of(in Input) Route {
	r := Route{Path: Refer, Chosen: -1}
	for _, c := range in.Checks {
		r.Evaluated = append(r.Evaluated, Evaluation{Delegation: c.Delegation, Decision: string(c.Decision.Outcome),
			Rule: c.Decision.Rule, Reasons: c.Reasons})
	}
	i, ok := choose(in.Checks)
	switch {
	case len(in.Checks) == 0:
		r.Reasons = []Reason{{Code: NoDelegation,
			Text: fmt.Sprintf("%s has no delegation in force on %s", in.Principal, in.Target)}}
		return r
	case !ok:
		r.Reasons = notCovered(in.Analysis, in.Checks)
		return r
	}
	c := in.Checks[i]
	r.Chosen, r.Delegation, r.Rule, r.Decision = i, c.Delegation, c.Decision.Rule, c.Decision
	if in.Stale != "" {
		r.Reasons = []Reason{{Code: Stale, Text: in.Stale}}
		return r
	}
	path := Compiled
	if c.Decision.Outcome == sqlcheck.Survey {
		path = Surveyed
		if why := closed(in.Survey); why != nil {
			r.Reasons = []Reason{{Code: SurveyClosed, Delegation: c.Delegation, Cause: why}}
			return r
		}
	}
	if path == Surveyed && in.InTransaction {
		r.Reasons = []Reason{{Code: InTransaction, Text: in.InTransactionText}}
		return r
	}
	if in.Quota.Empty || in.Quota.Unknown {
		r.Reasons = []Reason{quotaRefusal(in, c, c.Decision)}
		return r
	}
	r.Path = path
	return r
}

// quotaRefusal is the reason an otherwise open path is refused by its
// quota: for the surveyed path, as the cause it is closed.
func quotaRefusal(in Input, c Check, d sqlcheck.Decision) Reason {
	why := quotaReason(in, c)
	if d.Outcome == sqlcheck.Survey {
		cause := why
		why = Reason{Code: SurveyClosed, Delegation: c.Delegation, Cause: &cause}
	}
	return why
}

// closed is why the surveyed path is closed, or nil when it is open.
func closed(s Survey) *Reason {
	switch {
	case s.Unreadable:
		return &Reason{Code: Unreadable, Text: "the switches or the Surveyor's enablement could not be read"}
	case !s.TierB.On:
		return &Reason{Code: TierBOff, Text: s.TierB.Off}
	case !s.HasSurveyor:
		return &Reason{Code: NoSurveyor, Text: "no Surveyor is configured on this node"}
	}
	for _, rule := range s.Residual {
		id, ok := s.Enabled[rule]
		switch {
		case !ok:
			return &Reason{Code: NotEnabled, Text: fmt.Sprintf("the Surveyor is not enabled for rule %d of this delegation", rule)}
		case id != s.Surveyor:
			return &Reason{Code: OtherSurveyor, Text: fmt.Sprintf("rule %d is enabled for %s, not for this node's Surveyor %s", rule, id, s.Surveyor)}
		}
	}
	switch {
	case !s.HasAudit:
		return &Reason{Code: NoAudit, Text: "no sampled audit is configured on this node, and Tier B does not run without one"}
	case s.Suspended:
		return &Reason{Code: Suspended, Text: "the delegation's fast path is suspended by the sampled audit (" + s.SuspendedWhy + ")"}
	}
	return nil
}

func quotaReason(in Input, c Check) Reason {
	if in.Quota.Unknown {
		return Reason{Code: QuotaUnknown, Delegation: c.Delegation, Text: "the fast-path quota could not be checked"}
	}
	if in.Quota.Principal {
		return Reason{Code: QuotaPrincipal, Text: fmt.Sprintf("the fast-path quota of %s is used up", in.Principal)}
	}
	return Reason{Code: QuotaDelegation, Delegation: c.Delegation,
		Text: fmt.Sprintf("the fast-path quota of delegation %s (%s) is used up", c.Delegation, c.Quota)}
}

// notCovered lists why no delegation covers a statement: the parse-level
// reasons once, then each delegation's own, each once.
func notCovered(a *sqlcheck.Analysis, checks []Check) []Reason {
	var out []Reason
	seen := map[string]bool{}
	if a != nil {
		for _, r := range a.Reasons {
			out = append(out, Reason{Code: NotCovered, Text: r.String()})
			seen[r.String()] = true
		}
	}
	covered := "[" + sqlcheck.CodeCovered + "]"
	for _, c := range checks {
		for _, r := range c.Reasons {
			if seen[r] || len(r) >= len(covered) && r[len(r)-len(covered):] == covered {
				continue
			}
			seen[r] = true
			text := r
			if len(checks) > 1 {
				text = c.Delegation + ": " + r
			}
			out = append(out, Reason{Code: NotCovered, Delegation: c.Delegation, Text: text})
		}
	}
	if len(out) == 0 {
		out = []Reason{{Code: NotCovered, Text: "no delegation covers this statement"}}
	}
	return out
}

// Strings renders reasons as the sentences the agent reads.
func Strings(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// Lean is Evaluated for a statement that runs under delegation chosen: the
// other delegations' outcomes without their reasons, which are for a human
// deciding a referral.
func Lean(evals []Evaluation, chosen string) []Evaluation {
	out := make([]Evaluation, len(evals))
	for i, e := range evals {
		out[i] = e
		if e.Delegation != chosen {
			out[i].Reasons = nil
		}
	}
	return out
}
