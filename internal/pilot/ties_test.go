package pilot_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestWithTiesUnderTheRowCap: a read's row cap is a LIMIT the Pilot adds
// (LIMIT LEAST(its own, max_rows+1) when it has one), and FETCH FIRST n
// ROWS WITH TIES is a LIMIT whose count PostgreSQL extends by every row
// tied with the last; issue 22 reported the rewrite losing WITH TIES (one
// row where PostgreSQL returns every tie). Every statement here returns
// what PostgreSQL returns for it, run directly on the target with the
// fence written out, on each path: a remembered template (the second run
// of a shape), the literal path in a transaction, and a rehearsal. Past
// the cap (ties beyond max_rows) the answer is the first max_rows rows of
// PostgreSQL's, marked truncated, as for any read.
func TestWithTiesUnderTheRowCap(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "ties-capped", []byte(`sentence: read ten orders
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, customer_id, status, created_at, updated_at]
    max_rows: 10
`))
	conn := f.pilotConn(t)
	direct := func(sql string) []string {
		t.Helper()
		rows, err := conn.Query(t.Context(), sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := func(res *pilot.Result) []string {
		var out []string
		for _, r := range res.Rows {
			var vals []any
			for i := range res.Columns {
				vals = append(vals, r[i])
			}
			out = append(out, fmt.Sprint(vals...))
		}
		return out
	}
	cases := []struct {
		bound, sql, plain string
		truncated         bool
	}{
		// 21 orders tie on the first status.
		{"unstick-orders.yaml", "SELECT id, status FROM orders ORDER BY status FETCH FIRST 1 ROWS WITH TIES", "", false},
		{"unstick-orders.yaml", "SELECT id, status FROM orders ORDER BY status FETCH FIRST 2 ROWS WITH TIES", "", false},
		{"unstick-orders.yaml", "SELECT id, status FROM orders ORDER BY status DESC OFFSET 160 ROWS FETCH NEXT 1 ROW WITH TIES", "", false},
		{"unstick-orders.yaml", "SELECT id, status FROM orders o WHERE o.id IN (SELECT id FROM orders ORDER BY status FETCH FIRST 1 ROWS WITH TIES) ORDER BY id", "", false},
		{"unstick-orders.yaml", "SELECT id, status FROM orders UNION ALL SELECT id, status FROM orders ORDER BY status FETCH FIRST 1 ROWS WITH TIES", "", false},
		// A fenced table: the ties are those inside the fence.
		{"fix-name-typos.yaml", "SELECT id, name, region FROM customers ORDER BY region FETCH FIRST 1 ROWS WITH TIES",
			"SELECT id, name, region FROM customers WHERE region = 'EU' ORDER BY region FETCH FIRST 1 ROWS WITH TIES", false},
		// Past the cap: 21 ties, max_rows 10.
		{"ties-capped", "SELECT id, status FROM orders ORDER BY status FETCH FIRST 1 ROWS WITH TIES", "", true},
	}
	for _, c := range cases {
		plain := c.plain
		if plain == "" {
			plain = c.sql
		}
		want := direct(plain)
		if len(want) < 2 {
			t.Fatalf("%s: PostgreSQL returns %d rows: not a test of ties", plain, len(want))
		}
		// Rows that tie come in no set order.
		slices.Sort(want)
		path := marque.PathCompiled
		for _, run := range []string{"first", "template", "literal", "rehearsal"} {
			req := f.request(t, c.bound, c.sql)
			var res *pilot.Result
			var err error
			switch run {
			case "first", "template":
				res, err = f.pilot.Execute(t.Context(), req)
			case "literal":
				txn, berr := f.pilot.BeginTxn(t.Context())
				if berr != nil {
					t.Fatal(berr)
				}
				res, err = f.pilot.ExecuteIn(t.Context(), req, txn)
				txn.Close()
			case "rehearsal":
				res, err = f.pilot.Rehearse(t.Context(), req.SQL, f.bounds[c.bound], f.auth(c.bound), "agent:demo", path)
			}
			if err != nil {
				t.Fatalf("%s (%s): %v", c.sql, run, err)
			}
			if res.Outcome == pilot.Refused {
				t.Fatalf("%s (%s): refused %s %v", c.sql, run, res.Code, res.Reasons)
			}
			g := got(res)
			slices.Sort(g)
			switch {
			case c.truncated && (len(g) != 10 || !res.Truncated || slices.ContainsFunc(g, func(r string) bool { _, ok := slices.BinarySearch(want, r); return !ok })):
				t.Errorf("%s (%s): %d rows, truncated %v:\n%v\nwant 10 of PostgreSQL's %d, truncated:\n%v", c.sql, run, len(g), res.Truncated, g, len(want), want)
			case !c.truncated && (!slices.Equal(g, want) || res.Truncated):
				t.Errorf("%s (%s): %d rows, truncated %v:\n%v\nwant PostgreSQL's %d:\n%v", c.sql, run, len(g), res.Truncated, g, len(want), want)
			}
		}
	}
}
