package cover

import (
	"fmt"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Rewording is one deterministic rewording of a statement: the same
// statement to PostgreSQL, written differently.
type Rewording struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// Reword applies the rewording operator to a statement: reformatting,
// comments added and removed, keyword and identifier case, identifier
// quoting, a table alias, conjunct order and equivalent literal forms.
// Every variant is produced with the real parser (its scanner for the
// token-level forms, its deparser for the tree-level ones), so each means
// to PostgreSQL exactly what the original means. A variant that cannot be
// produced is left out (an error only when the statement does not parse).
func Reword(sql string) ([]Rewording, error) {
	tree, err := pg.Parse(sql)
	if err != nil {
		return nil, fmt.Errorf("cover: reword: %w", err)
	}
	scan, err := pg.Scan(sql)
	if err != nil {
		return nil, fmt.Errorf("cover: reword: %w", err)
	}
	var out []Rewording
	add := func(name, s string) {
		if s != "" {
			out = append(out, Rewording{Name: name, SQL: s})
		}
	}
	toks := scan.Tokens
	text := func(t *pg.ScanToken) string { return sql[t.Start:t.End] }
	join := func(sep string, f func(t *pg.ScanToken) string) string {
		parts := make([]string, 0, len(toks))
		for _, t := range toks {
			if t.Token == pg.Token_SQL_COMMENT || t.Token == pg.Token_C_COMMENT {
				parts = append(parts, text(t))
				if t.Token == pg.Token_SQL_COMMENT {
					parts = append(parts, "\n")
				}
				continue
			}
			parts = append(parts, f(t))
		}
		return strings.Join(parts, sep)
	}
	same := func(t *pg.ScanToken) string { return text(t) }
	add("formatting", join("\n    ", same))
	if len(toks) > 1 {
		var b strings.Builder
		for i, t := range toks {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(text(t))
			if i == 0 {
				b.WriteString(" /* reworded */")
			}
		}
		b.WriteString(" -- a trailing comment\n")
		add("comments added", b.String())
	}
	unquotedIdent := func(t *pg.ScanToken) bool {
		return t.Token == pg.Token_IDENT && !strings.HasPrefix(text(t), `"`)
	}
	add("case", join(" ", func(t *pg.ScanToken) string {
		s := text(t)
		switch {
		case unquotedIdent(t):
			return strings.ToUpper(s)
		case t.KeywordKind != pg.KeywordKind_NO_KEYWORD:
			if s == strings.ToUpper(s) {
				return strings.ToLower(s)
			}
			return strings.ToUpper(s)
		}
		return s
	}))
	add("quoting", join(" ", func(t *pg.ScanToken) string {
		if unquotedIdent(t) {
			return `"` + strings.ToLower(text(t)) + `"`
		}
		return text(t)
	}))
	deparse := func(name string, edit func(stmt *pg.Node) bool) {
		c := proto.Clone(tree).(*pg.ParseResult)
		if len(c.Stmts) != 1 || !edit(c.Stmts[0].Stmt) {
			return
		}
		if s, err := pg.Deparse(c); err == nil {
			add(name, s)
		}
	}
	deparse("comments removed (canonical form)", func(*pg.Node) bool { return true })
	deparse("table alias", addAlias)
	deparse("conjunct order", func(n *pg.Node) bool {
		w := whereOf(n)
		if w == nil || *w == nil {
			return false
		}
		return reverseConjuncts(*w)
	})
	deparse("literal forms", func(n *pg.Node) bool {
		changed := false
		walkNodes(n, func(x *pg.Node) {
			c := x.GetAConst()
			if c == nil {
				return
			}
			if iv := c.GetIval(); iv != nil {
				// 5 and '5' are the same value where they meet a column:
				// an untyped literal takes the column's type.
				x.Node = &pg.Node_AConst{AConst: &pg.A_Const{Val: &pg.A_Const_Sval{Sval: &pg.String{Sval: strconv.Itoa(int(iv.Ival))}}}}
				changed = true
			}
		})
		return changed
	})
	return out, nil
}

// whereOf returns a pointer to the WHERE clause of a SELECT, UPDATE or
// DELETE.
func whereOf(n *pg.Node) **pg.Node {
	switch x := n.Node.(type) {
	case *pg.Node_SelectStmt:
		return &x.SelectStmt.WhereClause
	case *pg.Node_UpdateStmt:
		return &x.UpdateStmt.WhereClause
	case *pg.Node_DeleteStmt:
		return &x.DeleteStmt.WhereClause
	}
	return nil
}

func reverseConjuncts(n *pg.Node) bool {
	b := n.GetBoolExpr()
	if b == nil || b.Boolop != pg.BoolExprType_AND_EXPR || len(b.Args) < 2 {
		return false
	}
	for i, j := 0, len(b.Args)-1; i < j; i, j = i+1, j-1 {
		b.Args[i], b.Args[j] = b.Args[j], b.Args[i]
	}
	return true
}

// addAlias gives the statement's one table the alias hm_t and qualifies
// every unqualified column reference with it.
func addAlias(n *pg.Node) bool {
	var rv *pg.RangeVar
	switch x := n.Node.(type) {
	case *pg.Node_SelectStmt:
		if len(x.SelectStmt.FromClause) != 1 {
			return false
		}
		rv = x.SelectStmt.FromClause[0].GetRangeVar()
	case *pg.Node_UpdateStmt:
		rv = x.UpdateStmt.Relation
	case *pg.Node_DeleteStmt:
		rv = x.DeleteStmt.Relation
	}
	if rv == nil || rv.Alias != nil {
		return false
	}
	rv.Alias = &pg.Alias{Aliasname: "hm_t"}
	walkNodes(n, func(x *pg.Node) {
		cr := x.GetColumnRef()
		if cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetString_() == nil {
			return
		}
		cr.Fields = append([]*pg.Node{{Node: &pg.Node_String_{String_: &pg.String{Sval: "hm_t"}}}}, cr.Fields...)
	})
	return true
}

// walkNodes calls f on every Node in the tree, depth first.
func walkNodes(n *pg.Node, f func(*pg.Node)) {
	if n == nil {
		return
	}
	var visit func(m proto.Message)
	visit = func(m proto.Message) {
		if node, ok := m.(*pg.Node); ok {
			f(node)
		}
		r := m.ProtoReflect()
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList():
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					if msg, ok := l.Get(i).Interface().(protoreflect.Message); ok {
						visit(msg.Interface())
					}
				}
			case fd.Message() != nil:
				visit(v.Message().Interface())
			}
			return true
		})
	}
	visit(n)
}
