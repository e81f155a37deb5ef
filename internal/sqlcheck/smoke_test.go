package sqlcheck

import (
	"fmt"
	"testing"
)

const smokeDDL = `CREATE TABLE public.orders (id bigint, customer_id bigint, status text, total_cents bigint, created_at timestamptz, updated_at timestamptz);
CREATE TABLE public.customers (id bigint, name text, email text, region text, updated_at timestamptz);`

func TestSmoke(t *testing.T) {
	cat, err := ParseSchemaDDL(smokeDDL, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := TableName{"public", "orders"}
	rules := []Rule{{Index: 0, Op: OpSelect, Table: o, Columns: []string{"created_at", "id", "status", "updated_at"}},
		{Index: 1, Op: OpUpdate, Table: o, Columns: []string{"status", "updated_at"}}}
	for _, s := range []string{
		"SELECT id, status FROM orders WHERE status = 'pending' ORDER BY created_at",
		"SELECT * FROM orders",
		"UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 1 /* hi */",
		"UPDATE orders SET status = 'failed' WHERE total_cents > 1",
		"COMMIT; UPDATE orders SET status='x'",
		"SELECT o FROM orders o",
		"SELECT id FROM orders WHERE id IN (SELECT id FROM customers)",
		"WITH x AS (SELECT id FROM orders) SELECT id FROM x",
		"SELECT lower(status) AS s FROM orders GROUP BY s ORDER BY s",
		"SELECT pg_sleep(1) FROM orders",
		"EXPLAIN ANALYZE DELETE FROM orders",
		"SELECT id::regclass FROM orders",
		"SELECT count(*) FROM orders",
		"SELECT 1",
		"SELECT id FROM orders o JOIN LATERAL (SELECT name FROM customers c WHERE c.id = o.id) x ON true",
	} {
		d := Check(Analyze(s, cat, Limits{}), rules)
		fmt.Printf("%-60.60s %s rule=%v\n   %v\n   %s\n", s, d.Outcome, d.Rule, d.ReasonStrings(), d.CanonicalSQL)
	}
}
