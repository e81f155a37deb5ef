package cover

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Row is one sample row: column name to value. A value is nil (NULL),
// bool, int64, float64, string, time.Time or time.Duration (an interval).
type Row map[string]any

// unknown is an untyped string literal ('5'), coerced to the type of what
// it meets, as PostgreSQL does.
type unknown string

// errEval marks an expression the evaluator cannot evaluate; the gates
// fail closed on it.
var errEval = errors.New("cannot evaluate")

func evalErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errEval, fmt.Sprintf(format, args...))
}

// Evaluator evaluates fences and checks (the expressions CompileExpr
// accepts) on sample rows, without a database. It knows a subset of
// PostgreSQL: comparisons, boolean logic with NULL, IN, BETWEEN, LIKE, IS
// [NOT] NULL, IS [NOT] TRUE/FALSE, arithmetic, casts to the common types,
// coalesce, nullif, lower, upper, length, now() and the current-time
// keywords. Anything else is an error: a check the gates cannot evaluate is
// not admitted.
type Evaluator struct {
	// Now is the server time now() reads.
	Now time.Time
	// Types gives a column's kind (see kindOf), for typing NULLs and
	// literals; missing columns are an error.
	Types map[string]string
}

// Truth evaluates a boolean expression: true, false, or nil for NULL.
func (ev *Evaluator) Truth(n *pg.Node, r Row) (any, error) {
	v, err := ev.eval(n, r)
	if err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return t, nil
	case unknown:
		return toBool(string(t))
	}
	return nil, evalErr("the expression is not boolean (%T)", v)
}

// Passes is Truth as a row filter: only true passes (NULL does not).
func (ev *Evaluator) Passes(n *pg.Node, r Row) (bool, error) {
	v, err := ev.Truth(n, r)
	if err != nil {
		return false, err
	}
	return v == true, nil
}

func (ev *Evaluator) eval(n *pg.Node, r Row) (any, error) {
	if n == nil {
		return nil, evalErr("empty expression")
	}
	switch x := n.Node.(type) {
	case *pg.Node_AConst:
		c := x.AConst
		if c.Isnull {
			return nil, nil
		}
		switch v := c.Val.(type) {
		case *pg.A_Const_Ival:
			return int64(v.Ival.Ival), nil
		case *pg.A_Const_Fval:
			f, err := strconv.ParseFloat(v.Fval.Fval, 64)
			if err != nil {
				return nil, evalErr("numeric literal %s", v.Fval.Fval)
			}
			return f, nil
		case *pg.A_Const_Sval:
			return unknown(v.Sval.Sval), nil
		case *pg.A_Const_Boolval:
			return v.Boolval.Boolval, nil
		}
		return nil, evalErr("literal of an unknown kind")
	case *pg.Node_ColumnRef:
		f := x.ColumnRef.Fields
		if len(f) == 0 {
			return nil, evalErr("empty column reference")
		}
		s := f[len(f)-1].GetString_()
		if s == nil {
			return nil, evalErr("whole-row reference")
		}
		v, ok := r[s.Sval]
		if !ok {
			return nil, evalErr("the row has no field %s", s.Sval)
		}
		return v, nil
	case *pg.Node_TypeCast:
		v, err := ev.eval(x.TypeCast.Arg, r)
		if err != nil {
			return nil, err
		}
		tn := typeName(x.TypeCast.TypeName)
		v, err = castTo(v, kindOf(tn))
		if t, ok := v.(time.Time); ok && err == nil && tn == "date" {
			// A date is the day in the session's time zone, which the
			// Pilot pins to UTC (internal/pilot pinSelect): the gates
			// take the same.
			y, m, d := t.UTC().Date()
			v = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		}
		return v, err
	case *pg.Node_BoolExpr:
		return ev.boolExpr(x.BoolExpr, r)
	case *pg.Node_NullTest:
		v, err := ev.eval(x.NullTest.Arg, r)
		if err != nil {
			return nil, err
		}
		if x.NullTest.Nulltesttype == pg.NullTestType_IS_NULL {
			return v == nil, nil
		}
		return v != nil, nil
	case *pg.Node_BooleanTest:
		v, err := ev.Truth(x.BooleanTest.Arg, r)
		if err != nil {
			return nil, err
		}
		switch x.BooleanTest.Booltesttype {
		case pg.BoolTestType_IS_TRUE:
			return v == true, nil
		case pg.BoolTestType_IS_NOT_TRUE:
			return v != true, nil
		case pg.BoolTestType_IS_FALSE:
			return v == false, nil
		case pg.BoolTestType_IS_NOT_FALSE:
			return v != false, nil
		case pg.BoolTestType_IS_UNKNOWN:
			return v == nil, nil
		case pg.BoolTestType_IS_NOT_UNKNOWN:
			return v != nil, nil
		}
	case *pg.Node_AExpr:
		return ev.aExpr(x.AExpr, r)
	case *pg.Node_CoalesceExpr:
		for _, a := range x.CoalesceExpr.Args {
			v, err := ev.eval(a, r)
			if err != nil {
				return nil, err
			}
			if v != nil {
				return v, nil
			}
		}
		return nil, nil
	case *pg.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N,
			pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
			return ev.Now, nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:
			y, m, d := ev.Now.UTC().Date()
			return time.Date(y, m, d, 0, 0, 0, 0, time.UTC), nil
		}
	case *pg.Node_FuncCall:
		return ev.funcCall(x.FuncCall, r)
	}
	return nil, evalErr("unsupported expression node %T", n.Node)
}

func (ev *Evaluator) boolExpr(b *pg.BoolExpr, r Row) (any, error) {
	switch b.Boolop {
	case pg.BoolExprType_NOT_EXPR:
		if len(b.Args) != 1 {
			return nil, evalErr("NOT with %d arguments", len(b.Args))
		}
		v, err := ev.Truth(b.Args[0], r)
		if err != nil || v == nil {
			return nil, err
		}
		return !v.(bool), nil
	case pg.BoolExprType_AND_EXPR, pg.BoolExprType_OR_EXPR:
		and := b.Boolop == pg.BoolExprType_AND_EXPR
		sawNull := false
		for _, a := range b.Args {
			v, err := ev.Truth(a, r)
			if err != nil {
				return nil, err
			}
			if v == nil {
				sawNull = true
				continue
			}
			if v.(bool) != and {
				return !and, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return and, nil
	}
	return nil, evalErr("unknown boolean operator")
}

func opName(names []*pg.Node) string {
	if len(names) == 0 {
		return ""
	}
	if s := names[len(names)-1].GetString_(); s != nil {
		return s.Sval
	}
	return ""
}

func (ev *Evaluator) aExpr(a *pg.A_Expr, r Row) (any, error) {
	op := opName(a.Name)
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.Lexpr == nil {
			v, err := ev.eval(a.Rexpr, r)
			if err != nil || v == nil {
				return nil, err
			}
			if op == "-" {
				return arith("*", int64(-1), v)
			}
			if op == "+" {
				return v, nil
			}
			return nil, evalErr("prefix operator %s", op)
		}
		l, err := ev.eval(a.Lexpr, r)
		if err != nil {
			return nil, err
		}
		rv, err := ev.eval(a.Rexpr, r)
		if err != nil {
			return nil, err
		}
		return binary(op, l, rv)
	case pg.A_Expr_Kind_AEXPR_IN:
		l, err := ev.eval(a.Lexpr, r)
		if err != nil {
			return nil, err
		}
		list := a.Rexpr.GetList()
		if list == nil {
			return nil, evalErr("IN without a list")
		}
		sawNull, found := false, false
		for _, item := range list.Items {
			v, err := ev.eval(item, r)
			if err != nil {
				return nil, err
			}
			eq, err := binary("=", l, v)
			if err != nil {
				return nil, err
			}
			if eq == nil {
				sawNull = true
			} else if eq == true {
				found = true
			}
		}
		res := any(found)
		if !found && sawNull {
			res = nil
		}
		if op == "<>" && res != nil {
			res = !found
		}
		return res, nil
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		l, err := ev.eval(a.Lexpr, r)
		if err != nil {
			return nil, err
		}
		p, err := ev.eval(a.Rexpr, r)
		if err != nil || l == nil || p == nil {
			return nil, err
		}
		ls, ps := textOf(l), textOf(p)
		insensitive := strings.HasSuffix(op, "*")
		m, err := likeMatch(ls, ps, insensitive)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(op, "!") {
			return !m, nil
		}
		return m, nil
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		l, err := ev.eval(a.Lexpr, r)
		if err != nil {
			return nil, err
		}
		list := a.Rexpr.GetList()
		if list == nil || len(list.Items) != 2 {
			return nil, evalErr("BETWEEN without two bounds")
		}
		lo, err := ev.eval(list.Items[0], r)
		if err != nil {
			return nil, err
		}
		hi, err := ev.eval(list.Items[1], r)
		if err != nil {
			return nil, err
		}
		ge, err := binary(">=", l, lo)
		if err != nil {
			return nil, err
		}
		le, err := binary("<=", l, hi)
		if err != nil {
			return nil, err
		}
		v, err := ev.boolValues(true, ge, le)
		if err != nil || v == nil || a.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN {
			return v, err
		}
		return !v.(bool), nil
	case pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		l, err := ev.eval(a.Lexpr, r)
		if err != nil {
			return nil, err
		}
		rv, err := ev.eval(a.Rexpr, r)
		if err != nil {
			return nil, err
		}
		var same bool
		switch {
		case l == nil || rv == nil:
			same = l == nil && rv == nil
		default:
			eq, err := binary("=", l, rv)
			if err != nil {
				return nil, err
			}
			same = eq == true
		}
		if a.Kind == pg.A_Expr_Kind_AEXPR_DISTINCT {
			return !same, nil
		}
		return same, nil
	case pg.A_Expr_Kind_AEXPR_NULLIF:
		l, err := ev.eval(a.Lexpr, r)
		if err != nil {
			return nil, err
		}
		rv, err := ev.eval(a.Rexpr, r)
		if err != nil {
			return nil, err
		}
		eq, err := binary("=", l, rv)
		if err != nil {
			return nil, err
		}
		if eq == true {
			return nil, nil
		}
		return l, nil
	}
	return nil, evalErr("unsupported operator kind %s", a.Kind)
}

func (ev *Evaluator) boolValues(and bool, vs ...any) (any, error) {
	sawNull := false
	for _, v := range vs {
		if v == nil {
			sawNull = true
			continue
		}
		if v.(bool) != and {
			return !and, nil
		}
	}
	if sawNull {
		return nil, nil
	}
	return and, nil
}

func (ev *Evaluator) funcCall(f *pg.FuncCall, r Row) (any, error) {
	name := opName(f.Funcname)
	var args []any
	for _, a := range f.Args {
		v, err := ev.eval(a, r)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	switch {
	case (name == "now" || name == "statement_timestamp" || name == "transaction_timestamp") && len(args) == 0:
		return ev.Now, nil
	case (name == "lower" || name == "upper" || name == "btrim" || name == "trim") && len(args) == 1:
		if args[0] == nil {
			return nil, nil
		}
		s := textOf(args[0])
		switch name {
		case "lower":
			return strings.ToLower(s), nil
		case "upper":
			return strings.ToUpper(s), nil
		}
		return strings.TrimSpace(s), nil
	case (name == "length" || name == "char_length") && len(args) == 1:
		if args[0] == nil {
			return nil, nil
		}
		return int64(len([]rune(textOf(args[0])))), nil
	case name == "abs" && len(args) == 1:
		switch v := args[0].(type) {
		case nil:
			return nil, nil
		case int64:
			if v < 0 {
				return -v, nil
			}
			return v, nil
		case float64:
			return math.Abs(v), nil
		}
	}
	return nil, evalErr("function %s/%d", name, len(args))
}

// binary applies a comparison or arithmetic operator with NULL semantics
// and unknown-literal coercion.
func binary(op string, l, r any) (any, error) {
	if l == nil || r == nil {
		return nil, nil
	}
	var err error
	l, r, err = unify(l, r)
	if err != nil {
		return nil, err
	}
	switch op {
	case "=", "<>", "!=", "<", "<=", ">", ">=":
		c, err := compare(l, r)
		if err != nil {
			return nil, err
		}
		switch op {
		case "=":
			return c == 0, nil
		case "<>", "!=":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		}
		return c >= 0, nil
	case "||":
		return textOf(l) + textOf(r), nil
	}
	return arith(op, l, r)
}

func arith(op string, l, r any) (any, error) {
	switch a := l.(type) {
	case int64:
		if b, ok := r.(int64); ok {
			if op == "%" {
				if b == 0 {
					return nil, evalErr("division by zero")
				}
				return a % b, nil
			}
			if v, done, err := numArith(op, a, b); done {
				return v, err
			}
		}
		if d, ok := r.(time.Duration); ok && op == "*" {
			return time.Duration(a) * d, nil
		}
	case float64:
		if b, ok := r.(float64); ok {
			if v, done, err := numArith(op, a, b); done {
				return v, err
			}
		}
	case time.Time:
		if d, ok := r.(time.Duration); ok {
			switch op {
			case "+":
				return a.Add(d), nil
			case "-":
				return a.Add(-d), nil
			}
		}
		if b, ok := r.(time.Time); ok && op == "-" {
			return a.Sub(b), nil
		}
	case time.Duration:
		if b, ok := r.(time.Duration); ok {
			switch op {
			case "+":
				return a + b, nil
			case "-":
				return a - b, nil
			}
		}
		if b, ok := r.(time.Time); ok && op == "+" {
			return b.Add(a), nil
		}
		if b, ok := r.(int64); ok && op == "*" {
			return a * time.Duration(b), nil
		}
	}
	return nil, evalErr("operator %s on %T and %T", op, l, r)
}

// numArith is + - * / on two numbers of one type; done is false for any
// other operator.
func numArith[T int64 | float64](op string, a, b T) (v any, done bool, err error) {
	switch op {
	case "+":
		return a + b, true, nil
	case "-":
		return a - b, true, nil
	case "*":
		return a * b, true, nil
	case "/":
		if b == 0 {
			return nil, true, evalErr("division by zero")
		}
		return a / b, true, nil
	}
	return nil, false, nil
}

// unify coerces an unknown literal to the other side's type and widens
// int to float.
func unify(l, r any) (any, any, error) {
	var err error
	if u, ok := l.(unknown); ok {
		if _, rok := r.(unknown); rok {
			return string(u), string(r.(unknown)), nil
		}
		if l, err = castTo(u, kindOfValue(r)); err != nil {
			return nil, nil, err
		}
	}
	if u, ok := r.(unknown); ok {
		if r, err = castTo(u, kindOfValue(l)); err != nil {
			return nil, nil, err
		}
	}
	if a, ok := l.(int64); ok {
		if _, ok := r.(float64); ok {
			l = float64(a)
		}
	}
	if b, ok := r.(int64); ok {
		if _, ok := l.(float64); ok {
			r = float64(b)
		}
	}
	return l, r, nil
}

func compare(l, r any) (int, error) {
	switch a := l.(type) {
	case int64:
		if b, ok := r.(int64); ok {
			return cmp3(a < b, a > b), nil
		}
	case float64:
		if b, ok := r.(float64); ok {
			return cmp3(a < b, a > b), nil
		}
	case string:
		if b, ok := r.(string); ok {
			return strings.Compare(a, b), nil
		}
	case bool:
		if b, ok := r.(bool); ok {
			return cmp3(!a && b, a && !b), nil
		}
	case time.Time:
		if b, ok := r.(time.Time); ok {
			return a.Compare(b), nil
		}
	case time.Duration:
		if b, ok := r.(time.Duration); ok {
			return cmp3(a < b, a > b), nil
		}
	}
	return 0, evalErr("cannot compare %T with %T", l, r)
}

func cmp3(lt, gt bool) int {
	switch {
	case lt:
		return -1
	case gt:
		return 1
	}
	return 0
}

// Value kinds.
const (
	kindInt      = "int"
	kindFloat    = "float"
	kindBool     = "bool"
	kindText     = "text"
	kindTime     = "time"
	kindInterval = "interval"
)

// kindOf maps a PostgreSQL type name (as format_type or a cast writes it)
// to a value kind; unknown types are text.
func kindOf(typ string) string {
	t := strings.ToLower(strings.TrimSpace(typ))
	if i := strings.IndexByte(t, '('); i >= 0 {
		t = strings.TrimSpace(t[:i])
	}
	switch t {
	case "smallint", "integer", "bigint", "int", "int2", "int4", "int8", "serial", "bigserial", "smallserial":
		return kindInt
	case "numeric", "decimal", "real", "double precision", "float4", "float8", "money":
		return kindFloat
	case "boolean", "bool":
		return kindBool
	case "timestamp", "timestamptz", "timestamp with time zone", "timestamp without time zone", "date":
		return kindTime
	case "interval":
		return kindInterval
	}
	return kindText
}

func kindOfValue(v any) string {
	switch v.(type) {
	case int64:
		return kindInt
	case float64:
		return kindFloat
	case bool:
		return kindBool
	case time.Time:
		return kindTime
	case time.Duration:
		return kindInterval
	}
	return kindText
}

func typeName(tn *pg.TypeName) string {
	if tn == nil || len(tn.Names) == 0 {
		return ""
	}
	return opName(tn.Names)
}

// castTo converts v to kind; text from any value; anything from text.
func castTo(v any, kind string) (any, error) {
	if v == nil {
		return nil, nil
	}
	if kindOfValue(v) == kind {
		if u, ok := v.(unknown); ok {
			return string(u), nil
		}
		return v, nil
	}
	if kind == kindText {
		return textOf(v), nil
	}
	s, isText := "", false
	switch t := v.(type) {
	case unknown:
		s, isText = string(t), true
	case string:
		s, isText = t, true
	}
	switch kind {
	case kindFloat:
		if i, ok := v.(int64); ok {
			return float64(i), nil
		}
	case kindInt:
		if f, ok := v.(float64); ok {
			return int64(math.Round(f)), nil
		}
	}
	if !isText {
		return nil, evalErr("cannot cast %T to %s", v, kind)
	}
	return ParseValue(s, kind)
}

// ParseValue reads a value of kind from its PostgreSQL text form.
func ParseValue(s, kind string) (any, error) {
	s = strings.TrimSpace(s)
	switch kind {
	case kindInt:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, evalErr("%q is not an integer", s)
		}
		return i, nil
	case kindFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, evalErr("%q is not a number", s)
		}
		return f, nil
	case kindBool:
		return toBool(s)
	case kindTime:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC(), nil
			}
		}
		return nil, evalErr("%q is not a timestamp", s)
	case kindInterval:
		return parseInterval(s)
	}
	return s, nil
}

func toBool(s string) (any, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "t", "true", "y", "yes", "on", "1":
		return true, nil
	case "f", "false", "n", "no", "off", "0":
		return false, nil
	}
	return nil, evalErr("%q is not a boolean", s)
}

var intervalPart = regexp.MustCompile(`^(-?[0-9]+(?:\.[0-9]+)?)\s*([a-z]+)$`)

// parseInterval reads "1 day", "2 hours 30 minutes", "3 days 04:00:00"
// (a month is 30 days, a year 365).
func parseInterval(s string) (any, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	var total time.Duration
	fields := strings.Fields(s)
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Count(f, ":") == 2 {
			var h, m int
			var sec float64
			if _, err := fmt.Sscanf(f, "%d:%d:%f", &h, &m, &sec); err != nil {
				return nil, evalErr("interval %q", s)
			}
			total += time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec*float64(time.Second))
			continue
		}
		part := f
		if i+1 < len(fields) {
			part = f + " " + fields[i+1]
			i++
		}
		m := intervalPart.FindStringSubmatch(part)
		if m == nil {
			return nil, evalErr("interval %q", s)
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		unit := strings.TrimSuffix(m[2], "s")
		var d time.Duration
		switch unit {
		case "second", "sec":
			d = time.Second
		case "minute", "min":
			d = time.Minute
		case "hour":
			d = time.Hour
		case "day":
			d = 24 * time.Hour
		case "week":
			d = 7 * 24 * time.Hour
		case "month", "mon":
			d = 30 * 24 * time.Hour
		case "year":
			d = 365 * 24 * time.Hour
		default:
			return nil, evalErr("interval unit %q", m[2])
		}
		total += time.Duration(n * float64(d))
	}
	return total, nil
}

func textOf(v any) string {
	switch t := v.(type) {
	case unknown:
		return string(t)
	case string:
		return t
	case bool:
		if t {
			return "true"
		}
		return "false"
	case time.Time:
		return t.UTC().Format("2006-01-02 15:04:05Z07:00")
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// likeMatch implements LIKE with % and _ and backslash escapes.
func likeMatch(s, pattern string, insensitive bool) (bool, error) {
	var b strings.Builder
	if insensitive {
		b.WriteString("(?is)^")
	} else {
		b.WriteString("(?s)^")
	}
	esc := false
	for _, c := range pattern {
		switch {
		case esc:
			b.WriteString(regexp.QuoteMeta(string(c)))
			esc = false
		case c == '\\':
			esc = true
		case c == '%':
			b.WriteString(".*")
		case c == '_':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return false, evalErr("LIKE pattern %q", pattern)
	}
	return re.MatchString(s), nil
}
