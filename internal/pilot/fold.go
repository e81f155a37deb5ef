package pilot

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// foldWrite folds a guarded write into one statement (DESIGN.md section
// 6, "Shapes and templates"): a data-modifying CTE runs the write, whose
// RETURNING evaluates the check guard and the row cap on every row as it
// is written (the cap raises at the (max_rows+1)-th); the receipt's
// insert counts every row the write returned, raises past max_rows too
// (harbormaster.max_rows, which the planner cannot fold away) and records
// the count. PostgreSQL runs a data-modifying CTE to completion whether or
// not anything reads it, so the receipt is written, or the whole
// statement fails, on every execution; a second execution of the same
// marque fails at the receipt's primary key and rolls its write back with
// it (runShaped reports it as the replay it is, whichever guard raised
// first).
//
// The agent's parameters are $1..$params; the receipt's follow: marque id,
// request id, principal, target, statement hash, path. The statement
// returns the write's own RETURNING rows (the guard column last), or,
// without RETURNING of its own, one row: the count.
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
	p := func(i int) string { return fmt.Sprintf("$%d::text", params+i) }
	out := "SELECT rows_affected FROM harbormaster_r"
	if g.Returning {
		out = "SELECT * FROM harbormaster_w"
	}
	return fmt.Sprintf(`WITH harbormaster_w AS (%s), harbormaster_r AS (
INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path, rows_affected)
SELECT %s, %s, %s, %s, %s, %s, harbormaster.max_rows(count(*), %d::int8) FROM harbormaster_w
RETURNING rows_affected) %s`, inner, p(1), p(2), p(3), p(4), p(5), p(6), g.MaxRows, out), nil
}
