package pilot_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestReview4SystemColumnsOfAWriteTarget: a write target the Pilot runs
// as the table itself (no fence narrows what the agent may read of it)
// has PostgreSQL's system columns. The static check knew no column
// named ctid, but beside a function in FROM, whose output columns it
// cannot name, it counted ctid as the function's; PostgreSQL gave it to
// the table. RETURNING ctid (the new row version's place in the heap,
// which depends on how much room the rows around it take, columns no rule
// lists and rows of others included), xmin, xmax, cmin, cmax and tableoid
// then reached the agent, and WHERE ctid = ... probed the layout
// (DESIGN.md invariant 10). A system column's name now refers wherever it
// appears.
func TestReview4SystemColumnsOfAWriteTarget(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "orders-rw", []byte(`sentence: read most of orders, fix pending ones, delete any
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, customer_id, status, created_at, updated_at]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [status, updated_at]
    fence: status = 'pending' and created_at < now() - interval '1 day'
    max_rows: 20
  - op: delete
    table: public.orders
    max_rows: 1
`))
	for _, sql := range []string{
		"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g WHERE id = 3 RETURNING ctid",
		"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g WHERE id = 3 RETURNING xmin, xmax, cmin, cmax, tableoid",
		"UPDATE orders SET status = 'failed' FROM generate_series(1, 1) g WHERE id = 3 AND ctid = '(0,3)'",
		"UPDATE orders SET status = 'failed' FROM jsonb_each('{}') j WHERE id = 3 RETURNING id, ctid::text AS c",
		"DELETE FROM orders USING generate_series(1, 1) g WHERE id = 100000 OR ctid > '(0,0)' RETURNING id",
		"SELECT s.xmin FROM (SELECT id AS xmin FROM orders) s",
	} {
		res, err := f.pilot.Execute(t.Context(), f.request(t, "orders-rw", sql))
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		if res.Outcome != pilot.Refused || res.Code != pilot.RefusedCheck || !strings.Contains(fmt.Sprint(res.Reasons), "is a system column") {
			t.Errorf("%s: %s %s %v columns %v rows %v affected %d, want it refused: it names a system column", sql, res.Outcome, res.Code, res.Reasons, res.Columns, res.Rows, res.RowsAffected)
		}
	}
}
