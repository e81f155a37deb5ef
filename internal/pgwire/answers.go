package pgwire

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Session queries answered at the front. Clients send them on connect and
// on every pool checkout: SELECT version(), SELECT current_schema(),
// SELECT 1. Each is answered from what the session knows (the front's
// version, the principal, the target's name, the search path the Pilot
// pins, the front's clock), never from the target, so two targets that
// differ only outside the agent's bound give the same answers (DESIGN.md
// invariant 10).
//
// What is answered is decided on the parse tree, never on the text: a
// SELECT with no FROM (or FROM one answered function, as TypeORM sends
// SELECT * FROM current_schema()), no clause but its select list, and a
// select list of constants, casts of them to a few built-in types, and
// the functions of frontFuncs, and +, - and * between integers. Any
// other function or operator, a subquery, a column: the statement is not
// answered here, and takes the statement path as before. Constants are converted with PostgreSQL's
// own rules (types, column names, input syntax, ranges); what the front
// cannot convert exactly (a float, a typmod, an array literal) is not
// answered either.

// oids of the types only answers use.
const (
	oidName      = 19
	oidNameArray = 1003
	oidVoid      = 2278
	oidUnknownIn = 705 // an untyped string literal, before it is resolved
)

// value is one typed value of an answer: its text form, or NULL.
type value struct {
	oid  uint32
	null bool
	text string
}

// frontEnv is what an answer reads: the session's facts and the time.
// Nil when only deciding whether a statement is answered.
type frontEnv struct {
	facts sessionFacts
	now   time.Time
	sql   string // the statement's text, to read a number as written
}

// frontFunc is a function the front answers.
type frontFunc struct {
	oid   uint32
	nargs int
	eval  func(env *frontEnv, args []value) value
}

// versionText is what version() answers.
func versionText(v string) string { return "PostgreSQL " + v + " (Harbormaster wire front)" }

// frontFuncs are the functions answered at the front, by name (the
// pg_catalog qualification is optional): session values that reveal
// nothing about the target.
//
// now() is among them: it is the statement's start (the implicit
// transaction's), a session value, here the front's clock in UTC; the
// target's clock never reaches the agent. Any other function, even one
// without effects (current_setting, pg_sleep, random), is not answered.
var frontFuncs = map[string]frontFunc{
	"version": {oidText, 0, func(env *frontEnv, _ []value) value {
		return value{oid: oidText, text: versionText(env.facts.version)}
	}},
	"current_database": {oidName, 0, func(env *frontEnv, _ []value) value {
		return value{oid: oidName, text: env.facts.target}
	}},
	"current_schema": {oidName, 0, func(env *frontEnv, _ []value) value {
		if p := schemas(env.facts.searchPath, false); len(p) > 0 {
			return value{oid: oidName, text: p[0]}
		}
		return value{oid: oidName, null: true}
	}},
	"current_schemas": {oidNameArray, 1, func(env *frontEnv, args []value) value {
		if args[0].null {
			return value{oid: oidNameArray, null: true}
		}
		l := []any{}
		for _, s := range schemas(env.facts.searchPath, args[0].text == "t") {
			l = append(l, s)
		}
		return value{oid: oidNameArray, text: arrayText(oidName, l)}
	}},
	"now": {oidTimestamptz, 0, func(env *frontEnv, _ []value) value {
		return value{oid: oidTimestamptz, text: timeText(oidTimestamptz, env.now.UTC().Truncate(time.Microsecond))}
	}},
	// The front's sessions hold no advisory lock: a statement's locks
	// are its Pilot transaction's, released when it ends. Pool resets
	// send it (asyncpg).
	"pg_advisory_unlock_all": {oidVoid, 0, func(*frontEnv, []value) value { return value{oid: oidVoid} }},
}

// schemas are the search path's schemas as current_schemas reports them:
// with pg_catalog first when implicit ones are asked for and it is not
// named; "$user" left out (the agent has no schema of its own).
func schemas(path []string, implicit bool) []string {
	var out []string
	if implicit && !slices.Contains(path, "pg_catalog") {
		out = append(out, "pg_catalog")
	}
	for _, s := range path {
		if s != "$user" {
			out = append(out, s)
		}
	}
	return out
}

// sqlValueFuncs are the keyword functions answered at the front
// (current_user, CURRENT_TIMESTAMP without a precision, ...), as the
// function each is, and their column name.
var sqlValueFuncs = map[pg.SQLValueFunctionOp]struct {
	name string
	fn   func(env *frontEnv) value
}{
	pg.SQLValueFunctionOp_SVFOP_CURRENT_USER:    {"current_user", principalValue},
	pg.SQLValueFunctionOp_SVFOP_SESSION_USER:    {"session_user", principalValue},
	pg.SQLValueFunctionOp_SVFOP_USER:            {"user", principalValue},
	pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:    {"current_role", principalValue},
	pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG: {"current_catalog", func(env *frontEnv) value { return frontFuncs["current_database"].eval(env, nil) }},
	pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:  {"current_schema", func(env *frontEnv) value { return frontFuncs["current_schema"].eval(env, nil) }},
	pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP: {"current_timestamp", func(env *frontEnv) value {
		return frontFuncs["now"].eval(env, nil)
	}},
}

func principalValue(env *frontEnv) value { return value{oid: oidName, text: env.facts.principal} }

// castTypes are the types a constant may be cast to in an answered
// SELECT, by pg_catalog name.
var castTypes = map[string]uint32{"text": oidText, "varchar": oidVarchar, "name": oidName, "bool": oidBool,
	"int2": oidInt2, "int4": oidInt4, "int8": oidInt8, "numeric": oidNumeric}

// errNotAnswered: the statement is not one the front answers.
var errNotAnswered = &wireError{Code: stateFeature, Message: "not answered at the front"}

// frontSelect answers a SELECT the front answers, or returns
// errNotAnswered. With env nil it only decides (no value is right, but
// whether there is an answer, or an error such as a bad constant, is).
func frontSelect(sel *pg.SelectStmt, env *frontEnv) (*result, *wireError) {
	if sel == nil || sel.Op != pg.SetOperation_SETOP_NONE || sel.IntoClause != nil || sel.WhereClause != nil ||
		len(sel.GroupClause) > 0 || sel.HavingClause != nil || len(sel.WindowClause) > 0 || len(sel.ValuesLists) > 0 ||
		len(sel.SortClause) > 0 || sel.LimitCount != nil || sel.LimitOffset != nil || len(sel.LockingClause) > 0 ||
		sel.WithClause != nil || len(sel.DistinctClause) > 0 || sel.GroupDistinct || len(sel.TargetList) == 0 {
		return nil, errNotAnswered
	}
	if env == nil {
		env = &frontEnv{}
	}
	switch len(sel.FromClause) {
	case 0:
	case 1:
		return fromFunction(sel, env)
	default:
		return nil, errNotAnswered
	}
	res := &result{hasRows: true, tag: "SELECT 1"}
	row := make([]any, 0, len(sel.TargetList))
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil || len(rt.Indirection) > 0 {
			return nil, errNotAnswered
		}
		v, name, _, werr := evalExpr(rt.Val, env)
		if werr != nil {
			return nil, werr
		}
		if v.oid == oidUnknownIn {
			// An untyped literal in a select list is text (PostgreSQL 10+).
			v.oid = oidText
		}
		if rt.Name != "" {
			name = rt.Name
		}
		res.cols = append(res.cols, column{name, v.oid})
		if v.null {
			row = append(row, nil)
		} else {
			row = append(row, v.text)
		}
	}
	res.rows = [][]any{row}
	return res, nil
}

// fromFunction answers SELECT * FROM f() [AS alias] for an answered f: one
// row of one column, named after the alias or the function.
func fromFunction(sel *pg.SelectStmt, env *frontEnv) (*result, *wireError) {
	rf := sel.FromClause[0].GetRangeFunction()
	if rf == nil || rf.Lateral || rf.Ordinality || rf.IsRowsfrom || len(rf.Coldeflist) > 0 || len(rf.Functions) != 1 || len(sel.TargetList) != 1 {
		return nil, errNotAnswered
	}
	rt := sel.TargetList[0].GetResTarget()
	cr := rt.GetVal().GetColumnRef()
	if rt.Name != "" || len(rt.Indirection) > 0 || cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetAStar() == nil {
		return nil, errNotAnswered
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 || items[0].GetFuncCall() == nil || len(items) > 1 && items[1].GetNode() != nil {
		return nil, errNotAnswered
	}
	v, name, _, werr := evalExpr(items[0], env)
	if werr != nil {
		return nil, werr
	}
	if a := rf.Alias; a != nil {
		name = a.Aliasname
		if len(a.Colnames) > 1 {
			return nil, errNotAnswered
		}
		if len(a.Colnames) == 1 {
			name = a.Colnames[0].GetString_().GetSval()
		}
	}
	var cell any
	if !v.null {
		cell = v.text
	}
	return &result{hasRows: true, tag: "SELECT 1", cols: []column{{name, v.oid}}, rows: [][]any{{cell}}}, nil
}

// evalExpr evaluates one expression of an answered select list: its value,
// the column name PostgreSQL gives it (FigureColname) and that name's
// strength (0: none, 1: a cast's type, 2: a function's name).
func evalExpr(n *pg.Node, env *frontEnv) (value, string, int, *wireError) {
	switch x := n.GetNode().(type) {
	case *pg.Node_AConst:
		v, werr := constValue(x.AConst, env)
		return v, "?column?", 0, werr
	case *pg.Node_TypeCast:
		tc := x.TypeCast
		to, ok := castType(tc.TypeName)
		if !ok {
			return value{}, "", 0, errNotAnswered
		}
		v, name, strength, werr := evalExpr(tc.Arg, env)
		if werr != nil {
			return value{}, "", 0, werr
		}
		if strength <= 1 {
			names := tc.TypeName.Names
			name, strength = names[len(names)-1].GetString_().GetSval(), 1
		}
		v, werr = convert(v, to)
		return v, name, strength, werr
	case *pg.Node_FuncCall:
		f := x.FuncCall
		name, ok := funcName(f.Funcname)
		fn, known := frontFuncs[name]
		if !ok || !known || len(f.Args) != fn.nargs || len(f.AggOrder) > 0 || f.AggFilter != nil || f.Over != nil ||
			f.AggWithinGroup || f.AggStar || f.AggDistinct || f.FuncVariadic {
			return value{}, "", 0, errNotAnswered
		}
		args := make([]value, len(f.Args))
		for i, a := range f.Args {
			v, _, _, werr := evalExpr(a, env)
			if werr != nil {
				return value{}, "", 0, werr
			}
			// current_schemas(boolean) is the only one with an argument.
			if v, werr = convert(v, oidBool); werr != nil {
				return value{}, "", 0, werr
			}
			args[i] = v
		}
		return fn.eval(env, args), name, 2, nil
	case *pg.Node_AExpr:
		v, werr := arith(x.AExpr, env)
		return v, "?column?", 0, werr
	case *pg.Node_SqlvalueFunction:
		svf, ok := sqlValueFuncs[x.SqlvalueFunction.Op]
		if !ok || x.SqlvalueFunction.Typmod != -1 {
			return value{}, "", 0, errNotAnswered
		}
		return svf.fn(env), svf.name, 2, nil
	}
	return value{}, "", 0, errNotAnswered
}

// arith answers +, - and * between integers (SELECT 1+1 AS result, what
// Sequelize checks a connection with): the result has the wider type of
// the two, and out of its range is PostgreSQL's error. Any other operator,
// or an operand of another type, is not answered.
func arith(e *pg.A_Expr, env *frontEnv) (value, *wireError) {
	op, ok := funcName(e.Name)
	if e.Kind != pg.A_Expr_Kind_AEXPR_OP || !ok || op != "+" && op != "-" && op != "*" || e.Lexpr == nil || e.Rexpr == nil {
		return value{}, errNotAnswered
	}
	var vals [2]value
	for i, n := range []*pg.Node{e.Lexpr, e.Rexpr} {
		v, _, _, werr := evalExpr(n, env)
		if werr != nil {
			return value{}, werr
		}
		if intRanges[v.oid].name == "" {
			return value{}, errNotAnswered
		}
		vals[i] = v
	}
	to := vals[0].oid
	if intRanges[vals[1].oid].max > intRanges[to].max {
		to = vals[1].oid
	}
	if vals[0].null || vals[1].null {
		return value{oid: to, null: true}, nil
	}
	a, _ := new(big.Int).SetString(vals[0].text, 10)
	b, _ := new(big.Int).SetString(vals[1].text, 10)
	switch op {
	case "+":
		a.Add(a, b)
	case "-":
		a.Sub(a, b)
	default:
		a.Mul(a, b)
	}
	r := intRanges[to]
	if !a.IsInt64() || a.Int64() < r.min || a.Int64() > r.max {
		return value{}, errorf(stateOutOfRange, r.name+" out of range")
	}
	return value{oid: to, text: a.String()}, nil
}

// funcName is a function's name when it is unqualified or in pg_catalog.
func funcName(names []*pg.Node) (string, bool) {
	switch len(names) {
	case 1:
		return names[0].GetString_().GetSval(), true
	case 2:
		if names[0].GetString_().GetSval() == "pg_catalog" {
			return names[1].GetString_().GetSval(), true
		}
	}
	return "", false
}

// castType is the type of a cast the front converts constants to: a
// castTypes name, unqualified or in pg_catalog, without typmod or array
// bounds.
func castType(tn *pg.TypeName) (uint32, bool) {
	if tn == nil || len(tn.Typmods) > 0 || len(tn.ArrayBounds) > 0 || tn.Setof || tn.PctType {
		return 0, false
	}
	name, ok := funcName(tn.Names)
	if !ok {
		return 0, false
	}
	oid, ok := castTypes[name]
	return oid, ok
}

// intLiteral is how a PostgreSQL 15 integer literal is written: decimal
// digits (the parser also reads 0x1F and 1_000, which 15 refuses).
var intLiteral = regexp.MustCompile(`^[0-9]+$`)

// constValue is a constant's value with the type PostgreSQL gives it: an
// integer that fits int4 is int4, then int8, then numeric; a decimal is
// numeric; a string is untyped until a cast or the select list resolves
// it.
func constValue(k *pg.A_Const, env *frontEnv) (value, *wireError) {
	if k.Isnull {
		return value{oid: oidUnknownIn, null: true}, nil
	}
	switch v := k.Val.(type) {
	case *pg.A_Const_Sval:
		return value{oid: oidUnknownIn, text: v.Sval.Sval}, nil
	case *pg.A_Const_Boolval:
		if v.Boolval.Boolval {
			return value{oid: oidBool, text: "t"}, nil
		}
		return value{oid: oidBool, text: "f"}, nil
	case *pg.A_Const_Ival:
		if !writtenAsNumber(k.Location, env) {
			return value{}, errNotAnswered
		}
		return value{oid: oidInt4, text: strconv.FormatInt(int64(v.Ival.Ival), 10)}, nil
	case *pg.A_Const_Fval:
		if !writtenAsNumber(k.Location, env) {
			return value{}, errNotAnswered
		}
		f := v.Fval.Fval
		if n, err := strconv.ParseInt(f, 10, 64); err == nil {
			if n >= math.MinInt32 && n <= math.MaxInt32 {
				return value{oid: oidInt4, text: strconv.FormatInt(n, 10)}, nil
			}
			return value{oid: oidInt8, text: strconv.FormatInt(n, 10)}, nil
		}
		s, ok := numericText(f)
		if !ok {
			return value{}, errNotAnswered
		}
		return value{oid: oidNumeric, text: s}, nil
	}
	return value{}, errNotAnswered
}

// writtenAsNumber reports that the number at loc in the text is written
// as PostgreSQL 15 writes one (digits, a point, an exponent), not in the
// newer forms (0x1F, 1_000) the parser also reads. A constant from an
// inlined parameter has no location.
func writtenAsNumber(loc int32, env *frontEnv) bool {
	if loc < 0 || env.sql == "" || int(loc) >= len(env.sql) {
		return true
	}
	rest := env.sql[loc:]
	if rest[0] == '-' {
		rest = strings.TrimLeft(rest[1:], " \t\r\n")
	}
	end := 0
	for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || rest[end] == '.' || rest[end] == 'e' || rest[end] == 'E' ||
		rest[end] == '_' || rest[end] == 'x' || rest[end] == 'X' || rest[end] == 'o' || rest[end] == 'O' || rest[end] == 'b' || rest[end] == 'B' ||
		(end > 0 && (rest[end] == '+' || rest[end] == '-') && (rest[end-1] == 'e' || rest[end-1] == 'E'))) {
		end++
	}
	tok := rest[:end]
	return numericLiteral.MatchString(tok)
}

var (
	numericLiteral = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	signedInt      = regexp.MustCompile(`^[+-]?[0-9]+$`)
	specialNumeric = regexp.MustCompile(`(?i)^(nan|inf|infinity)$`)
)

// numericText is a decimal constant as numeric's output writes it: no
// exponent, no leading zeros, the scale as written (1.50 stays 1.50; 1e3
// is 1000, 1.5e-3 0.0015), no sign on zero.
func numericText(s string) (string, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1000 || e < -1000 {
			return "", false
		}
		mant, exp = s[:i], e
	}
	ip, fp, _ := strings.Cut(mant, ".")
	if !intLiteral.MatchString(ip+fp) || ip+fp == "" {
		return "", false
	}
	digits := ip + fp
	point := len(ip) + exp
	var whole, frac string
	switch {
	case point <= 0:
		whole, frac = "0", strings.Repeat("0", -point)+digits
	case point >= len(digits):
		whole = digits + strings.Repeat("0", point-len(digits))
	default:
		whole, frac = digits[:point], digits[point:]
	}
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg && strings.Trim(digits, "0") != "" {
		out = "-" + out
	}
	return out, true
}

// intRanges are the integer types' names in messages and their bounds.
var intRanges = map[uint32]struct {
	name     string
	min, max int64
}{
	oidInt2: {"smallint", math.MinInt16, math.MaxInt16},
	oidInt4: {"integer", math.MinInt32, math.MaxInt32},
	oidInt8: {"bigint", math.MinInt64, math.MaxInt64},
}

// convert casts a value to one of castTypes with PostgreSQL's rules: an
// untyped literal or a text is read by the type's input function; the
// others by the cast between the two types. A cast the front does not
// make is errNotAnswered.
func convert(v value, to uint32) (value, *wireError) {
	if v.oid == to {
		return v, nil
	}
	if v.null {
		return value{oid: to, null: true}, nil
	}
	from := v.oid
	textual := from == oidUnknownIn || from == oidText || from == oidVarchar || from == oidName
	switch {
	case to == oidText || to == oidVarchar:
		switch {
		case textual, from == oidNameArray, from == oidTimestamptz, from == oidNumeric, intRanges[from].name != "":
			return value{oid: to, text: v.text}, nil
		case from == oidBool:
			return value{oid: to, text: map[string]string{"t": "true", "f": "false"}[v.text]}, nil
		}
	case to == oidName:
		if textual {
			return value{oid: to, text: clipName(v.text)}, nil
		}
	case to == oidBool:
		switch {
		case textual:
			b, ok := parseBool(v.text)
			if !ok {
				return value{}, errorf(stateInvalidText, fmt.Sprintf("invalid input syntax for type boolean: %q", v.text))
			}
			return value{oid: to, text: b}, nil
		case from == oidInt4:
			if v.text == "0" {
				return value{oid: to, text: "f"}, nil
			}
			return value{oid: to, text: "t"}, nil
		}
	case intRanges[to].name != "":
		r := intRanges[to]
		var s string
		switch {
		case textual:
			s = strings.TrimSpace(v.text)
			if !signedInt.MatchString(s) {
				return value{}, errorf(stateInvalidText, fmt.Sprintf("invalid input syntax for type %s: %q", r.name, v.text))
			}
		case intRanges[from].name != "":
			s = v.text
		case from == oidBool && to == oidInt4:
			return value{oid: to, text: map[string]string{"t": "1", "f": "0"}[v.text]}, nil
		default:
			return value{}, errNotAnswered
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < r.min || n > r.max {
			if textual {
				return value{}, errorf(stateOutOfRange, fmt.Sprintf("value %q is out of range for type %s", v.text, r.name))
			}
			return value{}, errorf(stateOutOfRange, r.name+" out of range")
		}
		return value{oid: to, text: strconv.FormatInt(n, 10)}, nil
	case to == oidNumeric:
		switch {
		case textual:
			s := strings.TrimSpace(v.text)
			sign := ""
			if s != "" && (s[0] == '+' || s[0] == '-') {
				sign, s = s[:1], s[1:]
			}
			if specialNumeric.MatchString(s) {
				// NaN and the infinities: not answered here.
				return value{}, errNotAnswered
			}
			if !numericLiteral.MatchString(s) {
				return value{}, errorf(stateInvalidText, fmt.Sprintf("invalid input syntax for type numeric: %q", v.text))
			}
			if sign == "-" {
				s = "-" + s
			}
			t, ok := numericText(s)
			if !ok {
				return value{}, errNotAnswered // an exponent past what the front writes out
			}
			return value{oid: to, text: t}, nil
		case intRanges[from].name != "":
			return value{oid: to, text: v.text}, nil
		}
	}
	return value{}, errNotAnswered
}

// clipName cuts a name to PostgreSQL's 63 bytes, at a character boundary.
func clipName(s string) string {
	if len(s) <= 63 {
		return s
	}
	s = s[:63]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// parseBool reads a boolean as boolin does: true, yes, on, 1 and their
// false counterparts, any case, a unique prefix, spaces around.
func parseBool(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "", false
	}
	prefixOf := func(word string, min int) bool { return len(s) >= min && strings.HasPrefix(word, s) }
	switch {
	case prefixOf("true", 1), prefixOf("yes", 1), prefixOf("on", 2), s == "1":
		return "t", true
	case prefixOf("false", 1), prefixOf("no", 1), prefixOf("off", 2), s == "0":
		return "f", true
	}
	return "", false
}
