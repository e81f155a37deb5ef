package bound

import (
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// A read fence is evaluated on every row the fence view scans, those
// outside it too: a fence that can fail on a value (a cast of text to a
// number, a division, arithmetic that overflows, a function of a column)
// fails every read of the table when some row outside it holds such a
// value, and so tells the grantee that one does (docs/security.md, "A
// read fence that can raise"). mayRaise says whether a fence is anything
// but what cannot fail on any row: comparisons, IN, BETWEEN, LIKE with a
// constant pattern, IS [NOT] NULL and IS [NOT] DISTINCT FROM of columns,
// their text casts and jsonb field access with constants, joined by AND,
// OR and NOT. Anything the row does not reach (now() - interval '1 day')
// fails alike on every row, or never. It errs toward saying it may.
func mayRaise(n *pg.Node) bool { return !cannotRaise(n) }

func cannotRaise(n *pg.Node) bool {
	if n == nil || !readsColumn(n) {
		return true
	}
	switch x := n.GetNode().(type) {
	case *pg.Node_ColumnRef:
		return true
	case *pg.Node_BoolExpr:
		return all(x.BoolExpr.Args)
	case *pg.Node_NullTest:
		return cannotRaise(x.NullTest.Arg)
	case *pg.Node_BooleanTest:
		return cannotRaise(x.BooleanTest.Arg)
	case *pg.Node_TypeCast:
		switch typeName(x.TypeCast.TypeName) {
		case "text", "varchar":
			return cannotRaise(x.TypeCast.Arg)
		}
		return false
	case *pg.Node_List:
		return all(x.List.Items)
	case *pg.Node_AExpr:
		a := x.AExpr
		switch a.Kind {
		case pg.A_Expr_Kind_AEXPR_OP, pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL:
			switch opName(a.Name) {
			case "=", "<>", "!=", "<", ">", "<=", ">=":
				return cannotRaise(a.Lexpr) && cannotRaise(a.Rexpr)
			case "->", "->>":
				// jsonb and json field access with a constant key: NULL,
				// never an error, where the value has no such field.
				return cannotRaise(a.Lexpr) && !readsColumn(a.Rexpr)
			}
		case pg.A_Expr_Kind_AEXPR_IN, pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT,
			pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN,
			pg.A_Expr_Kind_AEXPR_BETWEEN_SYM, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
			return cannotRaise(a.Lexpr) && cannotRaise(a.Rexpr)
		case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
			// A pattern from a column can be malformed (a trailing escape).
			return cannotRaise(a.Lexpr) && !readsColumn(a.Rexpr)
		}
	}
	return false
}

func all(ns []*pg.Node) bool {
	for _, n := range ns {
		if !cannotRaise(n) {
			return false
		}
	}
	return true
}

func readsColumn(n *pg.Node) bool {
	found := false
	sqlcheck.Visit(n.ProtoReflect(), func(m protoreflect.Message) bool {
		_, ok := m.Interface().(*pg.ColumnRef)
		found = found || ok
		return !found
	})
	return found
}

func opName(names []*pg.Node) string {
	if len(names) == 0 {
		return ""
	}
	return names[len(names)-1].GetString_().GetSval()
}

func typeName(tn *pg.TypeName) string {
	if tn == nil || len(tn.Names) == 0 || len(tn.ArrayBounds) > 0 {
		return ""
	}
	return tn.Names[len(tn.Names)-1].GetString_().GetSval()
}
