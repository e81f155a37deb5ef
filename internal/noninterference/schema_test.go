package noninterference_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
)

// schemaOutside is what twin B's target has and twin A's does not: a
// column in a table the bound reads and writes, one in a table it does
// not name, a whole table, and a type. All of it is outside the bound.
const schemaOutside = `ALTER TABLE public.orders ADD COLUMN internal_note text DEFAULT 'hold';
ALTER TABLE public.orders ADD COLUMN risk_score integer;
CREATE TABLE public.payroll (id bigint PRIMARY KEY, salary integer NOT NULL);
INSERT INTO public.payroll VALUES (1, 100000);
CREATE TYPE public.secret_kind AS ENUM ('a', 'b');
ALTER TABLE public.customers ADD COLUMN kind public.secret_kind;`

const sameTimes = `UPDATE public.orders SET created_at = timestamptz '2026-01-01 00:00:00+00' + id * interval '1 minute',
	updated_at = timestamptz '2026-01-02 00:00:00+00' + id * interval '1 minute';
UPDATE public.customers SET updated_at = timestamptz '2026-01-03 00:00:00+00' + id * interval '1 minute';`

// schemaProbes are statements an agent would send to learn the schema
// outside its bound: a hidden column by name, with *, with a whole-row
// reference, in RETURNING, through an INSERT without a column list; a
// hidden table by name; names that exist nowhere, to compare with.
var schemaProbes = []string{
	"SELECT * FROM orders WHERE id = 3",
	"SELECT o.* FROM orders o WHERE id = 3",
	"SELECT internal_note FROM orders WHERE id = 3",
	"SELECT no_such_column FROM orders WHERE id = 3",
	"SELECT id FROM orders WHERE risk_score > 0",
	"SELECT to_jsonb(o) FROM orders o WHERE id = 3",
	"SELECT o::text FROM orders o WHERE id = 3",
	"SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = 3",
	"SELECT salary FROM payroll",
	"SELECT count(*) FROM payroll",
	"SELECT * FROM no_such_table",
	"SELECT kind FROM customers",
	"UPDATE orders SET status = 'retrying', updated_at = '2026-02-01' WHERE id = 5 RETURNING *",
	"UPDATE orders SET status = 'retrying', updated_at = '2026-02-01' WHERE id = 6 RETURNING id, status",
	"UPDATE orders SET internal_note = 'x' WHERE id = 7",
	"INSERT INTO orders VALUES (9001, 1, 'pending', 100, '2026-01-01', '2026-01-01')",
	"DELETE FROM payroll WHERE id = 1",
}

// TestSchemaOutsideTheBound: two targets that differ only in schema
// outside the agent's bound (columns, a table, a type) look identical to
// the agent through every interface: each probe's answer over HTTP, MCP
// and the wire front (simple and extended protocol, the statement's
// description), its request, and what it can learn of its scope
// (describe_tables, its delegations). Before the statement path checked
// against the bound's own catalog, `SELECT *` ran on one twin and was
// referred on the other naming the hidden column, and a hidden column's
// or table's reason said "does not let the statement read" where a
// missing one said "does not exist".
func TestSchemaOutsideTheBound(t *testing.T) {
	t.Parallel()
	sides := schemaTwins(t)
	var err error
	// The delegations compile to the same bytes on both (so the same ids):
	// a bound records nothing of the target outside it.
	y, _ := sides[0].sys.SignedExample(t, "unstick-orders.yaml")
	canon := [2][]byte{gatewaytest.Canonical(t, y, sides[0].sys.Pilot.Catalog()), gatewaytest.Canonical(t, y, sides[1].sys.Pilot.Catalog())}
	if !bytes.Equal(canon[0], canon[1]) {
		t.Fatalf("the delegation compiles differently on the twins:\n%s\n%s", canon[0], canon[1])
	}
	for _, s := range sides {
		s.sys.AddExamples(t)
	}
	ctx := t.Context()
	var scopes [2]map[string]any
	for i, s := range sides {
		if scopes[i], err = s.scope(ctx); err != nil {
			t.Fatal(err)
		}
	}
	compareObs(t, "the agent's scope", scopes[0], scopes[1])
	// The wire front with its shadow catalog, one per side (each built
	// from its own target's catalog): catalog queries too.
	for _, s := range sides {
		m, err := shadow.New(shadow.Config{StartTimeout: 3 * time.Minute})
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("shadow catalog: %v", err)
			}
			t.Skipf("shadow catalog: %v", err)
		}
		t.Cleanup(func() { _ = m.Close() })
		s.pg = startWireWith(t, s.sys, func(c *pgwire.Config) { c.Catalog = m })
	}
	probes := append(append([]string(nil), schemaProbes...), catalogProbes(rand.New(rand.NewPCG(7, 24)), 40)...)
	answered := 0
	for _, sql := range probes {
		var obs [2]map[string]any
		for i, s := range sides {
			a, err := s.observe(ctx, stmt{sql: sql, op: "probe"}, true)
			if err != nil {
				t.Fatalf("%s on %s: %v", sql, s.name, err)
			}
			obs[i] = a.obs
			time.Sleep(time.Millisecond)
		}
		compareObs(t, sql, obs[0], obs[1])
		if q, _ := obs[0]["pgwire query"].(map[string]any); q["error"] == nil && q["rows"] != nil {
			answered++
		}
	}
	// The catalog queries were answered (from the shadow), not refused
	// alike on both sides.
	if answered < len(schemaProbes)/2+20 {
		t.Errorf("only %d of %d probes were answered over the wire front: the catalog probes did not reach the shadow", answered, len(probes))
	}
}

// schemaTwins starts a side on each of two shop targets with the same
// rows and times, B's with schemaOutside too.
func schemaTwins(t *testing.T) [2]*side {
	t.Helper()
	srv := shared.Server(t)
	keys := gatewaytest.NewKeys(t)
	dsns := [2]string{pgtmptest.NewDatabase(t, srv), pgtmptest.NewDatabase(t, srv)}
	for i, dsn := range dsns {
		gatewaytest.LoadShop(t, dsn)
		// The same times on both: the shop's rows are dated from now().
		sqls := []string{sameTimes}
		if i == 1 {
			sqls = append(sqls, schemaOutside)
		}
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range sqls {
			if _, err := conn.Exec(t.Context(), q, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close(t.Context())
	}
	var sides [2]*side
	for i, name := range []string{"A", "B"} {
		sides[i] = startSide(t, name, dsns[i], keys)
	}
	return sides
}

func compareObs(t *testing.T, what string, a, b map[string]any) {
	t.Helper()
	var diffs []string
	diff(normalize(a, true), normalize(b, true), "", &diffs, 12)
	if len(diffs) > 0 {
		t.Errorf("%s: the twins differ only outside the bound, and the agent tells them apart:\n  %s", what, joinLines(diffs))
	}
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, l := range s {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// catalogProbes are n catalog queries drawn at random (seeded) from what
// clients reflect with: relations, columns, types, keys and privileges,
// by name pattern, with and without the system schemas.
func catalogProbes(rng *rand.Rand, n int) []string {
	names := []string{"orders", "customers", "payroll", "internal_note", "risk_score", "kind", "secret_kind", "salary", "%", "%o%", "pay%"}
	templates := []string{
		"SELECT table_schema, table_name, table_type FROM information_schema.tables WHERE table_name LIKE '%s' ORDER BY 1, 2",
		"SELECT table_name, column_name, data_type, is_nullable, ordinal_position FROM information_schema.columns WHERE table_schema = 'public' AND (table_name LIKE '%[1]s' OR column_name LIKE '%[1]s') ORDER BY 1, 5",
		"SELECT c.relname, c.relkind, c.relnatts FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname LIKE '%s' ORDER BY 1",
		"SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid WHERE c.relname LIKE '%s' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
		"SELECT typname, typtype FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public' AND typname LIKE '%s' ORDER BY 1",
		"SELECT conname, contype, pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint WHERE conrelid IN (SELECT oid FROM pg_catalog.pg_class WHERE relname LIKE '%s') ORDER BY 1",
		"SELECT indexrelid::regclass::text, pg_catalog.pg_get_indexdef(indexrelid) FROM pg_catalog.pg_index WHERE indrelid IN (SELECT oid FROM pg_catalog.pg_class WHERE relname LIKE '%s') ORDER BY 1",
		"SELECT count(*) FROM pg_catalog.pg_class WHERE relname LIKE '%s'",
		"SELECT grantee, table_name, column_name, privilege_type FROM information_schema.column_privileges WHERE table_schema = 'public' AND table_name LIKE '%s' ORDER BY 1, 2, 3, 4",
		"SELECT to_regclass('public.%s') IS NULL",
		"SELECT datname FROM pg_catalog.pg_database ORDER BY 1",
		"SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname NOT LIKE 'pg_%%' ORDER BY 1",
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(templates[rng.IntN(len(templates))], names[rng.IntN(len(names))])
	}
	return out
}

// fromItemProbes are writes whose FROM (or USING) item has a column named
// as a column of the written table that the bound leaves out. The check,
// against the bound's catalog, resolves the unqualified name to the FROM
// item; the target, whose written table (itself, or the Pilot's fence
// view of it) has every column, finds the name twice and fails with
// 42702 (ambiguous column) where the column exists, and runs where it
// does not.
var fromItemProbes = []string{
	"UPDATE orders SET status = 'retrying', updated_at = '2026-02-01' FROM (SELECT 1 AS internal_note) x WHERE orders.id = 5 AND internal_note = 1",
	"UPDATE orders SET status = 'retrying', updated_at = '2026-02-01' FROM (SELECT 6 AS risk_score) x WHERE orders.id = risk_score RETURNING orders.id",
	"UPDATE orders SET status = 'retrying', updated_at = '2026-02-01' FROM (SELECT 7 AS n) x WHERE orders.id = n RETURNING orders.id",
	"UPDATE orders SET status = 'retrying', updated_at = '2026-02-01' FROM (SELECT 8 AS internal_note) x WHERE orders.id = x.internal_note RETURNING orders.id",
	"DELETE FROM orders USING (SELECT 9 AS risk_score) x WHERE orders.id = risk_score",
}

// TestWriteFromItemsOutsideTheBound: an unqualified column of a write's
// FROM item answers the same on twins one of which has a column of that
// name, outside the bound, in the written table (review i24: before the
// guard qualified such names, the twin with the hidden column answered
// an error and the other ran the write, telling the agent the column
// exists).
func TestWriteFromItemsOutsideTheBound(t *testing.T) {
	t.Parallel()
	sides := schemaTwins(t)
	for _, s := range sides {
		s.sys.AddExamples(t)
	}
	ctx := t.Context()
	ran := 0
	for _, sql := range fromItemProbes {
		var obs [2]map[string]any
		var outcome string
		for i, s := range sides {
			a, err := s.observe(ctx, stmt{sql: sql, op: "probe"}, true)
			if err != nil {
				t.Fatalf("%s on %s: %v", sql, s.name, err)
			}
			obs[i] = a.obs
			if i == 0 {
				outcome = a.outcome
			}
			time.Sleep(time.Millisecond)
		}
		compareObs(t, sql, obs[0], obs[1])
		if outcome == "executed" {
			ran++
		}
	}
	// The qualified probe runs: the probes reach the target rather than
	// being refused alike by the check.
	if ran == 0 {
		t.Errorf("no probe executed on twin A: the probes did not reach the target")
	}
}
