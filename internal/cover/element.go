package cover

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Element kinds: what a synthesized clause compiles to.
const (
	KindFence     = "fence"     // a row predicate on the pre-image
	KindCheck     = "check"     // a row predicate on the post-image
	KindMaxRows   = "max_rows"  // a row cap per statement
	KindExpires   = "expires"   // an expiry (a duration from now, or a time)
	KindStatement = "statement" // a pattern over the statement's text
)

// Element is the bound element a clause implies: a rule (op, table,
// columns) and one term of it, with its named slots.
type Element struct {
	Op      string   `json:"op" yaml:"op"`
	Table   string   `json:"table" yaml:"table"`
	Columns []string `json:"columns" yaml:"columns"`
	Kind    string   `json:"kind" yaml:"kind"`
	// Expr is the fence or check (SQL), or the statement pattern (a
	// regular expression).
	Expr    string `json:"expr" yaml:"expr"`
	MaxRows int64  `json:"max_rows" yaml:"max_rows"`
	// Expires is a duration ("7d", "36h") or an RFC 3339 time.
	Expires string `json:"expires" yaml:"expires"`
	// Slots are the fields the element says it reads.
	Slots []string `json:"slots" yaml:"slots"`
}

// ElementGates is the gate evidence on one element.
type ElementGates struct {
	G0 bound.Gate `json:"g0"`
	G1 bound.Gate `json:"g1"`
	G2 bound.Gate `json:"g2"`
	G3 bound.Gate `json:"g3"`
	// Admitted is true only when every gate passed.
	Admitted bool `json:"admitted"`
}

// unattested are slot names that are never attested: the statement's own
// text and whatever the agent says about it.
var unattested = map[string]string{
	"statement_text": "the statement's text", "statement": "the statement's text", "query": "the statement's text",
	"comment": "the statement's comments", "comments": "the statement's comments",
	"reason": "an agent-supplied reason", "agent_reason": "an agent-supplied reason", "justification": "an agent-supplied reason",
}

func failAll(why string) ElementGates {
	g := bound.Gate{OK: false, Why: why}
	return ElementGates{G0: g, G1: g, G2: g, G3: g}
}

// Resolve checks an element's rule against the catalog: the op, the
// table, the columns. It returns the table and the op, or why not.
func (el Element) Resolve(cat *sqlcheck.Catalog) (*sqlcheck.Table, sqlcheck.Op, string) {
	op, ok := sqlcheck.ParseOp(strings.ToLower(strings.TrimSpace(el.Op)))
	if !ok {
		return nil, "", fmt.Sprintf("op must be select, insert, update or delete, got %q", el.Op)
	}
	schema, name, err := sqlcheck.ParseRelationName(el.Table)
	if err != nil {
		return nil, "", fmt.Sprintf("not a table name: %q", el.Table)
	}
	t, ok := cat.Resolve(schema, name)
	if !ok || sqlcheck.IsReservedSchema(t.Name.Schema) {
		return nil, "", fmt.Sprintf("table %s is not in the target catalog", el.Table)
	}
	for _, c := range el.Columns {
		if !t.Has(c) {
			return nil, "", fmt.Sprintf("column %s does not exist in %s (a missing field)", c, t.Name)
		}
	}
	if op != sqlcheck.OpDelete && len(el.Columns) == 0 {
		return nil, "", fmt.Sprintf("a %s rule must list its columns", op)
	}
	return t, op, ""
}

// GateElement runs the four gates on a synthesized element. env.Writers
// are the writes the grantee may make besides this element's own rule.
// Any failure to resolve, compile or evaluate fails every gate: the clause
// is residual.
func (e *Env) GateElement(el Element) (g ElementGates) {
	defer func() {
		if p := recover(); p != nil {
			g = failAll(fmt.Sprintf("the gates failed internally (%v): not admitted", p))
		}
	}()
	t, op, why := el.Resolve(e.Catalog)
	if t == nil {
		return failAll(why)
	}
	for _, s := range el.Slots {
		if what, ok := unattested[strings.ToLower(strings.TrimSpace(s))]; ok {
			g := failAll(fmt.Sprintf("ungrounded: the slot %s reads %s, which the agent writes", s, what))
			return g
		}
	}
	switch el.Kind {
	case KindFence, KindCheck:
		return e.gateExpr(el, t, op)
	case KindMaxRows:
		if el.MaxRows < 1 {
			return failAll(fmt.Sprintf("max_rows must be at least 1, got %d", el.MaxRows))
		}
		if op == sqlcheck.OpSelect && el.MaxRows > 1<<20 || el.MaxRows > 1<<30 {
			return failAll(fmt.Sprintf("max_rows %d bounds nothing", el.MaxRows))
		}
		ok := bound.Gate{OK: true}
		g := ElementGates{G0: ok, G1: ok, G2: ok, Admitted: true}
		g.G0.Why = "a row cap, not an identity on a slot"
		g.G1.Why = "grounded: the Pilot counts the rows a statement affects"
		g.G2.Why = fmt.Sprintf("sensitive: a statement reaching %d rows is refused, %d is not", el.MaxRows+1, el.MaxRows)
		g.G3 = e.invariance(el, t, op, nil)
		g.Admitted = g.G3.OK
		return g
	case KindExpires:
		if _, err := ParseExpiry(el.Expires, e.Now); err != nil {
			return failAll(err.Error())
		}
		ok := bound.Gate{OK: true}
		return ElementGates{G0: bound.Gate{OK: true, Why: "an expiry, not an identity on a slot"},
			G1: bound.Gate{OK: true, Why: "grounded: server time"},
			G2: bound.Gate{OK: true, Why: "sensitive: a statement after the expiry is refused, one before it is not"},
			G3: bound.Gate{OK: ok.OK, Why: "invariant: the expiry reads no part of the statement"}, Admitted: true}
	case KindStatement:
		if _, err := regexp.Compile(el.Expr); err != nil {
			return failAll(fmt.Sprintf("the statement pattern does not compile: %v", err))
		}
		g := ElementGates{G0: bound.Gate{OK: true, Why: "a pattern, not an identity on a slot"},
			G1: bound.Gate{OK: false, Why: "ungrounded: the element reads the statement's text, which the agent writes"},
			G2: bound.Gate{OK: true, Why: "sensitive to the statement's text"}}
		g.G3 = e.invariance(el, t, op, nil)
		return g
	}
	return failAll(fmt.Sprintf("unknown element kind %q (want fence, check, max_rows, expires or statement)", el.Kind))
}

func (e *Env) gateExpr(el Element, t *sqlcheck.Table, op sqlcheck.Op) ElementGates {
	if el.Kind == KindFence && op == sqlcheck.OpInsert {
		return failAll("an insert reaches no existing row: a fence on an insert rule bounds nothing")
	}
	if el.Kind == KindCheck && op != sqlcheck.OpInsert && op != sqlcheck.OpUpdate {
		return failAll("only insert and update rules have a check")
	}
	x, reasons := sqlcheck.CompileExpr(el.Expr, t, e.Catalog)
	if len(reasons) > 0 {
		return failAll("the expression does not compile: " + reasons[0].Message)
	}
	// The element's own rule is a write the grantee may make.
	own := "the drafted rule"
	ws := append([]Writer(nil), e.Writers...)
	if op == sqlcheck.OpInsert || op == sqlcheck.OpUpdate {
		w := Writer{Source: own, Op: op, Table: t.Name, Columns: el.Columns}
		if el.Kind == KindCheck {
			w.Check, w.CheckText = x.Node, x.Canonical
		} else {
			w.Fence, w.FenceText = x.Node, x.Canonical
		}
		ws = append(ws, w)
	}
	sub := &Env{Catalog: e.Catalog, Writers: ws, Rows: e.Rows, Now: e.Now}
	eg := sub.Gate(Subject{Kind: el.Kind, Rule: own, Op: op, Table: t, Expr: x, Columns: el.Columns})
	g := ElementGates{G0: eg.G0, G1: eg.G1, G2: eg.G2}
	g.G3 = sub.invariance(el, t, op, x)
	g.Admitted = g.G0.OK && g.G1.OK && g.G2.OK && g.G3.OK
	return g
}

// ParseExpiry reads "7d", "36h", "2w" or an RFC 3339 time after now.
func ParseExpiry(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return time.Time{}, fmt.Errorf("the expiry %s is already past", s)
		}
		return t.UTC(), nil
	}
	if len(s) >= 2 {
		n, err := strconv.Atoi(s[:len(s)-1])
		if err == nil && n > 0 && n <= 3650 {
			switch s[len(s)-1] {
			case 'h':
				return now.Add(time.Duration(n) * time.Hour).UTC(), nil
			case 'd':
				return now.Add(time.Duration(n) * 24 * time.Hour).UTC(), nil
			case 'w':
				return now.Add(time.Duration(n) * 7 * 24 * time.Hour).UTC(), nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("the expiry must be a duration such as 7d or 36h, or an RFC 3339 time, got %q", s)
}

// invariance is G3: the element's verdict on sample statements holds under
// every rewording of them. x is the compiled fence or check (nil for
// other kinds).
func (e *Env) invariance(el Element, t *sqlcheck.Table, op sqlcheck.Op, x *sqlcheck.Expr) bound.Gate {
	rows, _ := e.RowsFor(t)
	stmts := sampleStatements(t, op, el.Columns, rows, x)
	ev := e.evaluator(t)
	rules := []sqlcheck.Rule{{Index: 0, Op: op, Table: t.Name, Columns: el.Columns}}
	if op != sqlcheck.OpSelect {
		rules = append(rules, sqlcheck.Rule{Index: 1, Op: sqlcheck.OpSelect, Table: t.Name, Columns: t.ColumnNames()})
	}
	verdict := func(sql string) (string, error) {
		if el.Kind == KindStatement {
			re := regexp.MustCompile(el.Expr)
			return strconv.FormatBool(re.MatchString(sql)), nil
		}
		a := sqlcheck.Analyze(sql, e.Catalog, sqlcheck.Limits{})
		d := sqlcheck.Check(a, rules)
		if a.Tree == nil {
			return string(d.Outcome), nil
		}
		reached, post, err := effect(ev, a.Stmt(), rows)
		if err != nil {
			return "", err
		}
		var parts []string
		switch el.Kind {
		case KindFence:
			var in []int
			for _, i := range reached {
				ok, err := ev.Passes(x.Node, rows[i])
				if err != nil {
					return "", err
				}
				if ok {
					in = append(in, i)
				}
			}
			parts = append(parts, fmt.Sprint(in))
		case KindCheck:
			for _, p := range post {
				ok, err := ev.Passes(x.Node, p)
				if err != nil {
					return "", err
				}
				parts = append(parts, strconv.FormatBool(ok))
			}
		case KindMaxRows:
			parts = append(parts, strconv.FormatBool(int64(len(reached)) <= el.MaxRows))
		}
		return string(d.Outcome) + " " + strings.Join(parts, ","), nil
	}
	total, held := 0, 0
	var broke []string
	for _, s := range stmts {
		base, err := verdict(s)
		if err != nil {
			return bound.Gate{OK: false, Why: fmt.Sprintf("cannot evaluate the element on a sample statement: %v", err)}
		}
		vs, err := Reword(s)
		if err != nil {
			return bound.Gate{OK: false, Why: fmt.Sprintf("a sample statement does not parse: %v", err)}
		}
		for _, v := range vs {
			got, err := verdict(v.SQL)
			if err != nil {
				return bound.Gate{OK: false, Why: fmt.Sprintf("cannot evaluate the element on a reworded statement (%s): %v", v.Name, err)}
			}
			total++
			if got == base {
				held++
			} else {
				broke = append(broke, v.Name)
			}
		}
	}
	if total == 0 {
		return bound.Gate{OK: false, Why: "no sample statement to reword"}
	}
	if held < total {
		sort.Strings(broke)
		return bound.Gate{OK: false, Why: fmt.Sprintf("not invariant: the verdict changed under %d of %d rewordings (%s)", total-held, total, strings.Join(dedupe(broke), ", "))}
	}
	return bound.Gate{OK: true, Why: fmt.Sprintf("invariant: the verdict held under all %d rewordings of %d sample statements", total, len(stmts))}
}

// sampleStatements writes statements of op on t from the sample rows and
// the expression's constants: one per shape, one with a comment.
func sampleStatements(t *sqlcheck.Table, op sqlcheck.Op, cols []string, rows []Row, x *sqlcheck.Expr) []string {
	if len(rows) == 0 {
		return nil
	}
	r0, r1 := rows[0], rows[len(rows)-1]
	where := func(r Row) string {
		var conj []string
		names := t.ColumnNames()
		if x != nil {
			names = append(append([]string(nil), x.Columns...), names...)
		}
		for _, c := range dedupe(names) {
			if v := r[c]; v != nil && len(conj) < 2 {
				conj = append(conj, sqlcheck.QuoteIdent(c)+" = "+sqlLiteral(v))
			}
		}
		if len(conj) == 0 {
			return ""
		}
		return " WHERE " + strings.Join(conj, " AND ")
	}
	var out []string
	switch op {
	case sqlcheck.OpSelect:
		list := strings.Join(quoteAll(cols), ", ")
		if list == "" {
			list = "1"
		}
		out = append(out, "SELECT "+list+" FROM "+t.Name.String()+where(r0), "SELECT "+list+" FROM "+t.Name.String()+where(r1))
	case sqlcheck.OpUpdate, sqlcheck.OpInsert:
		if len(cols) == 0 {
			return nil
		}
		var vals []any
		if x != nil {
			vals = constants(x.Node)
		}
		for i, src := range []Row{r0, r1} {
			var sets, names, lits []string
			for j, c := range cols {
				v := src[c]
				k := kindOf(columnType(t, c))
				// A constant of the expression that fits the column, so the
				// statement exercises the check.
				var fit []any
				for _, cv := range vals {
					if x, err := castTo(cv, k); err == nil && x != nil {
						fit = append(fit, x)
					}
				}
				if len(fit) > 0 {
					v = fit[(i+j)%len(fit)]
				}
				lit := "NULL"
				if v != nil {
					lit = sqlLiteral(v)
				}
				sets = append(sets, sqlcheck.QuoteIdent(c)+" = "+lit)
				names = append(names, sqlcheck.QuoteIdent(c))
				lits = append(lits, lit)
			}
			if op == sqlcheck.OpUpdate {
				out = append(out, "UPDATE "+t.Name.String()+" SET "+strings.Join(sets, ", ")+where(src))
			} else {
				out = append(out, "INSERT INTO "+t.Name.String()+" ("+strings.Join(names, ", ")+") VALUES ("+strings.Join(lits, ", ")+")")
			}
		}
	case sqlcheck.OpDelete:
		out = append(out, "DELETE FROM "+t.Name.String()+where(r0), "DELETE FROM "+t.Name.String()+where(r1))
	}
	if len(out) > 0 {
		out = append(out, "/* ticket: OPS-1 */ "+out[0])
	}
	return out
}

func columnType(t *sqlcheck.Table, col string) string {
	for _, c := range t.Columns {
		if c.Name == col {
			return c.Type
		}
	}
	return ""
}

func quoteAll(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = sqlcheck.QuoteIdent(c)
	}
	return out
}

// effect evaluates a parsed statement on sample rows: the indexes of the
// rows its WHERE reaches (every row for an insert's single new row), and
// the post-images of an update or insert.
func effect(ev *Evaluator, stmt *pg.Node, rows []Row) ([]int, []Row, error) {
	var where *pg.Node
	var sets []*pg.Node
	switch s := stmt.Node.(type) {
	case *pg.Node_SelectStmt:
		where = s.SelectStmt.WhereClause
	case *pg.Node_DeleteStmt:
		where = s.DeleteStmt.WhereClause
	case *pg.Node_UpdateStmt:
		where, sets = s.UpdateStmt.WhereClause, s.UpdateStmt.TargetList
	case *pg.Node_InsertStmt:
		sel := s.InsertStmt.SelectStmt.GetSelectStmt()
		if sel == nil || len(sel.ValuesLists) != 1 {
			return nil, nil, evalErr("an insert without one VALUES row")
		}
		vals := sel.ValuesLists[0].GetList().GetItems()
		if len(vals) != len(s.InsertStmt.Cols) {
			return nil, nil, evalErr("an insert whose columns and values differ in number")
		}
		post := Row{}
		for k, v := range rows[0] {
			post[k] = v
		}
		for i, c := range s.InsertStmt.Cols {
			v, err := ev.eval(vals[i], rows[0])
			if err != nil {
				return nil, nil, err
			}
			name := c.GetResTarget().GetName()
			if k, ok := ev.Types[name]; ok {
				if v, err = castTo(v, k); err != nil {
					return nil, nil, err
				}
			}
			post[name] = v
		}
		return []int{0}, []Row{post}, nil
	default:
		return nil, nil, evalErr("statement kind %T", stmt.Node)
	}
	var reached []int
	var post []Row
	for i, r := range rows {
		if where != nil {
			ok, err := ev.Passes(where, r)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				continue
			}
		}
		reached = append(reached, i)
		if len(sets) > 0 {
			p := copyRow(r)
			for _, st := range sets {
				rt := st.GetResTarget()
				v, err := ev.eval(rt.Val, r)
				if err != nil {
					return nil, nil, err
				}
				if k, ok := ev.Types[rt.Name]; ok {
					if v, err = castTo(v, k); err != nil {
						return nil, nil, err
					}
				}
				p[rt.Name] = v
			}
			post = append(post, p)
		}
	}
	return reached, post, nil
}
