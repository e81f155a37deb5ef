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
// answers the write, asked of the target's own catalog as the statement
// runs, so a key (or a generated column, or a trigger) added by a
// migration after the Pilot read its catalog is seen too. The
// statement holds its lock on t by the time it asks, so no key can be
// added between the question and the write. It is evaluated once (an
// uncorrelated subquery), and only when a row is reached.
//
// It asks pg_trigger, not pg_constraint: every foreign key puts its
// action triggers (RI_FKey_cascade_del, ...) on the table it references,
// and pg_trigger is indexed by that table, where pg_constraint has no
// index on confrelid and would be read whole by every write. The tables
// under t (partitions, children) are asked too, since the write reaches
// their rows.
func cascadeGuard(kind sqlcheck.Op, t sqlcheck.TableName, written []string) (*pg.Node, error) {
	top := literal(sqlcheck.QuoteIdent(t.Schema)+"."+sqlcheck.QuoteIdent(t.Name)) + "::regclass::oid"
	actions := func(op string) string {
		return fmt.Sprintf(`ARRAY['pg_catalog."RI_FKey_cascade_%[1]s"'::regproc, 'pg_catalog."RI_FKey_setnull_%[1]s"'::regproc, 'pg_catalog."RI_FKey_setdefault_%[1]s"'::regproc]::oid[]`, op)
	}
	// The depth, not the table's oid, tells t from the tables under it: an
	// oid folded into the plan would differ from target to target.
	under := fmt.Sprintf(`WITH RECURSIVE under (rel, depth) AS (
    SELECT %s, 0
  UNION
    SELECT i.inhrelid, u.depth + 1 FROM under u JOIN pg_catalog.pg_inherits i ON i.inhparent = u.rel)
SELECT FROM under u JOIN pg_catalog.pg_trigger g ON g.tgrelid = u.rel WHERE `, top)
	var cond string
	switch kind {
	case sqlcheck.OpDelete:
		cond = "g.tgfoid = ANY (" + actions("del") + ")"
	case sqlcheck.OpUpdate:
		cols := make([]string, len(written))
		for i, c := range written {
			cols[i] = literal(c)
		}
		written := "ARRAY[" + strings.Join(cols, ", ") + "]::text[]"
		// An update that changes a referenced key sets off its key's
		// update action; one that moves a row out of a partition deletes
		// it there, which sets off the delete action of a key on that
		// partition alone (a key on the partitioned table sees a move as
		// an update). A key changes when the update writes one of its
		// columns (by name: a partition numbers its columns its own way),
		// when one is a stored generated column computed from a written
		// column, or from a system column or the whole row, which this
		// does not tell apart, and whenever a BEFORE UPDATE row trigger on
		// the table may rewrite the row. The generated column's
		// dependencies are those of its expression: pg_attrdef's entry in
		// pg_depend (PostgreSQL 12 to 15), or the column's own. No key
		// references an expression: a foreign key needs a unique index on
		// plain columns.
		cond = fmt.Sprintf(`EXISTS (SELECT FROM pg_catalog.pg_constraint k WHERE k.oid = g.tgconstraint AND (
    (g.tgfoid = ANY (%[1]s) AND (EXISTS (SELECT FROM pg_catalog.pg_attribute a
      WHERE a.attrelid = k.confrelid AND a.attnum = ANY (k.confkey) AND (a.attname::text = ANY (%[2]s)
        OR a.attgenerated <> '' AND EXISTS (SELECT FROM pg_catalog.pg_depend d
          WHERE d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = a.attrelid AND d.refobjsubid <> a.attnum
            AND (d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = a.attrelid AND d.objsubid = a.attnum
              OR d.classid = 'pg_catalog.pg_attrdef'::regclass AND d.objid IN (SELECT ad.oid FROM pg_catalog.pg_attrdef ad WHERE ad.adrelid = a.attrelid AND ad.adnum = a.attnum))
            AND (d.refobjsubid <= 0 OR EXISTS (SELECT FROM pg_catalog.pg_attribute w
              WHERE w.attrelid = d.refobjid AND w.attnum = d.refobjsubid AND w.attname::text = ANY (%[2]s))))))
      OR EXISTS (SELECT FROM pg_catalog.pg_trigger b WHERE b.tgrelid = k.confrelid AND NOT b.tgisinternal AND (b.tgtype & 19) = 19)))
    OR (u.depth > 0 AND k.conparentid = 0 AND g.tgfoid = ANY (%[3]s)
      AND EXISTS (SELECT FROM pg_catalog.pg_class r WHERE r.oid = u.rel AND r.relispartition))))`,
			actions("upd"), written, actions("del"))
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
