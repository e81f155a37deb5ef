package pilot

import (
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// cascadeReason is the reason harbormaster.fence_violation raises with
// when the target's catalog, read as the statement runs, holds a foreign
// key action the write would set off (statementRefusal maps it).
const cascadeReason = "foreign key action"

// cascadeGuard is a condition for the WHERE of a DELETE or UPDATE of t
// that raises when a foreign key's CASCADE, SET NULL or SET DEFAULT
// answers the write: the one refuseCascades applies with the Pilot's
// catalog, asked of the target's own as the statement runs. A key added
// by a migration after the Pilot read its catalog is then seen too. The
// statement holds its lock on t by the time it reads pg_constraint, so no
// key can be added between the question and the write. It is evaluated
// once (an uncorrelated subquery), and only when a row is reached.
func cascadeGuard(kind sqlcheck.Op, t sqlcheck.TableName, written []string) (*pg.Node, error) {
	under := fmt.Sprintf(`WITH RECURSIVE under (top, rel) AS (
    SELECT c.oid, c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relname = %s
  UNION
    SELECT u.top, i.inhrelid FROM under u JOIN pg_catalog.pg_inherits i ON i.inhparent = u.rel)
SELECT FROM under u JOIN pg_catalog.pg_constraint k ON k.contype = 'f' AND k.confrelid = u.rel
JOIN pg_catalog.pg_class r ON r.oid = u.rel WHERE `, literal(t.Schema), literal(t.Name))
	var cond string
	switch kind {
	case sqlcheck.OpDelete:
		cond = `k.confdeltype IN ('c', 'n', 'd')`
	case sqlcheck.OpUpdate:
		cols := make([]string, len(written))
		for i, c := range written {
			cols[i] = literal(c)
		}
		cond = fmt.Sprintf(`(k.confupdtype IN ('c', 'n', 'd') AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = k.confrelid AND a.attnum = ANY (k.confkey) AND a.attname::text = ANY (ARRAY[%s]::text[])))
  OR (u.rel <> u.top AND r.relispartition AND k.conparentid = 0 AND k.confdeltype IN ('c', 'n', 'd'))`, strings.Join(cols, ", "))
	default:
		return nil, nil
	}
	res, err := pg.Parse("SELECT EXISTS (" + under + cond + ")")
	if err != nil || len(res.Stmts) != 1 {
		return nil, fmt.Errorf("%w: foreign key guard: %v", ErrGuard, err)
	}
	exists := res.Stmts[0].Stmt.GetSelectStmt().GetTargetList()[0].GetResTarget().GetVal()
	return caseWhen(exists, violationCall(cascadeReason), boolConst(true)), nil
}

// literal is s as an SQL string literal (standard_conforming_strings is
// pinned on).
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
