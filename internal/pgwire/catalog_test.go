package pgwire_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
)

// simpleRows runs sql over the simple protocol and renders the answer:
// each column's name and type OID, then each row's text values.
func simpleRows(t *testing.T, c *pgx.Conn, sql string) (string, error) {
	t.Helper()
	results, err := c.PgConn().Exec(t.Context(), sql).ReadAll()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, r := range results {
		for _, f := range r.FieldDescriptions {
			fmt.Fprintf(&b, "%s:%d ", f.Name, f.DataTypeOID)
		}
		b.WriteString("\n")
		for _, row := range r.Rows {
			for _, v := range row {
				if v == nil {
					b.WriteString("NULL")
				}
				b.Write(v)
				b.WriteString("|")
			}
			b.WriteString("\n")
		}
		b.WriteString(r.CommandTag.String())
	}
	return b.String(), nil
}

// body is a rendered answer's rows alone.
func body(s string) string {
	_, rest, _ := strings.Cut(s, "\n")
	return rest[:strings.LastIndexByte(rest, '\n')+1]
}

// TestCatalog: catalog queries are answered from the shadow catalog of
// the session's bound, with PostgreSQL's semantics, over both protocols.
func TestCatalog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	before := f.sys.Verify(t).Entries
	for _, q := range []struct{ sql, want string }{
		{"SELECT datname FROM pg_catalog.pg_database", "shop|\n"},
		{"SELECT current_database() FROM pg_catalog.pg_class LIMIT 1", "shop|\n"},
		// Exactly the listed columns: no total_cents.
		{"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'orders' ORDER BY ordinal_position",
			"id|bigint|\ncustomer_id|bigint|\nstatus|text|\ncreated_at|timestamp with time zone|\nupdated_at|timestamp with time zone|\n"},
		// The enum is text, as the front describes its values.
		{"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'moods' ORDER BY ordinal_position",
			"id|bigint|\nm|text|\nms|text|\n"},
		// A table outside the bound does not exist.
		{"SELECT count(*) FROM pg_catalog.pg_class WHERE relname = 'secrets'", "0|\n"},
		{"SELECT indexname FROM pg_indexes WHERE tablename = 'orders'", "orders_pkey|\n"},
		{"SELECT has_column_privilege('public.orders', 'status', 'UPDATE'), has_column_privilege('public.orders', 'customer_id', 'UPDATE')", "t|f|\n"},
	} {
		got, err := simpleRows(t, c, q.sql)
		if err != nil || body(got) != q.want {
			t.Errorf("%s: %q %v, want %q", q.sql, got, err, q.want)
		}
	}
	// The extended protocol: Describe gives the real row description and
	// parameter types, from the shadow.
	var rel string
	var natts int16
	if err := c.QueryRow(t.Context(), "SELECT relname, relnatts FROM pg_catalog.pg_class WHERE relname = $1", "orders").Scan(&rel, &natts); err != nil || rel != "orders" || natts != 5 {
		t.Fatalf("extended: %q %d %v", rel, natts, err)
	}
	sd, err := c.Prepare(t.Context(), "cat", "SELECT oid, relname FROM pg_catalog.pg_class WHERE relname = $1")
	if err != nil {
		t.Fatal(err)
	}
	if len(sd.ParamOIDs) != 1 || sd.ParamOIDs[0] != 19 || len(sd.Fields) != 2 || sd.Fields[0].DataTypeOID != 26 || sd.Fields[1].DataTypeOID != 19 {
		t.Fatalf("describe: %+v %+v", sd.ParamOIDs, sd.Fields)
	}
	// Refused: what is not a plain read of the catalog.
	for _, sql := range []string{
		"SELECT * FROM pg_catalog.pg_class, orders",
		"SELECT pg_read_file('/etc/passwd') FROM pg_catalog.pg_class",
		"SELECT lo_import('/etc/passwd') FROM pg_class",
	} {
		_, err := simpleRows(t, c, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "0A000" {
			t.Errorf("%s: %v", sql, err)
		}
	}
	// The shadow's own errors pass through: it holds only the bound.
	_, err = simpleRows(t, c, "SELECT 'public.secrets'::regclass FROM pg_class LIMIT 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("regclass of a table outside the bound: %v", err)
	}
	// Nothing of it is a decision: the logbook has no entry more.
	if after := f.sys.Verify(t).Entries; after != before {
		t.Errorf("the logbook went from %d to %d entries", before, after)
	}
}

// TestCatalogOff: a front without a shadow catalog refuses catalog
// queries, clearly.
func TestCatalogOff(t *testing.T) {
	t.Parallel()
	f := newFixtureFront(t, nil, func(c *pgwire.Config) { c.Catalog = nil })
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	_, err := simpleRows(t, c, "SELECT relname FROM pg_catalog.pg_class")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "0A000" || !strings.Contains(pgErr.Message, "catalog queries") {
		t.Fatalf("%v", err)
	}
}

// twinDDL changes the target only outside agent:demo's bound: a table
// no rule names, a column no rule lists, a key over it, other rows.
const twinDDL = `
CREATE TABLE public.audit_trail (id bigint PRIMARY KEY, note text);
ALTER TABLE public.orders ADD COLUMN internal_note text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX orders_internal ON public.orders (internal_note, id);
ALTER TABLE public.customers ADD COLUMN vip boolean;
INSERT INTO public.secrets VALUES (99, 'zz');
UPDATE public.customers SET email = 'x@y' WHERE id = 1;
DELETE FROM public.kinds;`

// twinCatalogQueries are the reflection queries of psql, SQLAlchemy,
// JDBC and asyncpg, in spirit: the twins must answer them alike.
var twinCatalogQueries = []string{
	`SELECT n.nspname, c.relname, c.relkind, pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r','p','') AND n.nspname <> 'pg_catalog' AND n.nspname !~ '^pg_toast' AND n.nspname <> 'information_schema' AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1,2`,
	`SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attnum FROM pg_catalog.pg_attribute a WHERE a.attrelid = 'public.orders'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
	`SELECT c2.relname, i.indisprimary, i.indisunique, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true), pg_catalog.pg_get_constraintdef(con.oid, true) FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x')) WHERE c.oid = 'public.orders'::regclass AND c.oid = i.indrelid AND i.indexrelid = c2.oid ORDER BY i.indisprimary DESC, c2.relname`,
	`SELECT table_name, column_name, ordinal_position, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 3`,
	`SELECT * FROM information_schema.table_constraints WHERE table_schema = 'public' ORDER BY constraint_name`,
	`SELECT * FROM information_schema.column_privileges WHERE table_schema = 'public' ORDER BY table_name, column_name, privilege_type`,
	`SELECT c.oid, c.relname, c.relnatts, c.reltuples, c.relpages FROM pg_catalog.pg_class c ORDER BY c.oid DESC LIMIT 20`,
	`SELECT t.oid, t.typname, t.typtype FROM pg_catalog.pg_type t WHERE t.oid >= 16384 ORDER BY 1`,
	`SELECT count(*), max(oid) FROM pg_catalog.pg_class`,
	`SELECT datname, pg_catalog.pg_database_size(datname) > 0 FROM pg_catalog.pg_database`,
	`SELECT pg_catalog.pg_relation_size('public.orders'), pg_catalog.pg_total_relation_size('public.customers')`,
	`SELECT 'public.audit_trail'::regclass FROM pg_catalog.pg_class LIMIT 1`,
}

// TestCatalogTwins is invariant 10 for the catalog over the wire: two
// targets that differ only outside the bound, each with its own shadow
// catalog, give byte-identical answers (errors included) to the same
// catalog queries, and psql's \d alike.
func TestCatalogTwins(t *testing.T) {
	t.Parallel()
	own := func(c *pgwire.Config) {
		m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute})
		if err != nil {
			t.Skipf("shadow catalog: %v", err)
		}
		t.Cleanup(func() { m.Close() })
		c.Catalog = m
	}
	a := newFixtureFront(t, nil, own)
	b := newFixtureFront(t, nil, own)
	tb, err := pgx.Connect(t.Context(), b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Exec(t.Context(), twinDDL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	tb.Close(t.Context())
	b.sys.RefreshCatalog(t)
	ca := a.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	cb := b.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")
	for _, sql := range twinCatalogQueries {
		ga, ea := simpleRows(t, ca, sql)
		gb, eb := simpleRows(t, cb, sql)
		if ga != gb || fmt.Sprint(ea) != fmt.Sprint(eb) {
			t.Errorf("%s:\n%s %v\n---\n%s %v", sql, ga, ea, gb, eb)
		}
		if sql == twinCatalogQueries[0] && !strings.Contains(ga, "orders") {
			t.Errorf("the bound's tables are missing: %s", ga)
		}
	}
	if bin, err := exec.LookPath("psql"); err == nil {
		for _, meta := range []string{`\d orders`, `\d+ customers`, `\dt`, `\l`, `\dn`} {
			oa, _, _ := psql(t, bin, a.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable"), "-c", meta)
			ob, _, _ := psql(t, bin, b.url(gatewaytest.Agent, gatewaytest.AgentToken, "disable"), "-c", meta)
			if oa != ob || oa == "" {
				t.Errorf("%s:\n%s\n---\n%s", meta, oa, ob)
			}
		}
	}
}
