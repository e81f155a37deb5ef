package sqlcheck

import (
	"errors"
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrName is returned for a malformed table or column name.
var ErrName = errors.New("malformed name")

// ParseRelationName reads a table name as SQL would ("orders",
// "public.orders", `"Mixed Case"`, `U&"..."`), with the real parser's
// quoting and case folding. Schema is empty when unqualified.
func ParseRelationName(s string) (schema, name string, err error) {
	if strings.TrimSpace(s) == "" || len(s) > 512 || strings.IndexByte(s, 0) >= 0 {
		return "", "", fmt.Errorf("%w: %q", ErrName, s)
	}
	tree, err := pg.Parse("SELECT FROM " + s)
	if err != nil || len(tree.Stmts) != 1 {
		return "", "", fmt.Errorf("%w: %q", ErrName, s)
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil || len(sel.FromClause) != 1 || !onlyFields(sel.ProtoReflect(), "from_clause", "limit_option", "op") {
		return "", "", fmt.Errorf("%w: %q", ErrName, s)
	}
	rv := sel.FromClause[0].GetRangeVar()
	if rv == nil || rv.Alias != nil || rv.Catalogname != "" || !rv.Inh {
		return "", "", fmt.Errorf("%w: %q", ErrName, s)
	}
	return rv.Schemaname, rv.Relname, nil
}

// ParseColumnName reads one column name with SQL quoting and case folding:
// "Order" (with its double quotes) is Order, ORDER or order is order. A
// keyword alone is read as the column of that name, even one SQL reserves
// (end, from, order, user): where only a column name can stand, it can
// mean nothing else, and PostgreSQL allows it quoted.
func ParseColumnName(s string) (string, error) {
	if strings.TrimSpace(s) == "" || len(s) > 256 || strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("%w: %q", ErrName, s)
	}
	if res, err := pg.Scan(s); err == nil && len(res.Tokens) == 1 && res.Tokens[0].KeywordKind != pg.KeywordKind_NO_KEYWORD {
		// Keywords are ASCII letters and underscores, folded as an
		// unquoted name is.
		t := res.Tokens[0]
		return strings.ToLower(s[t.Start:t.End]), nil
	}
	tree, err := pg.Parse("SELECT " + s)
	if err != nil || len(tree.Stmts) != 1 {
		return "", fmt.Errorf("%w: %q", ErrName, s)
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil || len(sel.TargetList) != 1 || !onlyFields(sel.ProtoReflect(), "target_list", "limit_option", "op") {
		return "", fmt.Errorf("%w: %q", ErrName, s)
	}
	rt := sel.TargetList[0].GetResTarget()
	if rt == nil || rt.Name != "" {
		return "", fmt.Errorf("%w: %q", ErrName, s)
	}
	cr := rt.Val.GetColumnRef()
	if cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetString_() == nil {
		return "", fmt.Errorf("%w: %q", ErrName, s)
	}
	return cr.Fields[0].GetString_().Sval, nil
}

// onlyFields reports whether m has no populated field outside names.
func onlyFields(m protoreflect.Message, names ...string) bool {
	ok := true
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		for _, n := range names {
			if string(fd.Name()) == n {
				return true
			}
		}
		ok = false
		return false
	})
	return ok
}

// containsMessage reports whether any message named name occurs under m.
func containsMessage(m protoreflect.Message, name protoreflect.Name) bool {
	if m.Descriptor().Name() == name {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && !found; i++ {
				found = containsMessage(l.Get(i).Message(), name)
			}
		case fd.IsMap():
		case fd.Message() != nil:
			found = containsMessage(v.Message(), name)
		}
		return !found
	})
	return found
}

// Expr is a compiled fence or check: a boolean expression over one table.
type Expr struct {
	// Canonical is the expression deparsed from its parse tree.
	Canonical string
	// Columns are the table's columns it reads, sorted.
	Columns []string
	// Node is the expression's parse tree (the Pilot grafts it into
	// statements as a guard).
	Node *pg.Node
}

// CompileExpr parses a fence or check over table t: a PostgreSQL boolean
// expression over that table's columns, constants and allow-listed
// functions, without subqueries, aggregates or parameters. It returns the
// canonical form, or every reason it is refused.
func CompileExpr(expr string, t *Table, cat *Catalog) (*Expr, []Reason) {
	if strings.TrimSpace(expr) == "" {
		return nil, []Reason{reasonf(CodeParseError, "the expression is empty")}
	}
	src := "SELECT 1 FROM " + t.Name.String() + " WHERE " + expr
	a := Analyze(src, cat, Limits{MaxBytes: 16 << 10})
	if a.Tree == nil {
		return nil, a.Reasons
	}
	sel := a.Stmt().GetSelectStmt()
	reasons := append([]Reason(nil), a.Reasons...)
	if sel == nil || len(sel.FromClause) != 1 || sel.WhereClause == nil ||
		!onlyFields(sel.ProtoReflect(), "target_list", "from_clause", "where_clause", "limit_option", "op") {
		return nil, append(reasons, reasonf(CodeParseError, "the expression is not a single boolean expression"))
	}
	if containsMessage(sel.WhereClause.ProtoReflect(), "SubLink") {
		reasons = append(reasons, reasonf(CodeUnsupported, "subqueries are not allowed in fences and checks"))
	}
	for _, f := range a.Facts.Functions {
		if isAggregateOrWindow(f) {
			reasons = append(reasons, reasonf(CodeFunctionNotAllowed, "aggregate and window function %s is not allowed in fences and checks", f))
		}
	}
	if len(a.Facts.Relations) != 1 || a.Facts.Relations[0] != t.Name {
		reasons = append(reasons, reasonf(CodeRelationNotCovered, "the expression may only read %s", t.Name))
	}
	if len(reasons) > 0 {
		return nil, reasons
	}
	canon, err := DeparseExpr(sel.WhereClause)
	if err != nil {
		return nil, []Reason{reasonf(CodeInternal, "the expression cannot be deparsed: %v", err)}
	}
	return &Expr{Canonical: canon, Columns: a.Facts.Reads[t.Name], Node: sel.WhereClause}, nil
}

// DeparseExpr renders one expression node as SQL text.
func DeparseExpr(n *pg.Node) (string, error) {
	res := &pg.ParseResult{Version: ParserVersion, Stmts: []*pg.RawStmt{{Stmt: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: &pg.SelectStmt{
		TargetList:  []*pg.Node{{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Val: n}}}},
		LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT, Op: pg.SetOperation_SETOP_NONE,
	}}}}}}
	s, err := pg.Deparse(res)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(s, "SELECT ") {
		return "", fmt.Errorf("unexpected deparse %q", s)
	}
	return strings.TrimPrefix(s, "SELECT "), nil
}

// ParserVersion is the PostgreSQL version number of the parser's trees
// (pg_query_go v6 embeds the PostgreSQL 17 parser); Deparse requires it.
const ParserVersion = 170007

func isAggregateOrWindow(f string) bool {
	switch f {
	case "count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "string_agg", "array_agg",
		"json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg", "stddev", "stddev_pop", "stddev_samp",
		"variance", "var_pop", "var_samp", "percentile_cont", "percentile_disc", "mode", "bit_and", "bit_or",
		"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
		"first_value", "last_value", "nth_value", "generate_series", "generate_subscripts", "unnest",
		"jsonb_array_elements", "jsonb_array_elements_text", "json_array_elements", "json_array_elements_text",
		"jsonb_each", "jsonb_each_text", "json_each", "json_each_text", "jsonb_object_keys", "json_object_keys", "regexp_matches":
		return true
	}
	return false
}
