package cover

import (
	"fmt"

	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Writer is a write the grantee may make: an insert or update rule of this
// or another of its active delegations.
type Writer struct {
	// Source names it for a person: "rule 1" or "rule 0 of other.yaml".
	Source  string
	Op      sqlcheck.Op
	Table   sqlcheck.TableName
	Columns []string
	// Fence and Check are the rule's compiled expressions (nil when absent).
	Fence, Check *pg.Node
	FenceText    string
	CheckText    string
}

func (w Writer) writes(col string) bool {
	for _, c := range w.Columns {
		if c == col {
			return true
		}
	}
	return false
}

// Env is what the gates consult: the catalog, every write the grantee may
// make, sample rows per table and the server time. No model.
type Env struct {
	Catalog *sqlcheck.Catalog
	Writers []Writer
	// Rows are sample rows per table (from the target, or synthesized).
	Rows map[sqlcheck.TableName][]Row
	Now  time.Time
}

// Subject is a fence or check to gate.
type Subject struct {
	// Kind is "fence" or "check".
	Kind string
	// Rule is the Source of the rule it belongs to ("rule 1"), so the rule
	// is not counted as a foreign writer of its own check.
	Rule  string
	Op    sqlcheck.Op
	Table *sqlcheck.Table
	Expr  *sqlcheck.Expr
	// Columns are the columns the rule itself writes.
	Columns []string
}

// RowsFor returns the sample rows of t, synthesizing them from the column
// types when none were read (an empty table, or no target).
func (e *Env) RowsFor(t *sqlcheck.Table) ([]Row, bool) {
	if rs := e.Rows[t.Name]; len(rs) > 0 {
		return rs, false
	}
	return SynthesizeRows(t, e.Now), true
}

// Gate runs G0, G1 and G2 on one fence or check. A panic below (a bug)
// fails every gate rather than the command.
func (e *Env) Gate(s Subject) (g bound.ExprGates) {
	defer func() {
		if p := recover(); p != nil {
			bad := bound.Gate{OK: false, Why: fmt.Sprintf("the gates failed internally (%v): not verified", p)}
			g = bound.ExprGates{Expr: s.Expr.Canonical, G0: bad, G1: bad, G2: bad}
		}
	}()
	g = bound.ExprGates{Expr: s.Expr.Canonical}
	g.G0 = e.G0(s.Expr.Node, s.Table)
	g.G1 = e.G1(s)
	g.G2 = e.G2(s)
	return g
}

func (e *Env) evaluator(t *sqlcheck.Table) *Evaluator {
	ev := &Evaluator{Now: e.Now, Types: map[string]string{}}
	for _, c := range t.Columns {
		ev.Types[c.Name] = kindOf(c.Type)
	}
	return ev
}

// identitySlot returns the boolean column an expression is an identity on
// (c, NOT c, c = true, c IS TRUE, c <> false, ...), or "".
func identitySlot(n *pg.Node, t *sqlcheck.Table) string {
	for n != nil {
		switch x := n.Node.(type) {
		case *pg.Node_ColumnRef:
			f := x.ColumnRef.Fields
			if len(f) == 0 || f[len(f)-1].GetString_() == nil {
				return ""
			}
			col := f[len(f)-1].GetString_().Sval
			for _, c := range t.Columns {
				if c.Name == col && kindOf(c.Type) == kindBool {
					return col
				}
			}
			return ""
		case *pg.Node_BoolExpr:
			if x.BoolExpr.Boolop != pg.BoolExprType_NOT_EXPR || len(x.BoolExpr.Args) != 1 {
				return ""
			}
			n = x.BoolExpr.Args[0]
		case *pg.Node_BooleanTest:
			n = x.BooleanTest.Arg
		case *pg.Node_TypeCast:
			n = x.TypeCast.Arg
		case *pg.Node_AExpr:
			a := x.AExpr
			op := opName(a.Name)
			if a.Kind != pg.A_Expr_Kind_AEXPR_OP && a.Kind != pg.A_Expr_Kind_AEXPR_DISTINCT && a.Kind != pg.A_Expr_Kind_AEXPR_NOT_DISTINCT {
				return ""
			}
			if a.Kind == pg.A_Expr_Kind_AEXPR_OP && op != "=" && op != "<>" && op != "!=" {
				return ""
			}
			switch {
			case isBoolConst(a.Rexpr):
				n = a.Lexpr
			case isBoolConst(a.Lexpr):
				n = a.Rexpr
			default:
				return ""
			}
		default:
			return ""
		}
	}
	return ""
}

func isBoolConst(n *pg.Node) bool {
	if n == nil {
		return false
	}
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	c := n.GetAConst()
	if c == nil {
		return false
	}
	if c.GetBoolval() != nil {
		return true
	}
	if sv := c.GetSval(); sv != nil {
		_, err := toBool(sv.Sval)
		return err == nil
	}
	return false
}

// G0 is the structure gate: the expression must not be an identity on one
// slot, a boolean column whose value is the verdict (the column's name then
// restates the judgment, and whoever writes it decides).
func G0(n *pg.Node, t *sqlcheck.Table) bound.Gate {
	if col := identitySlot(n, t); col != "" {
		return bound.Gate{OK: false, Why: fmt.Sprintf("an identity on one slot: the verdict is the value of the boolean column %s, so the check hands the predicate back to whatever sets %s", col, col)}
	}
	return bound.Gate{OK: true, Why: "not an identity on one slot"}
}

// G0 in context: an identity on a boolean slot the grantee cannot write
// passes (the slot is a fact infrastructure records, such as kyc_verified
// set by the KYC provider); on a slot the grantee writes it fails.
func (e *Env) G0(n *pg.Node, t *sqlcheck.Table) bound.Gate {
	g := G0(n, t)
	if g.OK {
		return g
	}
	col := identitySlot(n, t)
	if ws := e.writersOf(t.Name, col); len(ws) > 0 {
		g.Why += fmt.Sprintf(", and the grantee sets %s itself (%s)", col, ws[0].Source)
		return g
	}
	return bound.Gate{OK: true, Why: fmt.Sprintf("an identity on one slot, but %s is attested: the grantee cannot write it under any delegation considered", col)}
}

// agentText reports whether a column name reads as the agent's own
// account (a reason, note, comment or justification).
func agentText(col string) bool {
	c := strings.ToLower(col)
	if _, ok := unattested[c]; ok {
		return true
	}
	switch c {
	case "note", "notes", "explanation", "rationale":
		return true
	}
	for _, suf := range []string{"_reason", "_note", "_notes", "_comment", "_comments", "_justification", "_rationale", "_explanation"} {
		if strings.HasSuffix(c, suf) {
			return true
		}
	}
	return false
}

// writersOf lists the writers that write col of table t, other than skip.
func (e *Env) writersOf(t sqlcheck.TableName, col string) []Writer {
	var out []Writer
	for _, w := range e.Writers {
		if w.Table == t && w.writes(col) {
			out = append(out, w)
		}
	}
	return out
}

// G1 is the groundedness gate: the expression may read only attested
// fields. A column the grantee cannot write under any of its delegations is
// attested, and so are server time and constants. A fence over a writable
// column is grounded only where no write the grantee may make moves a row
// into it (tried on the sample rows with the constants of both expressions
// and the column type's edge values). A check over a writable column is
// grounded only where it bounds the value this very rule writes (not an
// identity on a boolean slot, which would be evidence the grantee supplies
// itself), never over a value the grantee wrote under another rule.
func (e *Env) G1(s Subject) bound.Gate {
	var writable []string
	for _, c := range s.Expr.Columns {
		if len(e.writersOf(s.Table.Name, c)) > 0 {
			writable = append(writable, c)
		}
	}
	if len(writable) == 0 {
		if len(s.Expr.Columns) == 0 {
			return bound.Gate{OK: true, Why: "reads no column the grantee can write (server time and constants only)"}
		}
		return bound.Gate{OK: true, Why: fmt.Sprintf("reads only columns the grantee cannot write under any delegation considered: %s", strings.Join(s.Expr.Columns, ", "))}
	}
	for _, c := range writable {
		if agentText(c) {
			return bound.Gate{OK: false, Why: fmt.Sprintf("ungrounded: %s is text the grantee writes (its own account, such as a reason or a note), never an attested fact", c)}
		}
	}
	if s.Kind == "check" {
		return e.g1Check(s, writable)
	}
	return e.g1Fence(s, writable)
}

func (e *Env) g1Check(s Subject, writable []string) bound.Gate {
	own := map[string]bool{}
	for _, c := range s.Columns {
		own[c] = true
	}
	if col := identitySlot(s.Expr.Node, s.Table); col != "" && len(e.writersOf(s.Table.Name, col)) > 0 {
		ws := e.writersOf(s.Table.Name, col)
		return bound.Gate{OK: false, Why: fmt.Sprintf("the check stands as evidence over %s, which the grantee writes itself (%s): it certifies only the grantee's own account", col, ws[0].Source)}
	}
	var why []string
	for _, c := range writable {
		if own[c] {
			why = append(why, c)
			continue
		}
		for _, w := range e.writersOf(s.Table.Name, c) {
			if w.Source != s.Rule {
				return bound.Gate{OK: false, Why: fmt.Sprintf("the check reads %s, which the grantee can write under %s: it would certify a value the grantee wrote itself", c, w.Source)}
			}
		}
	}
	return bound.Gate{OK: true, Why: fmt.Sprintf("grounded: the check bounds the values this rule writes (%s); every other column it reads is one the grantee cannot write", strings.Join(why, ", "))}
}

func (e *Env) g1Fence(s Subject, writable []string) bound.Gate {
	rows, synth := e.RowsFor(s.Table)
	ev := e.evaluator(s.Table)
	cands := e.candidates(s.Table, rows, s.Expr.Node)
	var grounded []string
	for _, c := range writable {
		for _, w := range e.writersOf(s.Table.Name, c) {
			moved, v, eligible, err := e.canMoveIn(ev, s.Expr.Node, w, c, rows, cands)
			if err != nil {
				return bound.Gate{OK: false, Why: fmt.Sprintf("cannot tell whether a write can move a row into the fence: %v", err)}
			}
			switch {
			case moved && w.Op == sqlcheck.OpInsert:
				return bound.Gate{OK: false, Why: fmt.Sprintf("the fence reads %s, which the grantee can write under %s: inserting a row with %s = %s puts it inside the fence", c, w.Source, c, sqlLiteral(v))}
			case moved:
				return bound.Gate{OK: false, Why: fmt.Sprintf("the fence reads %s, which the grantee can write under %s: setting %s = %s moves a row into the fence", c, w.Source, c, sqlLiteral(v))}
			case w.Check != nil && e.checkKeepsOut(ev, s.Expr.Node, w, c, rows, cands):
				grounded = append(grounded, fmt.Sprintf("%s may write %s only where %s, which keeps written rows out of the fence", w.Source, c, w.CheckText))
			case w.Op == sqlcheck.OpUpdate && eligible == 0:
				grounded = append(grounded, fmt.Sprintf("%s writes %s but reaches only rows already inside the fence (its own fence %s)", w.Source, c, w.FenceText))
			default:
				grounded = append(grounded, fmt.Sprintf("%s writes %s, but no value tried puts a row it reaches into the fence", w.Source, c))
			}
		}
	}
	src := "sample rows from the target"
	if synth {
		src = "rows synthesized from the column types"
	}
	return bound.Gate{OK: true, Why: fmt.Sprintf("grounded: %s (tried on %d %s and their variants)", strings.Join(dedupe(grounded), "; "), len(rows), src)}
}

// canMoveIn reports whether writer w, setting col to some candidate value,
// can produce a row inside fence from a row outside it that w reaches (an
// update: inside w's own fence; an insert: any row) and that satisfies w's
// check. The rows tried are the sample rows and their variants with one
// column set to a candidate value, so a sparse sample still meets w's
// fence. eligible counts the rows an update could start from.
func (e *Env) canMoveIn(ev *Evaluator, fence *pg.Node, w Writer, col string, rows []Row, cands map[string][]any) (bool, any, int, error) {
	base := rows
	if w.Op == sqlcheck.OpUpdate {
		base = append([]Row(nil), rows...)
		for _, x := range rows {
			for c, vs := range cands {
				for _, v := range vs {
					y := copyRow(x)
					y[c] = v
					base = append(base, y)
				}
			}
		}
	}
	eligible := 0
	for _, x := range base {
		if w.Op == sqlcheck.OpUpdate {
			if w.Fence != nil {
				ok, err := ev.Passes(w.Fence, x)
				if err != nil {
					return false, nil, 0, err
				}
				if !ok {
					continue
				}
			}
			in, err := ev.Passes(fence, x)
			if err != nil {
				return false, nil, 0, err
			}
			if in {
				continue
			}
			eligible++
		}
		for _, v := range cands[col] {
			y := copyRow(x)
			y[col] = v
			in, err := ev.Passes(fence, y)
			if err != nil {
				return false, nil, 0, err
			}
			if !in {
				continue
			}
			if w.Check != nil {
				ok, err := ev.Passes(w.Check, y)
				if err != nil {
					return false, nil, 0, err
				}
				if !ok {
					continue
				}
			}
			return true, v, eligible, nil
		}
	}
	return false, nil, eligible, nil
}

// checkKeepsOut reports whether no row w's check accepts, with col set to
// any candidate value, lies inside fence.
func (e *Env) checkKeepsOut(ev *Evaluator, fence *pg.Node, w Writer, col string, rows []Row, cands map[string][]any) bool {
	for _, x := range rows {
		for _, v := range cands[col] {
			y := copyRow(x)
			y[col] = v
			ok, err := ev.Passes(w.Check, y)
			if err != nil {
				return false
			}
			if !ok {
				continue
			}
			if in, err := ev.Passes(fence, y); err != nil || in {
				return false
			}
		}
	}
	return true
}

// G2 is the sensitivity gate: some intervention on a slot (a column the
// expression reads) must change its verdict on some sample row. NULL is an
// intervention only for expressions that test for NULL.
func (e *Env) G2(s Subject) bound.Gate {
	if len(s.Expr.Columns) == 0 {
		return bound.Gate{OK: false, Why: fmt.Sprintf("constant: the %s reads no column, so no intervention can change its verdict", s.Kind)}
	}
	rows, synth := e.RowsFor(s.Table)
	ev := e.evaluator(s.Table)
	cands := e.candidates(s.Table, rows, s.Expr.Node)
	tried := 0
	type change struct {
		col string
		v   any
	}
	// One slot at a time first, then pairs: a conjunction over two slots
	// (status = 'pending' AND created_at < ...) may need both moved at once
	// on sparse rows.
	try := func(x Row, base any, cs ...change) (bool, string, error) {
		y := copyRow(x)
		var what []string
		for _, c := range cs {
			y[c.col] = c.v
			what = append(what, c.col+" = "+sqlLiteral(c.v))
		}
		got, err := ev.Truth(s.Expr.Node, y)
		if err != nil {
			return false, "", err
		}
		tried++
		if got != base {
			return true, fmt.Sprintf("sensitive: setting %s changes the verdict from %s to %s", strings.Join(what, " and "), truthString(base), truthString(got)), nil
		}
		return false, "", nil
	}
	bad := func(err error) bound.Gate {
		return bound.Gate{OK: false, Why: fmt.Sprintf("the %s cannot be evaluated on sample rows: %v", s.Kind, err)}
	}
	for pass := 1; pass <= 2; pass++ {
		for _, x := range rows {
			base, err := ev.Truth(s.Expr.Node, x)
			if err != nil {
				return bad(err)
			}
			cols := s.Expr.Columns
			for i, c := range cols {
				for _, v := range cands[c] {
					if pass == 1 {
						if ok, why, err := try(x, base, change{c, v}); err != nil {
							return bad(err)
						} else if ok {
							return bound.Gate{OK: true, Why: why}
						}
						continue
					}
					for _, c2 := range cols[i+1:] {
						for _, v2 := range cands[c2] {
							if ok, why, err := try(x, base, change{c, v}, change{c2, v2}); err != nil {
								return bad(err)
							} else if ok {
								return bound.Gate{OK: true, Why: why}
							}
						}
					}
				}
			}
		}
	}
	src := "sample rows from the target"
	if synth {
		src = "rows synthesized from the column types"
	}
	return bound.Gate{OK: false, Why: fmt.Sprintf("constant or tautological: no intervention on %s changes the verdict (%d interventions on %d %s)", strings.Join(s.Expr.Columns, ", "), tried, len(rows), src)}
}

func truthString(v any) string {
	switch v {
	case true:
		return "true"
	case false:
		return "false"
	}
	return "null"
}

// candidates are the intervention values per column: the values in the
// sample rows, the constants of the expressions (of the subject and of
// every writer's fence and check on the table), and the type's edge values.
func (e *Env) candidates(t *sqlcheck.Table, rows []Row, exprs ...*pg.Node) map[string][]any {
	for _, w := range e.Writers {
		if w.Table == t.Name {
			exprs = append(exprs, w.Check, w.Fence)
		}
	}
	var consts []any
	nullTests := false
	for _, n := range exprs {
		if n != nil {
			consts = append(consts, constants(n)...)
		}
	}
	// NULL is an intervention only for an expression that tests for it
	// (IS NULL, IS NOT NULL, coalesce): elsewhere it makes every comparison
	// "sensitive" and says nothing about the predicate.
	if len(exprs) > 0 && exprs[0] != nil {
		walkNodes(exprs[0], func(x *pg.Node) {
			switch x.Node.(type) {
			case *pg.Node_NullTest, *pg.Node_CoalesceExpr, *pg.Node_BooleanTest:
				nullTests = true
			}
		})
	}
	out := map[string][]any{}
	for _, c := range t.Columns {
		k := kindOf(c.Type)
		var vs []any
		for _, r := range rows {
			if v := r[c.Name]; v != nil {
				vs = append(vs, v)
			}
		}
		for _, cv := range consts {
			if v, err := castTo(cv, k); err == nil && v != nil {
				vs = append(vs, v)
				if i, ok := v.(int64); ok {
					vs = append(vs, i-1, i+1)
				}
				if f, ok := v.(float64); ok {
					vs = append(vs, f-0.5, f+0.5)
				}
			}
		}
		vs = append(vs, edgeValues(k, e.Now)...)
		if nullTests {
			vs = append(vs, nil)
		}
		out[c.Name] = uniqueValues(vs)
	}
	return out
}

func constants(n *pg.Node) []any {
	var out []any
	var walk func(n *pg.Node)
	walk = func(n *pg.Node) {
		if n == nil {
			return
		}
		if c := n.GetAConst(); c != nil {
			ev := &Evaluator{}
			if v, err := ev.eval(n, nil); err == nil && v != nil {
				out = append(out, v)
			}
			return
		}
		if tc := n.GetTypeCast(); tc != nil {
			ev := &Evaluator{}
			if v, err := ev.eval(n, nil); err == nil && v != nil {
				out = append(out, v)
			}
		}
		switch x := n.Node.(type) {
		case *pg.Node_AExpr:
			walk(x.AExpr.Lexpr)
			walk(x.AExpr.Rexpr)
		case *pg.Node_BoolExpr:
			for _, a := range x.BoolExpr.Args {
				walk(a)
			}
		case *pg.Node_List:
			for _, a := range x.List.Items {
				walk(a)
			}
		case *pg.Node_TypeCast:
			walk(x.TypeCast.Arg)
		case *pg.Node_NullTest:
			walk(x.NullTest.Arg)
		case *pg.Node_BooleanTest:
			walk(x.BooleanTest.Arg)
		case *pg.Node_FuncCall:
			for _, a := range x.FuncCall.Args {
				walk(a)
			}
		case *pg.Node_CoalesceExpr:
			for _, a := range x.CoalesceExpr.Args {
				walk(a)
			}
		}
	}
	walk(n)
	return out
}

func edgeValues(kind string, now time.Time) []any {
	switch kind {
	case kindInt:
		return []any{int64(-1), int64(0), int64(1), int64(2), int64(100), int64(1000000)}
	case kindFloat:
		return []any{-1.0, 0.0, 0.5, 1.0, 100.0, 1e6}
	case kindBool:
		return []any{true, false}
	case kindTime:
		d := 24 * time.Hour
		return []any{now.Add(-400 * d), now.Add(-30 * d), now.Add(-2 * d), now.Add(-time.Hour), now, now.Add(time.Hour), now.Add(30 * d)}
	case kindInterval:
		return []any{time.Duration(0), time.Hour, 24 * time.Hour, 30 * 24 * time.Hour}
	}
	return []any{"", "x", "zzzz"}
}

func uniqueValues(vs []any) []any {
	seen := map[string]bool{}
	var out []any
	for _, v := range vs {
		k := fmt.Sprintf("%T:%v", v, v)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

func copyRow(r Row) Row {
	out := make(Row, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// sqlLiteral renders a value as SQL for a report.
func sqlLiteral(v any) string {
	switch t := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(t, "'", "''") + "'"
	case unknown:
		return "'" + strings.ReplaceAll(string(t), "'", "''") + "'"
	case time.Time:
		return "'" + t.UTC().Format(time.RFC3339) + "'"
	case time.Duration:
		return fmt.Sprintf("interval '%d seconds'", int64(t.Seconds()))
	}
	return textOf(v)
}

// SynthesizeRows makes sample rows from the column types, for a table
// with no rows to read: four rows whose values differ per column.
func SynthesizeRows(t *sqlcheck.Table, now time.Time) []Row {
	rows := make([]Row, 4)
	for i := range rows {
		rows[i] = Row{}
		for _, c := range t.Columns {
			vs := edgeValues(kindOf(c.Type), now)
			switch kindOf(c.Type) {
			case kindText:
				vs = []any{"a", "b", "c", "d"}
			case kindInt:
				vs = []any{int64(1), int64(2), int64(3), int64(4)}
			}
			rows[i][c.Name] = vs[(i+len(c.Name))%len(vs)]
		}
	}
	return rows
}

// WritersOf lists the writes a compiled bound grants, named by source
// ("rule 1", or "rule 1 of SOURCE" when source is not empty) or by name
// when given.
func WritersOf(b *bound.Bound, cat *sqlcheck.Catalog, source string, name func(i int) string) []Writer {
	var out []Writer
	for i, r := range b.Rules {
		if r.Op != sqlcheck.OpInsert && r.Op != sqlcheck.OpUpdate {
			continue
		}
		tn, err := r.TableName()
		if err != nil {
			continue
		}
		t, ok := cat.Table(tn)
		if !ok {
			continue
		}
		src := RuleSource(i, source)
		if name != nil {
			src = name(i)
		}
		w := Writer{Source: src, Op: r.Op, Table: tn, Columns: r.Columns, FenceText: r.Fence, CheckText: r.Check}
		if r.Fence != "" {
			if e, reasons := sqlcheck.CompileExpr(r.Fence, t, cat); len(reasons) == 0 {
				w.Fence = e.Node
			}
		}
		if r.Check != "" {
			if e, reasons := sqlcheck.CompileExpr(r.Check, t, cat); len(reasons) == 0 {
				w.Check = e.Node
			}
		}
		out = append(out, w)
	}
	return out
}

// RuleSource names rule i of a delegation for a report.
func RuleSource(i int, source string) string {
	if source == "" {
		return fmt.Sprintf("rule %d", i)
	}
	return fmt.Sprintf("rule %d of %s", i, source)
}
