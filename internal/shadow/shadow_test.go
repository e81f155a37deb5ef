package shadow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// targetDDL is the target both twins share; twinDDL is what only the
// second has, all of it outside the bound: another table, an unlisted
// column, an unlisted key, other enum labels, rows.
const targetDDL = `
CREATE TYPE public.mood AS ENUM ('calm', 'cross');
CREATE TABLE public.orders (
	id bigint PRIMARY KEY,
	status text NOT NULL,
	note varchar(20),
	mood public.mood,
	created_at timestamptz NOT NULL DEFAULT now(),
	secret text
);
CREATE UNIQUE INDEX orders_note_lower ON public.orders (lower(note));
CREATE UNIQUE INDEX orders_status_note ON public.orders (status, note);
ALTER TABLE public.orders ADD CONSTRAINT orders_status_secret UNIQUE (status, secret);
CREATE TABLE public.hidden (id int PRIMARY KEY, code text);
CREATE SCHEMA ops;
CREATE TABLE ops.jobs (id int PRIMARY KEY, owner text NOT NULL, secret text UNIQUE);`

const twinDDL = `
ALTER TYPE public.mood ADD VALUE 'sulky';
CREATE TABLE public.more (id int);
ALTER TABLE public.orders ADD COLUMN extra int NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX orders_extra ON public.orders (extra, id);
INSERT INTO public.orders (id, status, note, secret) VALUES (1, 'pending', 'x', 's1'), (2, 'failed', 'y', 's2');
INSERT INTO ops.jobs VALUES (1, 'ann', 'k');`

var rules = []bound.Rule{
	{Op: sqlcheck.OpSelect, Table: "public.orders", Columns: []string{"id", "status", "note", "mood", "created_at"}},
	{Op: sqlcheck.OpUpdate, Table: "public.orders", Columns: []string{"status"}, MaxRows: 5},
	{Op: sqlcheck.OpSelect, Table: "ops.jobs", Columns: []string{"id", "owner"}},
	{Op: sqlcheck.OpDelete, Table: "ops.jobs", MaxRows: 1},
	{Op: sqlcheck.OpSelect, Table: "public.absent", Columns: []string{"id"}},
}

// target makes a target database with ddl and returns the Spec of rules
// over its catalog as the Pilot reads it.
func target(t *testing.T, ddl ...string) *shadow.Spec {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, d := range ddl {
		if _, err := conn.Exec(t.Context(), d, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := pilot.LoadCatalog(t.Context(), conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return shadow.FromBound("shop", "agent:demo", cat.SearchPath(), []shadow.Rules{rules}, cat)
}

func newManager(t *testing.T) *shadow.Manager {
	t.Helper()
	m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute})
	if err != nil {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// query runs a catalog statement through Check and the Manager, and
// renders its answer: columns with their types, rows, tag.
func query(t *testing.T, m *shadow.Manager, spec *shadow.Spec, sql string) string {
	t.Helper()
	tree, err := pg.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	if err := shadow.Check(tree); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	res, err := m.Query(t.Context(), spec, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	var b strings.Builder
	for _, f := range res.Fields {
		fmt.Fprintf(&b, "%s:%d ", f.Name, f.OID)
	}
	b.WriteString("\n")
	for _, r := range res.Rows {
		for _, v := range r {
			if v == nil {
				b.WriteString("NULL|")
			} else {
				b.WriteString(string(v) + "|")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(res.Tag)
	return b.String()
}

func rows(t *testing.T, m *shadow.Manager, spec *shadow.Spec, sql string) string {
	t.Helper()
	s := query(t, m, spec, sql)
	_, body, _ := strings.Cut(s, "\n")
	return body[:strings.LastIndexByte(body, '\n')+1]
}

// TestShadow holds the shadow to what the bound names, with PostgreSQL's
// own catalog semantics.
func TestShadow(t *testing.T) {
	t.Parallel()
	spec := target(t, targetDDL)
	m := newManager(t)
	for _, c := range []struct{ sql, want string }{
		{"SELECT current_database(), current_user, current_schemas(false)", "shop|agent:demo|{public}|\n"},
		{"SELECT datname FROM pg_catalog.pg_database ORDER BY 1", "shop|\n"},
		{"SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2",
			"ops|jobs|\npublic|orders|\n"},
		// Only listed columns, real built-in types, text for the enum,
		// NOT NULL where the target has it.
		{"SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY table_name, ordinal_position",
			"jobs|id|integer|NO|\njobs|owner|text|NO|\norders|id|bigint|NO|\norders|status|text|NO|\norders|note|character varying|YES|\norders|mood|text|YES|\norders|created_at|timestamp with time zone|NO|\n"},
		// Keys over listed columns only: not the expression index, not
		// the key with an unlisted column.
		{"SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('public', 'ops') ORDER BY 1",
			"jobs_pkey|\norders_pkey|\norders_status_note|\n"},
		// The bound's privileges, by column.
		{"SELECT has_column_privilege('public.orders', 'status', 'UPDATE'), has_column_privilege('public.orders', 'note', 'UPDATE'), has_table_privilege('ops.jobs', 'DELETE'), has_table_privilege('public.orders', 'DELETE')",
			"t|f|t|f|\n"},
		{"SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname IN ('hidden', 'more', 'absent')", "0|\n"},
	} {
		if got := rows(t, m, spec, c.sql); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.sql, got, c.want)
		}
	}
	// Reads only, and nothing outside: the role cannot, even past Check.
	for _, sql := range []string{
		"SELECT pg_catalog.pg_read_file('/etc/passwd')",
		"SELECT pg_catalog.lo_create(0)",
		"SELECT pg_catalog.lo_import('/etc/passwd')",
		"CREATE TABLE public.x (id int)",
		"SELECT pg_catalog.pg_sleep(5)",
	} {
		_, err := m.Query(t.Context(), spec, sql)
		var pgErr *pgconn.PgError
		if err == nil {
			t.Errorf("%s ran", sql)
		} else if !errors.As(err, &pgErr) {
			t.Errorf("%s: %v", sql, err)
		}
	}
	for _, sql := range []string{
		"SELECT pg_read_file('/etc/passwd')",
		"SELECT * FROM pg_ls_dir('.')",
		"SELECT lo_import('/etc/passwd')",
		"SELECT query_to_xml('select 1', true, true, '')",
		"SELECT pg_sleep(10)",
		"SELECT * FROM orders",
		"SELECT * FROM pg_class, public.orders",
		"WITH x AS (DELETE FROM pg_class RETURNING 1) SELECT 1",
		"SELECT relname INTO TEMP t FROM pg_class",
		"SELECT relname FROM pg_class FOR UPDATE",
		"DELETE FROM pg_class",
		"SELECT 1; SELECT 2",
	} {
		tree, err := pg.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		var r *shadow.RefusedError
		if err := shadow.Check(tree); !errors.As(err, &r) {
			t.Errorf("%s: not refused: %v", sql, err)
		}
	}
	// A statement's own CTE is a relation it may read (Sequelize's type
	// lookup); a CTE that reads a table of the bound is not.
	for sql, ok := range map[string]bool{
		"WITH ranges AS (SELECT r.rngtypid, t.typname FROM pg_range r LEFT JOIN pg_type t ON t.oid = r.rngtypid) SELECT t.typname, ranges.typname FROM pg_type t LEFT JOIN ranges ON t.oid = ranges.rngtypid": true,
		"WITH x AS (SELECT * FROM public.orders) SELECT * FROM pg_class, x": false,
	} {
		tree, err := pg.Parse(sql)
		if err != nil {
			t.Fatal(err)
		}
		if err := shadow.Check(tree); (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", sql, err, ok)
		}
	}
}

// catalogQueries are what clients send to reflect a schema: psql's \dt
// and \d orders, SQLAlchemy's and JDBC's lookups, information_schema.
var catalogQueries = []string{
	// psql \dt
	`SELECT n.nspname as "Schema", c.relname as "Name", CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type", pg_catalog.pg_get_userbyid(c.relowner) as "Owner" FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam WHERE c.relkind IN ('r','p','') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' AND n.nspname <> 'information_schema' AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1,2`,
	// psql \d orders
	`SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname OPERATOR(pg_catalog.~) '^(orders)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3`,
	`SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true) FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef), a.attnotnull, (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation, a.attidentity, a.attgenerated FROM pg_catalog.pg_attribute a WHERE a.attrelid = 'public.orders'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
	`SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true), pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x')) WHERE c.oid = 'public.orders'::regclass AND c.oid = i.indrelid AND i.indexrelid = c2.oid ORDER BY i.indisprimary DESC, c2.relname`,
	`SELECT table_schema, table_name, column_name, ordinal_position, data_type, is_nullable, character_maximum_length FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 4`,
	`SELECT * FROM information_schema.table_constraints WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY constraint_name`,
	`SELECT * FROM information_schema.key_column_usage ORDER BY constraint_name, ordinal_position`,
	`SELECT * FROM information_schema.column_privileges WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY table_name, column_name, privilege_type`,
	`SELECT c.oid, c.relname, c.relkind, c.relnatts, c.relhasindex, c.relpages, c.reltuples FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 2`,
	`SELECT t.oid, t.typname FROM pg_catalog.pg_type t WHERE t.oid >= 16384 ORDER BY 1`,
	`SELECT oid, nspname FROM pg_catalog.pg_namespace ORDER BY 1`,
	`SELECT datname, datdba, encoding, datcollate FROM pg_catalog.pg_database`,
	`SELECT count(*) FROM pg_catalog.pg_class`,
	`SELECT count(*) FROM pg_catalog.pg_attribute`,
	`SELECT pg_catalog.pg_relation_size('public.orders'), pg_catalog.pg_total_relation_size('public.orders')`,
}

// TestTwins is invariant 10 for the catalog: two targets that differ only
// outside the bound give byte-identical answers, each built by its own
// Manager (its own server).
func TestTwins(t *testing.T) {
	t.Parallel()
	a := target(t, targetDDL)
	b := target(t, targetDDL, twinDDL)
	if a.Key() != b.Key() {
		t.Fatalf("the twins' specs differ:\n%+v\n%+v", a, b)
	}
	ma, mb := newManager(t), newManager(t)
	for _, sql := range catalogQueries {
		ga, gb := query(t, ma, a, sql), query(t, mb, b, sql)
		if ga != gb {
			t.Errorf("%s:\n%s\n---\n%s", sql, ga, gb)
		}
	}
	// And the bound shows: the twins' answer is not empty.
	if got := query(t, ma, a, catalogQueries[0]); !strings.Contains(got, "orders|table|postgres") {
		t.Errorf("\\dt: %s", got)
	}
}

// TestFollowsBound: a changed bound is another shadow database.
func TestFollowsBound(t *testing.T) {
	t.Parallel()
	spec := target(t, targetDDL)
	m := newManager(t)
	if got := rows(t, m, spec, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders'"); got != "5|\n" {
		t.Fatalf("before: %q", got)
	}
	fewer := *spec
	fewer.Tables = spec.Tables[1:] // public.orders only
	if got := rows(t, m, &fewer, "SELECT string_agg(table_schema || '.' || table_name, ',') FROM information_schema.tables WHERE table_schema IN ('ops', 'public')"); got != "public.orders|\n" {
		t.Fatalf("after: %q", got)
	}
	if m.Servers() != 2 {
		t.Fatalf("servers: %d", m.Servers())
	}
}

// TestNoBoundInTemplate: the servers of one Manager start from one
// template, and a bound served before leaves nothing in a later server:
// its answers are byte-identical to those of a Manager that served
// nothing before.
func TestNoBoundInTemplate(t *testing.T) {
	t.Parallel()
	first := target(t, targetDDL)
	later := *first
	later.Target, later.Role = "depot", "agent:other"
	later.Tables = first.Tables[1:] // public.orders only
	used, fresh := newManager(t), newManager(t)
	if got := rows(t, used, first, "SELECT count(*) FROM information_schema.tables WHERE table_schema IN ('ops', 'public')"); got != "2|\n" {
		t.Fatalf("first bound: %q", got)
	}
	queries := append([]string{
		"SELECT current_database(), current_user",
		"SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_catalog.pg_roles",
		"SELECT string_agg(datname, ',') FROM pg_catalog.pg_database",
		"SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'ops'",
		"SELECT d.datname, pg_catalog.shobj_description(d.oid, 'pg_database') FROM pg_catalog.pg_database d",
	}, catalogQueries...)
	for _, sql := range queries {
		gu, gf := query(t, used, &later, sql), query(t, fresh, &later, sql)
		if gu != gf {
			t.Errorf("%s:\n%s\n--- a fresh Manager:\n%s", sql, gu, gf)
		}
	}
	for sql, want := range map[string]string{
		"SELECT current_database(), current_user":                               "depot|agent:other|\n",
		"SELECT string_agg(datname, ',') FROM pg_catalog.pg_database":           "depot|\n",
		"SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = 'agent:demo'": "0|\n",
		"SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = 'ops'":    "0|\n",
		// Not initdb's comment on the postgres database it was renamed from.
		"SELECT pg_catalog.shobj_description(d.oid, 'pg_database') IS NULL FROM pg_catalog.pg_database d": "t|\n",
	} {
		if got := rows(t, used, &later, sql); got != want {
			t.Errorf("%s: got %q, want %q", sql, got, want)
		}
	}
	if used.Servers() != 2 {
		t.Fatalf("servers: %d", used.Servers())
	}
}

// TestOneValuePastMaxBytesIsNotRead: a catalog answer is capped at
// MaxBytes, and one value past it is refused before the node reads it.
// Before, the cap was checked once a row was in memory, and a row may
// be as large as a protocol message (1 GiB): SELECT repeat('x', n) FROM
// pg_am made the node allocate n bytes per query, four at once per
// shadow server. Found in review i24.
func TestOneValuePastMaxBytesIsNotRead(t *testing.T) {
	m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute, MaxBytes: 1 << 20, StatementTimeout: 20 * time.Second})
	if err != nil {
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	spec := target(t, targetDDL)
	spec.Role = "agent_big"
	const n = 256 << 20
	sql := fmt.Sprintf("SELECT repeat('x', %d) FROM pg_catalog.pg_am LIMIT 1", n)
	tree, err := pg.Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	if err := shadow.Check(tree); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	// Warm: the shadow server starts on first use.
	if _, err := m.Query(t.Context(), spec, "SELECT 1 FROM pg_catalog.pg_am LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = m.Query(t.Context(), spec, sql)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, shadow.ErrTooLarge) {
		t.Errorf("%s: %v, want shadow.ErrTooLarge", sql, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > n/2 {
		t.Errorf("%s: the node allocated %d MiB reading an answer capped at 1 MiB", sql, grew>>20)
	}
	// The pool still answers after the refused one.
	if _, err := m.Query(t.Context(), spec, "SELECT 1 FROM pg_catalog.pg_am LIMIT 1"); err != nil {
		t.Errorf("after a refused answer: %v", err)
	}
}
