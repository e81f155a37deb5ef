package shadow

import (
	"fmt"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// RefusedError is a statement the shadow does not run: not a plain read
// of the catalog. Reason says why, for the agent.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "shadow: refused: " + e.Reason }

func refused(format string, a ...any) error { return &RefusedError{Reason: fmt.Sprintf(format, a...)} }

// IsCatalogRelation reports whether a relation as written (schema "" when
// unqualified) is one of PostgreSQL's catalogs: in pg_catalog or
// information_schema, or an unqualified pg_* name, which PostgreSQL looks
// up in pg_catalog first.
func IsCatalogRelation(schema, name string) bool {
	schema = strings.ToLower(schema)
	return schema == "pg_catalog" || schema == "information_schema" || schema == "" && strings.HasPrefix(strings.ToLower(name), "pg_")
}

// Check accepts a parsed text the shadow may run: one SELECT (with
// read-only CTEs, set operations, subqueries) whose every relation is a
// catalog relation and that calls no function on the blocked list. The
// role's privileges and the READ ONLY transaction hold the same line on
// the server; this check says so plainly before anything runs.
func Check(tree *pg.ParseResult) error {
	if tree == nil || len(tree.Stmts) != 1 {
		return refused("a catalog query must be exactly one statement")
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil {
		return refused("a catalog query must be a SELECT")
	}
	// The statement's own CTEs are relations it may read (Sequelize's
	// type lookup reads WITH ranges AS (... FROM pg_range ...)).
	ctes := map[string]bool{}
	sqlcheck.Visit(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		if c, ok := m.Interface().(*pg.CommonTableExpr); ok {
			ctes[c.Ctename] = true
		}
		return true
	})
	var bad error
	sqlcheck.Visit(tree.ProtoReflect(), func(m protoreflect.Message) bool {
		if bad != nil {
			return false
		}
		switch x := m.Interface().(type) {
		case *pg.SelectStmt:
			if x.IntoClause != nil {
				bad = refused("SELECT INTO is not a read")
			} else if len(x.LockingClause) > 0 {
				bad = refused("a locking clause (FOR UPDATE, FOR SHARE) is not a plain read")
			}
		case *pg.InsertStmt, *pg.UpdateStmt, *pg.DeleteStmt, *pg.MergeStmt:
			bad = refused("a catalog query may not write (a writable CTE)")
		case *pg.RangeVar:
			if x.Schemaname == "" && ctes[x.Relname] {
				break
			}
			if !IsCatalogRelation(x.Schemaname, x.Relname) {
				bad = refused("%s is not a catalog relation: a catalog query reads pg_catalog and information_schema only, and a statement on your tables goes to the statement path on its own", relName(x))
			}
		case *pg.FuncCall:
			if name := funcName(x); blocked(name) {
				bad = refused("the function %s is not available in catalog queries", name)
			}
		}
		return bad == nil
	})
	return bad
}

func relName(rv *pg.RangeVar) string {
	if rv.Schemaname != "" {
		return sqlcheck.QuoteIdent(rv.Schemaname) + "." + sqlcheck.QuoteIdent(rv.Relname)
	}
	return sqlcheck.QuoteIdent(rv.Relname)
}

func funcName(f *pg.FuncCall) string {
	var parts []string
	for _, n := range f.Funcname {
		parts = append(parts, strings.ToLower(n.GetString_().GetSval()))
	}
	return strings.Join(parts, ".")
}

// blockedPrefixes and blockedNames are functions that reach outside the
// catalog (files, other servers, other sessions, the server's state), run
// text as SQL, wait, or change state. Most need privileges the role does
// not have, or fail in a READ ONLY transaction; listing them here refuses
// them with a reason instead.
var blockedPrefixes = []string{
	"pg_read_", "pg_ls_", "pg_stat_file", "lo_", "dblink", "pg_file_", "pg_sleep",
	"pg_terminate_", "pg_cancel_", "pg_reload_", "pg_rotate_", "pg_logical_", "pg_replication_",
	"pg_create_", "pg_drop_", "pg_switch_", "pg_backup_", "pg_start_backup", "pg_stop_backup", "pg_promote",
	"pg_wal_", "pg_advisory", "pg_try_advisory", "pg_notify", "pg_import_", "pg_export_", "pg_log_",
	"pg_stat_reset", "pg_current_xact", "txid_", "query_to_xml", "cursor_to_xml", "table_to_xml",
	"schema_to_xml", "database_to_xml", "query_to_xmlschema", "pg_event_trigger", "pg_copy_",
}

var blockedNames = map[string]bool{
	"set_config": true, "nextval": true, "setval": true, "currval": true, "lastval": true,
	"pg_sequence_last_value": true, "dblink": true,
}

func blocked(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	if blockedNames[name] {
		return true
	}
	for _, p := range blockedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
