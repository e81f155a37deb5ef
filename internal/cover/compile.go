package cover

import (
	"fmt"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// ApplyGates runs G0 to G2 on every fence and check of a compiled
// delegation and records the evidence in its report (RuleReport.Gates).
// Failures become lints, except where a residual clause rests on the
// expression: a fence the grantee can move rows into (G1) or a constant
// fence (G2) on a Tier B rule, and a check standing as evidence the
// grantee writes (G1) on a Tier B rule, are problems that make the
// delegation unsignable, since a residual rule's fence and check are what
// hold when the Surveyor is wrong. env.Writers must hold the writes of the
// grantee's other active delegations; ApplyGates adds this one's.
func ApplyGates(d *bound.Delegation, b *bound.Bound, rep *bound.Report, env *Env) {
	if len(rep.Rules) != len(b.Rules) {
		rep.Lints = append(rep.Lints, bound.Problem{Message: "the gates did not run: the report and the bound disagree on the rules"})
		return
	}
	line := func(string) int { return 0 }
	if d != nil {
		line = d.Line
	}
	names := func(i int) string { return RuleSource(rep.Rules[i].Index, "") }
	own := WritersOf(b, env.Catalog, "", names)
	env = &Env{Catalog: env.Catalog, Writers: append(own, env.Writers...), Rows: env.Rows, Now: env.Now}
	for i, r := range b.Rules {
		rr := &rep.Rules[i]
		tn, err := r.TableName()
		if err != nil {
			continue
		}
		t, ok := env.Catalog.Table(tn)
		if !ok {
			continue
		}
		rg := &bound.RuleGates{}
		residual := r.Residual != ""
		add := func(kind, text string) *bound.ExprGates {
			if text == "" {
				return nil
			}
			e, reasons := sqlcheck.CompileExpr(text, t, env.Catalog)
			if len(reasons) > 0 {
				g := bound.Gate{OK: false, Why: "the expression does not compile: " + reasons[0].Message}
				return &bound.ExprGates{Expr: text, G0: g, G1: g, G2: g}
			}
			g := env.Gate(Subject{Kind: kind, Rule: names(i), Op: r.Op, Table: t, Expr: e, Columns: r.Columns})
			field := fmt.Sprintf("allow[%d].%s", rr.Index, kind)
			flag := func(problem bool, gate string, why string) {
				p := bound.Problem{Field: field, Line: line(field), Message: fmt.Sprintf("%s %s: %s", gate, kind, why)}
				if problem {
					p.Message += " (a residual clause rests on this " + kind + ", so the rule cannot be signed)"
					rep.Problems = append(rep.Problems, p)
				} else {
					rep.Lints = append(rep.Lints, p)
				}
			}
			if !g.G0.OK {
				flag(false, "G0", g.G0.Why)
			}
			if !g.G1.OK {
				flag(residual, "G1", g.G1.Why)
			}
			if !g.G2.OK {
				flag(residual && kind == "fence" && !strings.Contains(g.G2.Why, "cannot be evaluated"), "G2", g.G2.Why)
			}
			return &g
		}
		if r.Op != sqlcheck.OpInsert {
			rg.Fence = add("fence", r.Fence)
		}
		rg.Check = add("check", r.Check)
		rg.G0, rg.G1, rg.G2 = combine(rg, func(g *bound.ExprGates) bound.Gate { return g.G0 }),
			combine(rg, func(g *bound.ExprGates) bound.Gate { return g.G1 }),
			combine(rg, func(g *bound.ExprGates) bound.Gate { return g.G2 })
		rr.Gates = rg
	}
	rep.Refresh(b)
}

func combine(rg *bound.RuleGates, pick func(*bound.ExprGates) bound.Gate) bound.Gate {
	out := bound.Gate{OK: true}
	var whys []string
	for _, p := range []struct {
		name string
		g    *bound.ExprGates
	}{{"fence", rg.Fence}, {"check", rg.Check}} {
		if p.g == nil {
			continue
		}
		g := pick(p.g)
		out.OK = out.OK && g.OK
		whys = append(whys, p.name+": "+g.Why)
	}
	if len(whys) == 0 {
		return bound.Gate{OK: true, Why: "no fence or check"}
	}
	out.Why = strings.Join(whys, "; ")
	return out
}
