package sqlcheck_test

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestNaturalJoinReadsSubqueryColumns: NATURAL JOIN compares every
// column name its two sides share, and the walker counted only the
// columns of catalog tables, so a table joined NATURAL to a subquery, a
// CTE, a VALUES list or an aliased join that names one of its columns read
// that column without a rule listing it: "SELECT count(*) FROM customers
// NATURAL JOIN (SELECT 2 AS id, '...'::timestamptz AS updated_at) x" ran
// and its count told whether customer 2 was updated at that instant, a
// column no rule lists (DESIGN.md invariant 10). The same held in an
// UPDATE's FROM and a DELETE's USING. Found in review 4.
func TestNaturalJoinReadsSubqueryColumns(t *testing.T) {
	cat, err := sqlcheck.ParseSchemaDDL(`
CREATE TABLE public.customers (id bigint NOT NULL, name text, region text, updated_at timestamptz);
CREATE TABLE public.orders (id bigint NOT NULL, customer_id bigint, status text, secret text);`, nil)
	if err != nil {
		t.Fatal(err)
	}
	customers := sqlcheck.TableName{Schema: "public", Name: "customers"}
	orders := sqlcheck.TableName{Schema: "public", Name: "orders"}
	rules := []sqlcheck.Rule{
		{Index: 0, Op: sqlcheck.OpSelect, Table: customers, Columns: []string{"id", "name", "region"}},
		{Index: 1, Op: sqlcheck.OpSelect, Table: orders, Columns: []string{"customer_id", "id", "status"}},
		{Index: 2, Op: sqlcheck.OpUpdate, Table: orders, Columns: []string{"status"}},
		{Index: 3, Op: sqlcheck.OpDelete, Table: orders},
	}
	c := &sqlcheck.Checker{Catalog: cat}
	for _, sql := range []string{
		"SELECT count(*) FROM customers NATURAL JOIN (SELECT 2 AS id, now() AS updated_at) x",
		"SELECT count(*) FROM (SELECT 2 AS id, now() AS updated_at) x NATURAL JOIN customers",
		"WITH x AS (SELECT 2 AS id, now() AS updated_at) SELECT count(*) FROM customers NATURAL JOIN x",
		"SELECT count(*) FROM customers NATURAL JOIN (VALUES (2, now())) AS x (id, updated_at)",
		"SELECT count(*) FROM customers NATURAL JOIN ((SELECT 2 AS id) a CROSS JOIN (SELECT now() AS updated_at) b) AS j",
		"SELECT count(*) FROM orders NATURAL JOIN (SELECT 1 AS id, 'x' AS secret) s",
		"UPDATE orders SET status = 'x' FROM customers c NATURAL JOIN (SELECT 2 AS id, now() AS updated_at) x WHERE orders.customer_id = c.id",
		"DELETE FROM orders USING customers c NATURAL JOIN (SELECT 2 AS id, now() AS updated_at) x WHERE orders.customer_id = c.id",
	} {
		d := c.Check(sql, rules)
		if d.Outcome != sqlcheck.Refer || !d.HasCode(sqlcheck.CodeColumnNotReadable) {
			t.Errorf("%s: %s %v, want it referred: the NATURAL JOIN reads a column no rule lists", sql, d.Outcome, d.ReasonStrings())
		}
	}
	// Columns the rules list still join.
	for _, sql := range []string{
		"SELECT count(*) FROM customers NATURAL JOIN (SELECT 2 AS id, 'EU' AS region) x",
		"SELECT count(*) FROM orders o JOIN (SELECT 2 AS id) x USING (id)",
	} {
		if d := c.Check(sql, rules); d.Outcome != sqlcheck.Conforms {
			t.Errorf("%s: %s %v, want it to conform", sql, d.Outcome, d.ReasonStrings())
		}
	}
}

// TestJoinAliasColumnList: a column alias list on a join renames
// its columns in order, (customers c CROSS JOIN s) AS j (id, name, region)
// makes j.region customers' third column, email; the walker ignored the
// list and credited j.region to customers.region, so a delegation listing
// id, name and region read every email through its fence view (found in
// review 4, end to end). A join's column aliases now refer, as a table's do.
func TestJoinAliasColumnList(t *testing.T) {
	cat, err := sqlcheck.ParseSchemaDDL(`
CREATE TABLE public.customers (id bigint NOT NULL, name text, email text, region text);
CREATE TABLE public.orders (id bigint NOT NULL, customer_id bigint, status text);`, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := []sqlcheck.Rule{
		{Index: 0, Op: sqlcheck.OpSelect, Table: sqlcheck.TableName{Schema: "public", Name: "customers"}, Columns: []string{"id", "name", "region"}},
		{Index: 1, Op: sqlcheck.OpSelect, Table: sqlcheck.TableName{Schema: "public", Name: "orders"}, Columns: []string{"customer_id", "id", "status"}},
		{Index: 2, Op: sqlcheck.OpUpdate, Table: sqlcheck.TableName{Schema: "public", Name: "orders"}, Columns: []string{"status"}},
	}
	c := &sqlcheck.Checker{Catalog: cat}
	for _, sql := range []string{
		"SELECT j.region FROM (customers c CROSS JOIN (SELECT 1 AS q) s) AS j (id, name, region, x)",
		"SELECT region FROM (customers c CROSS JOIN (SELECT 1 AS q) s) AS j (id, name, region, x)",
		"SELECT j.status FROM (customers c JOIN orders o ON o.customer_id = c.id) AS j (a, b, status)",
		"UPDATE orders SET status = j.region FROM (customers c CROSS JOIN (SELECT 1 AS q) s) AS j (id, name, region) WHERE orders.customer_id = j.id",
	} {
		d := c.Check(sql, rules)
		if d.Outcome != sqlcheck.Refer {
			t.Errorf("%s: %s %v, want it referred: the join's column aliases rename columns the check credited by their old names", sql, d.Outcome, d.ReasonStrings())
		}
	}
	if d := c.Check("SELECT j.region FROM (customers c CROSS JOIN (SELECT 1 AS q) s) AS j", rules); d.Outcome != sqlcheck.Conforms {
		t.Errorf("a join alias without a column list: %s %v", d.Outcome, d.ReasonStrings())
	}
}
