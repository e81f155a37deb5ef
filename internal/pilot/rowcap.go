package pilot

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// The row cap stops a write as it runs (DESIGN.md section 6: a write that
// passes max_rows raises as its (max_rows+1)-th row is written). Counting
// the rows after the statement completes is exact but late: the statement
// has by then written every row, drawn a sequence value for each, and set
// off their triggers, which a rollback does not all undo (a sequence keeps
// its draws), so an INSERT ... SELECT under max_rows: 1 drew 367,223
// values before it rolled back.
//
// PostgreSQL evaluates a write's RETURNING list on each row as it writes
// it, before it asks its source for the next row. Every guarded write
// returns harbormaster.row_cap(max_rows, (SELECT
// harbormaster.row_cap_start())), which counts the statement's rows in a
// transaction-local setting and raises SQLSTATE HM002 (MaxRowsSQLState)
// on the first row past the cap; statementRefusal maps it to
// RefusedMaxRows, as the count after the statement did. The uncorrelated
// subquery is an init plan, which PostgreSQL evaluates once per
// statement, when the first row's call needs its value: it sets the count
// to zero before that row counts, so each statement counts its own rows
// even inside a longer transaction.
//
// row_cap is a one-line SQL function, which the planner inlines into the
// statement: counting a row is an expression (set_config of
// current_setting plus one, about 1 µs), not a PL/pgSQL call (2 to 5 µs,
// measured with BenchmarkRowCap); PL/pgSQL runs only to raise, in
// harbormaster.row_cap_exceeded. Its body reads the init plan's value
// first (start + current_setting(...)), so the reset runs before the
// count is read, inlined or not: an operator's arguments are evaluated in
// order, and a function's before its body. Every function is created by
// target init with EXECUTE for PUBLIC, and a custom setting is any role's
// to set, so the guard needs no privilege a least-privilege role lacks. A
// row an ON CONFLICT DO NOTHING skips is not returned, so not counted; a
// row ON CONFLICT DO UPDATE updates is.

// rowCapCall is harbormaster.row_cap(maxRows, (SELECT
// harbormaster.row_cap_start())).
func rowCapCall(maxRows int64) *pg.Node {
	start := pg.MakeFuncCallNode([]*pg.Node{pg.MakeStrNode("harbormaster"), pg.MakeStrNode("row_cap_start")}, nil, -1)
	sub := &pg.Node{Node: &pg.Node_SubLink{SubLink: &pg.SubLink{
		SubLinkType: pg.SubLinkType_EXPR_SUBLINK,
		Subselect: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: &pg.SelectStmt{
			TargetList:  []*pg.Node{pg.MakeResTargetNodeWithVal(start, -1)},
			LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT,
			Op:          pg.SetOperation_SETOP_NONE,
		}}},
		Location: -1,
	}}}
	return pg.MakeFuncCallNode([]*pg.Node{pg.MakeStrNode("harbormaster"), pg.MakeStrNode("row_cap")},
		[]*pg.Node{pg.MakeAConstIntNode(maxRows, -1), sub}, -1)
}

// CapReturning is the row cap as the text of a RETURNING item, named
// GuardColumn: append it, last, to the RETURNING list of an INSERT,
// UPDATE or DELETE (", " + CapReturning(n) after an existing list,
// "RETURNING " + CapReturning(n) without one), and the write raises
// SQLSTATE HM002 as its (maxRows+1)-th row is written, which
// statementRefusal maps to RefusedMaxRows. The caller strips the column
// from what it returns (Guarded.Hidden). It needs target init's
// harbormaster.row_cap, row_cap_start and row_cap_exceeded.
func CapReturning(maxRows int64) string {
	return fmt.Sprintf("harbormaster.row_cap(%d, (SELECT harbormaster.row_cap_start())) AS %s", maxRows, GuardColumn)
}

// AddRowCap appends the row cap to the RETURNING list of the write stmt,
// as its last column (GuardColumn), and reports whether stmt is a write
// it added it to; the caller sets Guarded.Hidden. It is CapReturning on
// the tree.
func AddRowCap(stmt *pg.Node, maxRows int64) bool {
	returning := returningList(stmt)
	if returning == nil {
		return false
	}
	*returning = append(*returning, pg.MakeResTargetNodeWithNameAndVal(GuardColumn, rowCapCall(maxRows), -1))
	return true
}

// returningList is the RETURNING list of a write; nil for anything else.
func returningList(stmt *pg.Node) *[]*pg.Node {
	switch s := stmt.GetNode().(type) {
	case *pg.Node_UpdateStmt:
		return &s.UpdateStmt.ReturningList
	case *pg.Node_DeleteStmt:
		return &s.DeleteStmt.ReturningList
	case *pg.Node_InsertStmt:
		return &s.InsertStmt.ReturningList
	}
	return nil
}
