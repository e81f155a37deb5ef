package route_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/route"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

func rule(i int) *int { return &i }

func check(id string, o sqlcheck.Outcome, r *int, reasons ...string) route.Check {
	return route.Check{Delegation: id, Decision: sqlcheck.Decision{Outcome: o, Rule: r}, Reasons: reasons, Quota: "3/minute"}
}

// open is every surveyed-path fact that keeps the path open.
func open() route.Survey {
	return route.Survey{TierB: route.Switch{On: true}, HasSurveyor: true, Surveyor: "panel-1",
		Residual: []int{0}, Enabled: map[int]string{0: "panel-1"}, HasAudit: true}
}

// TestRoutes is the route of each kind of input, with the exact sentence
// the agent reads and the reason's code.
func TestRoutes(t *testing.T) {
	parse := &sqlcheck.Analysis{Reasons: []sqlcheck.Reason{{Code: "writes_function", Message: "calls a volatile function"}}}
	cases := []struct {
		name    string
		in      route.Input
		path    route.Path
		chosen  int
		codes   []route.Code
		reasons []string
	}{
		{name: "no delegation", in: route.Input{Principal: "agent:a", Target: "shop"},
			path: route.Refer, chosen: -1, codes: []route.Code{route.NoDelegation},
			reasons: []string{"agent:a has no delegation in force on shop"}},
		{name: "compiled", in: route.Input{Checks: []route.Check{check("d1", sqlcheck.Conforms, rule(1))}},
			path: route.Compiled, chosen: 0},
		{name: "a later compiled beats an earlier surveyed",
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0)), check("d2", sqlcheck.Refer, nil, "x"), check("d3", sqlcheck.Conforms, rule(2))}},
			path: route.Compiled, chosen: 2},
		{name: "the first compiled wins",
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Conforms, rule(0)), check("d2", sqlcheck.Conforms, rule(1))}},
			path: route.Compiled, chosen: 0},
		{name: "surveyed, open", in: route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0))}, Survey: open()},
			path: route.Surveyed, chosen: 0},
		{name: "not covered, one delegation: parse reasons first, each once, covered ones dropped",
			in: route.Input{Analysis: parse, Checks: []route.Check{check("d1", sqlcheck.Refer, nil,
				"calls a volatile function [writes_function]", "column secret is not readable [column_not_readable]",
				"column secret is not readable [column_not_readable]", "table orders is covered by rule 0 [covered]")}},
			path: route.Refer, chosen: -1, codes: []route.Code{route.NotCovered, route.NotCovered},
			reasons: []string{"calls a volatile function [writes_function]", "column secret is not readable [column_not_readable]"}},
		{name: "not covered, two delegations name theirs",
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Refer, nil, "a [x]"), check("d2", sqlcheck.Refer, nil, "b [y]", "a [x]")}},
			path: route.Refer, chosen: -1, codes: []route.Code{route.NotCovered, route.NotCovered},
			reasons: []string{"d1: a [x]", "d2: b [y]"}},
		{name: "not covered, no reason given", in: route.Input{Checks: []route.Check{check("d1", sqlcheck.Refer, nil)}},
			path: route.Refer, chosen: -1, codes: []route.Code{route.NotCovered}, reasons: []string{"no delegation covers this statement"}},
		{name: "compiled, the delegation's quota used up",
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Conforms, rule(0))}, Quota: route.Quota{Empty: true}},
			path: route.Refer, chosen: 0, codes: []route.Code{route.QuotaDelegation},
			reasons: []string{"the fast-path quota of delegation d1 (3/minute) is used up, so a human decides"}},
		{name: "compiled, the principal's quota used up",
			in:   route.Input{Principal: "agent:a", Checks: []route.Check{check("d1", sqlcheck.Conforms, rule(0))}, Quota: route.Quota{Empty: true, Principal: true}},
			path: route.Refer, chosen: 0, codes: []route.Code{route.QuotaPrincipal},
			reasons: []string{"the fast-path quota of agent:a is used up, so a human decides"}},
		{name: "compiled, the shared quota unreadable",
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Conforms, rule(0))}, Quota: route.Quota{Unknown: true}},
			path: route.Refer, chosen: 0, codes: []route.Code{route.QuotaUnknown},
			reasons: []string{"the fast-path quota could not be checked, so a human decides"}},
		{name: "surveyed, quota used up",
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0))}, Survey: open(), Quota: route.Quota{Empty: true}},
			path: route.Refer, chosen: 0, codes: []route.Code{route.SurveyClosed},
			reasons: []string{"only a rule with a residual clause covers this statement, and the fast-path quota of delegation d1 (3/minute) is used up, so a human decides"}},
	}
	closing := []struct {
		name  string
		edit  func(*route.Survey)
		cause route.Code
		text  string
	}{
		{"unreadable", func(s *route.Survey) { s.Unreadable = true }, route.Unreadable, "the switches or the Surveyor's enablement could not be read"},
		{"tier b off", func(s *route.Survey) { s.TierB = route.Switch{Off: "Tier B is switched off for target shop"} }, route.TierBOff, "Tier B is switched off for target shop"},
		{"no surveyor", func(s *route.Survey) { s.HasSurveyor = false }, route.NoSurveyor, "no Surveyor is configured on this node"},
		{"not enabled", func(s *route.Survey) { s.Residual = []int{0, 2} }, route.NotEnabled, "the Surveyor is not enabled for rule 2 of this delegation"},
		{"other surveyor", func(s *route.Survey) { s.Enabled[0] = "panel-0" }, route.OtherSurveyor, "rule 0 is enabled for panel-0, not for this node's Surveyor panel-1"},
		{"no audit", func(s *route.Survey) { s.HasAudit = false }, route.NoAudit, "no sampled audit is configured on this node, and Tier B does not run without one"},
		{"suspended", func(s *route.Survey) { s.Suspended, s.SuspendedWhy = true, "finding f1" }, route.Suspended, "the delegation's fast path is suspended by the sampled audit (finding f1)"},
	}
	for _, c := range closing {
		s := open()
		c.edit(&s)
		cases = append(cases, struct {
			name    string
			in      route.Input
			path    route.Path
			chosen  int
			codes   []route.Code
			reasons []string
		}{name: "surveyed path closed: " + c.name,
			in:   route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0))}, Survey: s},
			path: route.Refer, chosen: 0, codes: []route.Code{route.SurveyClosed},
			reasons: []string{"only a rule with a residual clause covers this statement, and " + c.text + ", so a human decides"}})
		r := route.Of(route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0))}, Survey: s})
		if len(r.Reasons) != 1 || r.Reasons[0].Cause == nil || r.Reasons[0].Cause.Code != c.cause {
			t.Errorf("%s: reasons %+v, want one survey_closed caused by %s", c.name, r.Reasons, c.cause)
		}
	}
	for _, c := range cases {
		r := route.Of(c.in)
		var codes []route.Code
		for _, x := range r.Reasons {
			codes = append(codes, x.Code)
		}
		if r.Path != c.path || r.Chosen != c.chosen || !slices.Equal(codes, c.codes) || !slices.Equal(route.Strings(r.Reasons), nonNil(c.reasons)) {
			t.Errorf("%s: %s chosen %d codes %v reasons %q; want %s chosen %d codes %v reasons %q",
				c.name, r.Path, r.Chosen, codes, route.Strings(r.Reasons), c.path, c.chosen, c.codes, c.reasons)
		}
		if r.Path != route.Refer && len(r.Reasons) != 0 {
			t.Errorf("%s: runs with reasons %v", c.name, r.Reasons)
		}
		if r.Chosen >= 0 && (r.Delegation != c.in.Checks[r.Chosen].Delegation || r.Rule != c.in.Checks[r.Chosen].Decision.Rule) {
			t.Errorf("%s: delegation %s rule %v, not the chosen check's", c.name, r.Delegation, r.Rule)
		}
		if len(r.Evaluated) != len(c.in.Checks) {
			t.Errorf("%s: %d evaluations for %d checks", c.name, len(r.Evaluated), len(c.in.Checks))
		}
		if again := route.Of(c.in); !reflect.DeepEqual(again, r) {
			t.Errorf("%s: the same input routed twice differs:\n%+v\n%+v", c.name, r, again)
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestSurveyFactsAfterTheFirstClosingOneAreNotRead: Of stops at the first
// fact that closes the surveyed path, so the statement path may leave the
// rest unread (zero) and get the same route.
func TestSurveyFactsAfterTheFirstClosingOneAreNotRead(t *testing.T) {
	in := route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0))}}
	in.Survey = route.Survey{TierB: route.Switch{Off: "Tier B is switched off for this deployment"}}
	full := in
	full.Survey = open()
	full.Survey.TierB = in.Survey.TierB
	if a, b := route.Strings(route.Of(in).Reasons), route.Strings(route.Of(full).Reasons); !slices.Equal(a, b) {
		t.Fatalf("unread facts changed the route: %q vs %q", a, b)
	}
}

// TestQuotaOnlyForAnOpenPath: a used-up quota is no reason when the path
// was closed already: the closed path's reason stands alone.
func TestQuotaOnlyForAnOpenPath(t *testing.T) {
	s := open()
	s.HasAudit = false
	r := route.Of(route.Input{Checks: []route.Check{check("d1", sqlcheck.Survey, rule(0))}, Survey: s, Quota: route.Quota{Empty: true}})
	if len(r.Reasons) != 1 || strings.Contains(r.Reasons[0].String(), "quota") {
		t.Fatalf("reasons %q", route.Strings(r.Reasons))
	}
	r = route.Of(route.Input{Checks: []route.Check{check("d1", sqlcheck.Refer, nil, "no [x]")}, Quota: route.Quota{Empty: true}})
	if strings.Contains(strings.Join(route.Strings(r.Reasons), " "), "quota") {
		t.Fatalf("a statement no delegation covers is referred for its quota: %q", route.Strings(r.Reasons))
	}
}

// TestLean drops only the other delegations' reasons.
func TestLean(t *testing.T) {
	evals := []route.Evaluation{{Delegation: "d1", Decision: "refer", Reasons: []string{"a"}}, {Delegation: "d2", Decision: "conforms", Reasons: []string{"b"}}}
	got := route.Lean(evals, "d2")
	if got[0].Reasons != nil || !slices.Equal(got[1].Reasons, []string{"b"}) || evals[0].Reasons == nil {
		t.Fatalf("lean %+v (input %+v)", got, evals)
	}
}

// TestPathsAreTheMarques: a route's path is the path its marque names.
func TestPathsAreTheMarques(t *testing.T) {
	if string(route.Compiled) != marque.PathCompiled || string(route.Surveyed) != marque.PathSurveyed {
		t.Fatal("route and marque paths differ")
	}
}

// TestStaleRefersWhatWouldRun: a node whose delegations are stale runs
// nothing, and says so; what no delegation covers keeps its own reasons.
func TestStaleRefersWhatWouldRun(t *testing.T) {
	in := route.Input{Checks: []route.Check{check("d1", sqlcheck.Conforms, rule(0))}, Stale: "the delegations could not be read from the store for 6s"}
	r := route.Of(in)
	if r.Path != route.Refer || len(r.Reasons) != 1 || r.Reasons[0].Code != route.Stale ||
		r.Reasons[0].String() != "the delegations could not be read from the store for 6s, so a human decides" {
		t.Fatalf("stale: %s %+v", r.Path, r.Reasons)
	}
	in.Checks = []route.Check{check("d1", sqlcheck.Refer, nil, "no [x]")}
	if r := route.Of(in); r.Reasons[0].Code != route.NotCovered {
		t.Fatalf("stale, not covered: %+v", r.Reasons)
	}
}

// facts is a route.Facts that counts what it is asked.
type facts struct {
	stale          string
	survey         route.Survey
	quota          route.Quota
	asked          map[string]int
	surveyed, took int
}

func (f *facts) Stale() string { f.asked["stale"]++; return f.stale }
func (f *facts) Survey(i int) route.Survey {
	f.asked["survey"]++
	f.surveyed = i
	return f.survey
}
func (f *facts) Quota(i int) route.Quota {
	f.asked["quota"]++
	f.took = i
	return f.quota
}

// TestDecideReadsEachFactOnceWhenNeeded: Decide chooses the delegation
// once, asks each fact at most once and only when the route gets that
// far (no survey facts for the compiled path, no quota token for a path
// already closed or refused inside a transaction), and gives the route
// Of gives from the same facts.
func TestDecideReadsEachFactOnceWhenNeeded(t *testing.T) {
	survey := []route.Check{check("d0", sqlcheck.Refer, nil, "no [x]"), check("d1", sqlcheck.Survey, rule(0)), check("d2", sqlcheck.Survey, rule(1))}
	compiled := append(append([]route.Check(nil), survey...), check("d3", sqlcheck.Conforms, rule(0)))
	closedSurvey := open()
	closedSurvey.HasAudit = false
	for _, c := range []struct {
		name      string
		in        route.Input
		f         facts
		path      route.Path
		asked     map[string]int
		chosen    int
		reasonHas string
	}{
		{"compiled", route.Input{Checks: compiled}, facts{survey: open()}, route.Compiled, map[string]int{"stale": 1, "quota": 1}, 3, ""},
		{"surveyed", route.Input{Checks: survey}, facts{survey: open()}, route.Surveyed, map[string]int{"stale": 1, "survey": 1, "quota": 1}, 1, ""},
		{"quota empty", route.Input{Checks: compiled}, facts{quota: route.Quota{Empty: true}}, route.Refer, map[string]int{"stale": 1, "quota": 1}, 3, "quota"},
		{"survey closed", route.Input{Checks: survey}, facts{survey: closedSurvey}, route.Refer, map[string]int{"stale": 1, "survey": 1}, 1, "audit"},
		{"stale", route.Input{Checks: compiled}, facts{stale: "the delegations are 2m old"}, route.Refer, map[string]int{"stale": 1}, 3, "2m old"},
		{"not covered", route.Input{Checks: survey[:1]}, facts{}, route.Refer, map[string]int{}, -1, "no [x]"},
		{"in a transaction", route.Input{Checks: survey, InTransaction: true, InTransactionText: "not in a transaction"}, facts{survey: open()},
			route.Refer, map[string]int{"stale": 1, "survey": 1}, 1, "not in a transaction"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.f
			f.asked = map[string]int{}
			r := route.Decide(c.in, &f)
			if r.Path != c.path || r.Chosen != c.chosen || !reflect.DeepEqual(f.asked, c.asked) {
				t.Fatalf("path %s chosen %d, asked %v; want %s, %d, %v", r.Path, r.Chosen, f.asked, c.path, c.chosen, c.asked)
			}
			if f.asked["survey"] > 0 && f.surveyed != c.chosen || f.asked["quota"] > 0 && f.took != c.chosen {
				t.Fatalf("facts asked for delegation %d (survey) and %d (quota), want %d", f.surveyed, f.took, c.chosen)
			}
			if got := strings.Join(route.Strings(r.Reasons), "; "); !strings.Contains(got, c.reasonHas) {
				t.Fatalf("reasons %q, want %q in them", got, c.reasonHas)
			}
			// The same route as Of from the facts Decide read.
			in := c.in
			in.Stale, in.Survey = f.stale, f.survey
			if f.asked["quota"] > 0 {
				in.Quota = f.quota
			}
			if want := route.Of(in); !reflect.DeepEqual(r, want) {
				t.Fatalf("Decide %+v, Of %+v", r, want)
			}
		})
	}
}

// TestEvaluationFields: an evaluation's Fields, which the decision entry
// records, is its JSON: the same members and values, with or without a
// rule and reasons.
func TestEvaluationFields(t *testing.T) {
	evals := []route.Evaluation{
		{Delegation: "dlg_a", Decision: "conforms", Rule: rule(0), Reasons: []string{"rule 0 covers it"}},
		{Delegation: "dlg_b", Decision: "refer"},
		{Delegation: "dlg_c", Decision: "refer", Reasons: []string{}},
		{Delegation: "dlg_d", Decision: "survey", Rule: rule(3)},
	}
	fields := route.FieldsOf(evals)
	for i, e := range evals {
		var want, got any
		for _, c := range []struct {
			v   any
			dst *any
		}{{e, &want}, {fields[i], &got}} {
			raw, err := json.Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, c.dst); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("evaluation %d: Fields %v, its JSON %v", i, got, want)
		}
	}
	if f := route.FieldsOf(nil); f != nil {
		t.Errorf("FieldsOf(nil) = %#v, want nil (null, as no evaluations were)", f)
	}
}
