package pilot

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// foldWrite folds a guarded write into one statement (DESIGN.md section
// 6, "Shapes and templates"): a data-modifying CTE runs the write, whose
// RETURNING evaluates the check guard on every new row; the receipt's
// update counts every row the write returned, raises past max_rows
// (harbormaster.max_rows, which the planner cannot fold away) and records
// the count. PostgreSQL runs a data-modifying CTE to completion whether or
// not anything reads it, so the count is recorded, or the whole
// transaction fails, on every execution.
//
// The receipt itself is inserted by the message before this one, in the
// same implicit transaction (runShaped): a second execution of the same
// marque blocks on, then fails at, the receipt's primary key before its
// write runs at all.
//
// The agent's parameters are $1..$params; the marque id is the next. The
// statement returns the write's own RETURNING rows (the guard column
// last, when there is one), or, without RETURNING, one row: the count.
func foldWrite(stmt *pg.Node, g *Guarded, params int) (string, error) {
	w := proto.Clone(stmt).(*pg.Node)
	var returning *[]*pg.Node
	switch s := w.GetNode().(type) {
	case *pg.Node_UpdateStmt:
		returning = &s.UpdateStmt.ReturningList
	case *pg.Node_DeleteStmt:
		returning = &s.DeleteStmt.ReturningList
	case *pg.Node_InsertStmt:
		returning = &s.InsertStmt.ReturningList
	default:
		return "", fmt.Errorf("not a write")
	}
	if len(*returning) == 0 {
		// Something to count when the statement returns nothing.
		*returning = append(*returning, pg.MakeResTargetNodeWithVal(pg.MakeAConstIntNode(1, -1), -1))
	}
	inner, err := deparse(w)
	if err != nil {
		return "", err
	}
	out := "SELECT rows_affected FROM harbormaster_r"
	if g.Returning {
		out = "SELECT * FROM harbormaster_w"
	}
	return fmt.Sprintf(`WITH harbormaster_w AS (%s), harbormaster_r AS (
UPDATE harbormaster.receipts SET rows_affected = harbormaster.max_rows((SELECT count(*) FROM harbormaster_w), %d::int8)
WHERE marque_id = $%d::text RETURNING rows_affected) %s`, inner, g.MaxRows, params+1, out), nil
}
