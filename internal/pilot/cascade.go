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
//
// exists is the question as SQL (cascadeExists); "" asks nothing (nil).
func cascadeGuard(exists string) (*pg.Node, error) {
	if exists == "" {
		return nil, nil
	}
	cond, err := selectExpr(exists)
	if err != nil {
		return nil, fmt.Errorf("%w: foreign key guard: %v", ErrGuard, err)
	}
	return caseWhen(cond, violationCall(cascadeReason), boolConst(true)), nil
}

// selectExpr parses expr, an SQL expression of our own, into its node.
func selectExpr(expr string) (*pg.Node, error) {
	res, err := pg.Parse("SELECT " + expr)
	if err != nil {
		return nil, err
	}
	if len(res.Stmts) != 1 || len(res.Stmts[0].Stmt.GetSelectStmt().GetTargetList()) != 1 {
		return nil, fmt.Errorf("not one expression: %s", expr)
	}
	return res.Stmts[0].Stmt.GetSelectStmt().GetTargetList()[0].GetResTarget().GetVal(), nil
}

// cascadeExists is cascadeGuard's question as SQL, an EXISTS that is true
// when a foreign key action answers the write; "" for an INSERT.
func cascadeExists(kind sqlcheck.Op, t sqlcheck.TableName, written []string) string {
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
		return ""
	}
	return "EXISTS (" + under + cond + ")"
}

// The catalog generation (issue 25): harbormaster target init
// --catalog-generation creates a counter that an event trigger moves at the
// end of every DDL command that creates or alters something (ddl_command_end,
// ENABLE ALWAYS, in the command's own transaction; commands on temporary
// objects or views alone, and GRANT, REVOKE, COMMENT and SECURITY LABEL,
// leave it: none of them can carry a key action, a trigger a key answers,
// or a table under another; a DROP cannot turn the question's "no" into a
// "yes"). Asking the catalog costs the target about 40 µs a write, most
// of it setting up the question's plan, which PostgreSQL does for every
// execution whether or not the question is reached. So a template's write
// does not carry the question: it carries the generation at which the
// question was last answered "no" (Pilot.generation), and raises when the
// generation differs:
//
//	CASE WHEN <the generation> = $g AND <READ COMMITTED> THEN true
//	ELSE harbormaster.fence_violation('catalog generation') END
//
// The generation is the counter with the row versions (xmin) of the event
// trigger and of its function: disabling the trigger around a migration and
// enabling it again, dropping and creating it, or replacing the function
// each changes it, though none moves the counter (ALTER EVENT TRIGGER is no
// DDL an event trigger sees). Nothing of a write that raises remains; it
// runs again on the literal path, which asks the question every time, and
// the template learns the generation again. A learned generation is used
// for at most generationTTL, which also bounds how long any failure of the
// counter could matter.
//
// Why the answer holds while the generation stands still: every command
// that can add a foreign key action, a BEFORE UPDATE trigger or a generated
// key column to a table the write reaches takes a lock on that table that
// conflicts with the write's ROW EXCLUSIVE and holds it to its commit,
// which moves the counter in the same transaction; the write takes its
// locks when it is bound (its plan is cached and revalidated then) and its
// snapshot when it executes, in READ COMMITTED only (a template runs in an
// implicit transaction of its own, and the statement checks the level: in
// REPEATABLE READ the snapshot can be older than the lock). Such a command
// committed before the lock shows in the snapshot's counter, and one that
// had not cannot commit until the write has. A table that comes under the
// written one (INHERIT, ATTACH PARTITION, PARTITION OF) takes a weaker lock
// on it, but the tables the write reaches are its plan's, fixed when it is
// bound from a catalog no newer than its snapshot: a table that came under
// it after that is not reached, and one that came before moved the counter
// the snapshot reads.
const (
	generationTrigger = "harbormaster_catalog_generation"
	// generationNow is the generation as text, NULL when the trigger is
	// not in place, ALWAYS enabled, at ddl_command_end, calling the
	// counter's function.
	generationNow = `(SELECT c.n::text || '/' || e.xmin::text || '/' || f.xmin::text
	FROM harbormaster.catalog_generation c, pg_catalog.pg_event_trigger e JOIN pg_catalog.pg_proc f ON f.oid = e.evtfoid
	WHERE e.evtname = '` + generationTrigger + `' AND e.evtenabled = 'A' AND e.evtevent = 'ddl_command_end'
	  AND f.proname = 'bump_catalog_generation' AND f.pronamespace = 'harbormaster'::regnamespace)`
	// generationReason is the reason a write raises with when the
	// generation differs (runShaped takes the literal path).
	generationReason = "catalog generation"
)

// generationGuard replaces a cascade guard (cascadeGuard's node, changed
// in place) by the generation's: true while the generation is still
// $param, in READ COMMITTED, else it raises.
func generationGuard(guard *pg.Node, param int) error {
	cond, err := selectExpr(fmt.Sprintf("%s = $%d::text AND pg_catalog.current_setting('transaction_isolation') = 'read committed'", generationNow, param))
	if err != nil {
		return fmt.Errorf("%w: catalog generation: %v", ErrGuard, err)
	}
	guard.Node = caseWhen(cond, boolConst(true), violationCall(generationReason)).Node
	return nil
}

// generationSQL learns a template's generation: the generation ("" when
// the trigger is not armed), and whether the cascade question is "no", in
// one snapshot.
func generationSQL(exists string) string {
	return "SELECT COALESCE(" + generationNow + ", ''), NOT " + exists
}

// literal is s as an SQL string literal (standard_conforming_strings is
// pinned on).
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
