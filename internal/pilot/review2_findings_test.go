package pilot_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestReview2SchemaQualifiedColumnRefs: the static check accepts a column
// qualified with its table's schema (public.orders.id over FROM
// public.orders), and before every table went through a Pilot view such a
// statement on a table without a fence ran. The Pilot now replaces the
// reference by harbormaster.fence_... AS orders, which PostgreSQL does not
// match against public.orders.id ("invalid reference to FROM-clause
// entry"), so a statement the check passed is refused by the target. The
// same holds of the subquery an unfenced table is now read as.
func TestReview2SchemaQualifiedColumnRefs(t *testing.T) {
	// Fixed: BuildGuards writes such a column as table.column where only that table bears the name.
	f := newFixture(t)
	for _, sql := range []string{
		"SELECT public.orders.id FROM public.orders ORDER BY 1 LIMIT 3",
		"SELECT public.orders.id FROM orders ORDER BY public.orders.id LIMIT 3",
		"SELECT public.orders.id FROM orders WHERE EXISTS (SELECT 1 FROM orders o2 WHERE o2.id = public.orders.id) ORDER BY 1 LIMIT 3",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Executed || len(res.Rows) != 3 {
			t.Errorf("%s: the Pilot answered %s %s with %d rows (ran %s)", sql, res.Outcome, res.Code, len(res.Rows), res.ExecutedSQL)
		}
	}
	// Through a fence view: the EU customers only.
	res, err := f.pilot.Execute(t.Context(), f.request(t, "fix-name-typos.yaml", "SELECT public.customers.name FROM customers WHERE public.customers.id < 30"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) == 0 || !strings.Contains(res.ExecutedSQL, "harbormaster.fence_") {
		t.Errorf("a schema-qualified column of a fenced table: %s %s %d rows (ran %s)", res.Outcome, res.Code, len(res.Rows), res.ExecutedSQL)
	}
}

// TestReview2ColumnGrantsThroughPlainViews: docs/operations.md asks for a
// role with "exactly the privileges on the target tables that the
// delegations grant", which for unstick-orders is SELECT on five of
// orders' six columns. Every reference to a table, fenced or not, now goes
// through a security_invoker view that selects every column the catalog
// lists, and PostgreSQL checks the view's base-table columns as the
// invoker, so a read of id and status is refused (permission denied for
// table orders) where it ran before.
func TestReview2ColumnGrantsThroughPlainViews(t *testing.T) {
	// Fixed: an unfenced table is read as a subquery of its rule's columns.
	f := newFixture(t)
	ctx := t.Context()
	admin := f.pilotConn(t)
	if _, err := admin.Exec(ctx, `CREATE ROLE hm_cols NOLOGIN;
		GRANT USAGE ON SCHEMA public TO hm_cols;
		GRANT SELECT (id, customer_id, status, created_at, updated_at) ON public.orders TO hm_cols;
		GRANT UPDATE (status, updated_at) ON public.orders TO hm_cols;
		GRANT USAGE ON SCHEMA harbormaster TO hm_cols;
		GRANT SELECT ON ALL TABLES IN SCHEMA harbormaster TO hm_cols`, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(ctx, pilot.Config{Target: "shop", DSN: f.dsn, Role: "hm_cols"}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Execute(ctx, f.request(t, "unstick-orders.yaml", "SELECT id, status FROM orders WHERE id = 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) != 1 {
		t.Errorf("a read of two granted columns, as a role granted the delegation's columns: %s %s %s", res.Outcome, res.Code, res.Detail)
	}
}

// TestReview2MigrationAfterARead: a read of a table without a fence now
// leaves a Pilot view that depends on every one of its columns, so the
// application's own migration (ALTER TABLE orders DROP COLUMN total_cents,
// a column no delegation names) fails with "other objects depend on it"
// after any agent read orders. docs/operations.md says so only of fenced
// tables.
func TestReview2MigrationAfterARead(t *testing.T) {
	// Fixed: an unfenced table leaves no view behind.
	f := newFixture(t)
	ctx := t.Context()
	res, err := f.pilot.Execute(ctx, f.request(t, "unstick-orders.yaml", "SELECT id, status FROM orders WHERE id = 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed {
		t.Fatalf("read: %s %s", res.Outcome, res.Code)
	}
	admin := f.pilotConn(t)
	if _, err := admin.Exec(ctx, `ALTER TABLE public.orders DROP COLUMN total_cents`); err != nil {
		t.Errorf("the application's migration after an agent's read of an unfenced table: %v", err)
	}
}

// TestReview2JSONPastFloat64: the Pilot keeps json and jsonb raw so that
// no number loses digits, but rows.Values() decodes every column first,
// and pgx decodes json through encoding/json into float64: a value such
// as 1e400, valid json and jsonb, fails the whole answer.
func TestReview2JSONPastFloat64(t *testing.T) {
	// Fixed: json and jsonb decode their numbers as json.Number.
	f := newFixture(t)
	for _, sql := range []string{
		`SELECT id, '{"n": 1e400}'::jsonb AS j FROM orders WHERE id = 3`,
		`SELECT id, '[1e400]'::json AS j FROM orders WHERE id = 3`,
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Executed || len(res.Rows) != 1 {
			t.Errorf("%s: %s %s %s", sql, res.Outcome, res.Code, res.Detail)
		}
	}
}

// TestReview2SetDefaultThroughTheView: an UPDATE's target now always goes
// through a Pilot view, and a view column has no default: PostgreSQL
// rewrites SET updated_at = DEFAULT on the view to NULL, not to the
// table's now(). Before, an unfenced target was the table and took its
// default; the Pilot must not run a statement meaning something else than
// the one checked (invariant 4): it runs with the table's default, or
// refuses.
func TestReview2SetDefaultThroughTheView(t *testing.T) {
	f := newFixture(t)
	admin := f.pilotConn(t)
	// A nullable column with a default: NULL is then written silently.
	if _, err := admin.Exec(t.Context(), `ALTER TABLE public.orders ALTER COLUMN updated_at DROP NOT NULL`); err != nil {
		t.Fatal(err)
	}
	res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml",
		"UPDATE orders SET status = 'retrying', updated_at = DEFAULT WHERE id = 24 RETURNING id, updated_at"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == pilot.Executed {
		if len(res.Rows) != 1 || res.Rows[0]["updated_at"] == nil {
			t.Errorf("SET updated_at = DEFAULT wrote %v, not the table's default now()", res.Rows)
		}
	}
	var n int
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM public.orders WHERE updated_at IS NULL`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows with updated_at NULL (%v)", n, err)
	}
}

// TestUnqualifyColumns: a schema-qualified column is rewritten only where
// exactly one unaliased reference to its table bears the name; any other
// name of that spelling (an alias, a CTE) could capture table.column, so
// the statement refers instead of running something other than checked.
func TestUnqualifyColumns(t *testing.T) {
	f := newFixture(t)
	cat := f.pilot.Catalog()
	for _, c := range []struct{ sql, want string }{
		{"SELECT public.orders.id FROM orders", "SELECT orders.id FROM orders"},
		{"SELECT public.orders.id FROM public.orders WHERE public.orders.status = 'x'", "SELECT orders.id FROM public.orders WHERE orders.status = 'x'"},
		{"SELECT orders.id, o2.* FROM orders, orders o2", "SELECT orders.id, o2.* FROM orders, orders o2"},
		{"SELECT public.orders.id FROM orders WHERE EXISTS (SELECT 1 FROM customers orders WHERE orders.id = public.orders.id)", ""},
		{"WITH orders AS (SELECT 1 AS id) SELECT public.orders.id FROM public.orders", ""},
		{"SELECT public.orders.id FROM orders o", ""},
		{"SELECT shop.public.orders.id FROM orders", ""},
	} {
		tree, err := pg.Parse(c.sql)
		if err != nil {
			t.Fatal(err)
		}
		stmt := tree.Stmts[0].Stmt
		err = pilot.UnqualifyColumns(stmt, cat)
		if c.want == "" {
			if err == nil {
				t.Errorf("%s: rewritten, want refused", c.sql)
			}
			continue
		}
		got, derr := pg.Deparse(tree)
		if err != nil || derr != nil || got != c.want {
			t.Errorf("%s: %q (%v %v), want %q", c.sql, got, err, derr, c.want)
		}
	}
}
