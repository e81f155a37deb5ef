package pilot_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestSchemaQualifiedColumnRefs: the static check accepts a column
// qualified with its table's schema (public.orders.id over FROM
// public.orders), and before every table went through a Pilot view such a
// statement on a table without a fence ran. The Pilot now replaces the
// reference by harbormaster.fence_... AS orders, which PostgreSQL does not
// match against public.orders.id ("invalid reference to FROM-clause
// entry"), so a statement the check passed is refused by the target. The
// same holds of the subquery an unfenced table is now read as.
// Found in review 2.
func TestSchemaQualifiedColumnRefs(t *testing.T) {
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

// TestColumnGrantsThroughPlainViews: docs/operations.md asks for a
// role with "exactly the privileges on the target tables that the
// delegations grant", which for unstick-orders is SELECT on five of
// orders' six columns. Every reference to a table, fenced or not, now goes
// through a security_invoker view that selects every column the catalog
// lists, and PostgreSQL checks the view's base-table columns as the
// invoker, so a read of id and status is refused (permission denied for
// table orders) where it ran before. Found in review 2.
func TestColumnGrantsThroughPlainViews(t *testing.T) {
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

// TestMigrationAfterARead: a read of a table without a fence now
// leaves a Pilot view that depends on every one of its columns, so the
// application's own migration (ALTER TABLE orders DROP COLUMN total_cents,
// a column no delegation names) fails with "other objects depend on it"
// after any agent read orders. docs/operations.md says so only of fenced
// tables. Found in review 2.
func TestMigrationAfterARead(t *testing.T) {
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

// TestSetDefaultThroughTheView: an UPDATE's target now always goes
// through a Pilot view, and a view column has no default: PostgreSQL
// rewrites SET updated_at = DEFAULT on the view to NULL, not to the
// table's now(). Before, an unfenced target was the table and took its
// default; the Pilot must not run a statement meaning something else than
// the one checked (invariant 4): it runs with the table's default, or
// refuses. Found in review 2.
func TestSetDefaultThroughTheView(t *testing.T) {
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
		if len(res.Rows) != 1 || byName(res)[0]["updated_at"] == nil {
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
// Found in review 2.
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

// TestStarAfterAColumnIsAdded: the Pilot's catalog is the one it read
// at start, and * and whole-row references are expanded by the target when
// the statement runs. A column added to a table afterwards (a routine
// migration) is in no rule, yet SELECT * and to_jsonb(c) return it: on a
// table without a fence at once, on a fenced table once its view is
// created after the change (DESIGN.md invariant 10: columns no rule lists
// are not observable). Found in review 1.
func TestStarAfterAColumnIsAdded(t *testing.T) {
	// Fixed: an unfenced table is read as a subquery of its rule's columns, a fenced one through a view naming its catalog columns.
	f := newFixture(t)
	f.addBound(t, "all-columns", []byte(`sentence: every column of customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, email, region, updated_at]
    max_rows: 10
`))
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `ALTER TABLE customers ADD COLUMN ssn text DEFAULT 'SECRET-SSN'`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"SELECT * FROM customers WHERE id = 2",
		"SELECT to_jsonb(c) AS j FROM customers c WHERE id = 3",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "all-columns", sql))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(fmt.Sprint(res.Columns, res.Rows), "SECRET-SSN") || slices.Contains(pilot.ColumnNames(res.Columns), "ssn") {
			t.Errorf("%s: the agent reads a column no rule lists: %v %v", sql, res.Columns, res.Rows)
		}
	}
}

// TestWriteTargetAfterAColumnIsAdded: a write target with no fence,
// and every INSERT target, is the table itself, not a view or subquery of
// the rule's columns. The target expands RETURNING * and t.* when the
// statement runs, so a column added after the Pilot read its catalog (a
// migration) came back though no rule lists it; a whole-row reference to
// the target (t::text in WHERE, to_jsonb(t) in RETURNING) read it too
// (DESIGN.md invariant 10). * and t.* are now the catalog's columns; a
// whole-row reference to a table written as itself is refused.
// Found in review 3.
func TestWriteTargetAfterAColumnIsAdded(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "write-customers", []byte(`sentence: read and write every column of customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, email, region, updated_at]
    max_rows: 10
  - op: update
    table: public.customers
    columns: [name, email]
    max_rows: 5
  - op: insert
    table: public.customers
    columns: [id, name, email, region]
    max_rows: 5
  - op: delete
    table: public.customers
    max_rows: 5
`))
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `ALTER TABLE customers ADD COLUMN ssn text DEFAULT 'SECRET-SSN'`); err != nil {
		t.Fatal(err)
	}
	leaks := func(res *pilot.Result) bool {
		return strings.Contains(fmt.Sprint(res.Columns, res.Rows), "SECRET-SSN") || slices.Contains(pilot.ColumnNames(res.Columns), "ssn")
	}
	for _, sql := range []string{
		"UPDATE customers SET name = name WHERE id = 2 RETURNING *",
		"UPDATE customers c SET name = c.name WHERE c.id = 2 RETURNING c.*",
		"UPDATE customers c SET name = c.name WHERE c.id = 2 RETURNING c.id, c.*",
		"INSERT INTO customers (id, name, email, region) VALUES (9001, 'n', 'e', 'eu') RETURNING *",
		"INSERT INTO customers AS k (id, name, email, region) VALUES (9002, 'n', 'e', 'eu') RETURNING k.*",
		"DELETE FROM customers WHERE id = 9001 RETURNING *",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "write-customers", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if res.Outcome != pilot.Executed {
			t.Errorf("%s: %s (%s), want it executed with the catalog's columns", sql, res.Outcome, res.Reasons)
			continue
		}
		if leaks(res) {
			t.Errorf("%s: the agent reads a column no rule lists: %v %v", sql, res.Columns, res.Rows)
		}
		if len(res.Rows) != 1 || !slices.Contains(pilot.ColumnNames(res.Columns), "region") {
			t.Errorf("%s: %v %v, want the row with the catalog's columns", sql, res.Columns, res.Rows)
		}
	}
	for _, sql := range []string{
		"UPDATE customers c SET name = c.name WHERE c::text LIKE '%SECRET%' RETURNING id",
		"UPDATE customers SET name = name WHERE id = 3 RETURNING to_jsonb(customers) AS j",
		"UPDATE customers c SET name = c.name WHERE id = 3 RETURNING to_jsonb(c.*) AS j",
		"DELETE FROM customers c WHERE row_to_json(c)::text LIKE '%SECRET%'",
		"INSERT INTO customers AS k (id, name, email, region) VALUES (9003, 'n', 'e', 'eu') RETURNING k::text AS t",
	} {
		f.mustRefuse(t, "write-customers", sql, "", "whole-row reference", "a whole-row reference reads a column no rule lists")
	}
}

// TestFromItemColumnNamedAsAHiddenColumn: in UPDATE ... FROM and DELETE
// ... USING, the check resolves an unqualified name the bound's catalog
// gives the written table no column of to a FROM item; the target's
// written table has every column, and one of that name outside the bound
// made PostgreSQL fail (ambiguous column) where a target without it ran,
// so the agent learned the column exists (invariant 10). Such a name is
// refused, to be qualified with its item's name. Found in review i24.
func TestFromItemColumnNamedAsAHiddenColumn(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "write-customers", []byte(`sentence: read and write customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, email, region, updated_at]
    max_rows: 10
  - op: update
    table: public.customers
    columns: [name]
    max_rows: 5
  - op: delete
    table: public.customers
    max_rows: 5
`))
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `ALTER TABLE customers ADD COLUMN ssn integer`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"UPDATE customers SET name = name FROM (SELECT 2 AS ssn) v WHERE id = ssn",
		"UPDATE customers SET name = name FROM (SELECT 2 AS k) v WHERE id = k",
		"DELETE FROM customers USING (SELECT 9001 AS ssn) v WHERE id = ssn",
	} {
		f.mustRefuse(t, "write-customers", sql, "", "qualify it", "an unqualified name beside FROM items may be a hidden column of the target")
	}
	for _, sql := range []string{
		"UPDATE customers SET name = name FROM (SELECT 2 AS ssn) v WHERE customers.id = v.ssn RETURNING customers.id",
		"UPDATE customers SET name = name FROM (SELECT 2 AS k) v WHERE id = v.k AND name IS NOT NULL RETURNING id",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "write-customers", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if res.Outcome != pilot.Executed || res.RowsAffected != 1 {
			t.Errorf("%s: %s %v affected %d, want it executed on one row", sql, res.Outcome, res.Reasons, res.RowsAffected)
		}
	}
}

// TestReturningStarBesideFrom: pinning a write target's columns
// (RETURNING * of a table written as itself is the catalog's columns)
// refused RETURNING * beside FROM or USING, which the Pilot ran before:
// UPDATE orders o ... FROM customers c ... RETURNING * is an ordinary
// statement an agent sends. * there is the target's columns, then each
// FROM item's, and each FROM item is already the rule's columns (a
// subquery, or a function's own), so * is now written out as the
// catalog's columns of the target followed by item.* of each FROM item,
// which returns what it returned before; a column added since the
// catalog was read is still not in it. A join with USING or NATURAL
// without an alias (whose * merges columns that item.* would repeat)
// still refuses, saying what to write instead. Found in review 6.
func TestReturningStarBesideFrom(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "orders-from", []byte(`sentence: fix orders of listed customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, email, region, updated_at]
    max_rows: 500
  - op: select
    table: public.orders
    columns: [id, customer_id, status, total_cents, created_at, updated_at]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [status]
    max_rows: 5
  - op: delete
    table: public.orders
    max_rows: 5
`))
	if _, err := f.pilotConn(t).Exec(t.Context(), `ALTER TABLE orders ADD COLUMN secret text DEFAULT 'SECRET'`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sql  string
		cols []string
	}{
		{"UPDATE orders o SET status = 'failed' FROM customers c WHERE c.id = o.customer_id AND o.id = 3 RETURNING *",
			[]string{"id", "customer_id", "status", "total_cents", "created_at", "updated_at", "id", "name", "email", "region", "updated_at"}},
		{"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g, customers WHERE customers.id = orders.customer_id AND orders.id = 3 RETURNING *",
			[]string{"id", "customer_id", "status", "total_cents", "created_at", "updated_at", "g", "id", "name", "email", "region", "updated_at"}},
		{"UPDATE orders o SET status = 'failed' FROM (SELECT id AS cid FROM customers) s WHERE s.cid = o.customer_id AND o.id = 3 RETURNING o.id, *",
			[]string{"id", "id", "customer_id", "status", "total_cents", "created_at", "updated_at", "cid"}},
		{"DELETE FROM orders o USING customers c WHERE c.id = o.customer_id AND o.id = 2 RETURNING *",
			[]string{"id", "customer_id", "status", "total_cents", "created_at", "updated_at", "id", "name", "email", "region", "updated_at"}},
	}
	for _, c := range cases {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-from", c.sql))
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if res.Outcome != pilot.Executed || res.RowsAffected != 1 || len(res.Rows) != 1 {
			t.Errorf("%s: %s %v affected %d, want it executed", c.sql, res.Outcome, res.Reasons, res.RowsAffected)
			continue
		}
		if len(res.Columns) != len(c.cols) {
			t.Errorf("%s: columns %v, want %d of them (%v)", c.sql, res.Columns, len(c.cols), c.cols)
		}
		for i, col := range pilot.ColumnNames(res.Columns) {
			if i < len(c.cols) && !strings.HasPrefix(col, c.cols[i]) {
				t.Errorf("%s: column %d is %s, want %s", c.sql, i, col, c.cols[i])
			}
		}
		if strings.Contains(fmt.Sprint(res.Columns, res.Rows), "SECRET") || strings.Contains(fmt.Sprint(res.Columns), "secret") {
			t.Errorf("%s: a column no rule lists came back: %v %v", c.sql, res.Columns, res.Rows)
		}
	}
	f.mustRefuse(t, "orders-from", "UPDATE orders o SET status = 'failed' FROM customers c JOIN customers d USING (id) WHERE c.id = o.customer_id AND o.id = 3 RETURNING *",
		"", "name the columns", "RETURNING * beside an unaliased join with USING, saying what to write")
}
