package pilot_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestReviewGroupingSetPositions: a positional GROUP BY inside ROLLUP,
// CUBE, GROUPING SETS or an implicit row runs through the Pilot's
// template with the meaning of the checked text (found in review: as a
// parameter the position became a value, so GROUP BY CUBE (1) over
// count(*) ran and returned rows where the statement is an error).
func TestReviewGroupingSetPositions(t *testing.T) {
	f := newFixture(t)
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"SELECT count(*) FROM orders GROUP BY CUBE (1)",
		"SELECT count(*) FROM orders GROUP BY GROUPING SETS ((1), ())",
		"SELECT count(*) FROM orders GROUP BY (1, 1)",
		"SELECT customer_id % 3 AS k, count(*) FROM orders GROUP BY ROLLUP (1) ORDER BY 1, 2",
		"SELECT customer_id % 4 AS k, count(*) FROM orders GROUP BY GROUPING SETS ((1), ()) ORDER BY 1, 2",
	} {
		// orders has no read fence in this bound: the literal statement on
		// the table is what the Pilot must run.
		var want []string
		rows, lerr := conn.Query(t.Context(), sql, pgx.QueryExecModeSimpleProtocol)
		if lerr == nil {
			for rows.Next() {
				v, _ := rows.Values()
				want = append(want, fmt.Sprint(v...))
			}
			rows.Close()
			lerr = rows.Err()
		}
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", sql))
		if err != nil {
			t.Fatal(err)
		}
		if lerr != nil {
			if res.Outcome != pilot.Refused || res.Code != pilot.RefusedDatabase {
				t.Errorf("%s: the statement is an error (%v), the Pilot answered %s %s with %d rows (%s %v)",
					sql, lerr, res.Outcome, res.Code, len(res.Rows), res.ExecutedSQL, res.ExecutedArgs)
			}
			continue
		}
		var got []string
		for _, r := range res.Rows {
			var vals []any
			for _, c := range res.Columns {
				vals = append(vals, r[c])
			}
			got = append(got, fmt.Sprint(vals...))
		}
		if res.Outcome != pilot.Executed || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: the Pilot answered %s with\n%s\nthe statement gives\n%s", sql, res.Outcome, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// TestReviewReturningIsCappedLikeARead: the rows a write returns are a
// read of the columns its RETURNING names (they need a select rule), so
// the select rule's max_rows caps them too. Found in review: under a
// select rule capped at 3 rows and an update rule capped at 10, a no-op
// UPDATE ... SET name = name ... RETURNING id, name handed the agent 8
// rows of names, untruncated, where SELECT id, name gets 3 and truncated.
// Past the smaller cap the write now rolls back (max_rows_exceeded).
func TestReviewReturningIsCappedLikeARead(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "returning", []byte(`sentence: returning
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
    max_rows: 3
  - op: update
    table: public.customers
    columns: [name]
    fence: region = 'EU'
    max_rows: 10
`))
	read, err := f.pilot.Execute(t.Context(), f.request(t, "returning", "SELECT id, name FROM customers WHERE id < 9 ORDER BY id"))
	if err != nil || read.Outcome != pilot.Executed || len(read.Rows) != 3 || !read.Truncated {
		t.Fatalf("the read: %+v %v", read, err)
	}
	res, err := f.pilot.Execute(t.Context(), f.request(t, "returning", "UPDATE customers SET name = name WHERE id < 9 RETURNING id, name"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome == pilot.Executed && len(res.Rows) > 3 {
		t.Fatalf("the write returned %d rows of names (truncated %v); the select rule caps a read at 3", len(res.Rows), res.Truncated)
	}
	if res.Outcome != pilot.Refused || res.Code != pilot.RefusedMaxRows {
		t.Fatalf("the write past the read's cap: %s %s, want refused %s", res.Outcome, res.Code, pilot.RefusedMaxRows)
	}
	// Within both caps it runs and returns its rows.
	res, err = f.pilot.Execute(t.Context(), f.request(t, "returning", "UPDATE customers SET name = name WHERE id < 4 RETURNING id, name"))
	if err != nil || res.Outcome != pilot.Executed || len(res.Rows) != 3 {
		t.Fatalf("the write within both caps: %+v %v", res, err)
	}
}

// TestReviewStarAfterAColumnIsAdded: the Pilot's catalog is the one it read
// at start, and * and whole-row references are expanded by the target when
// the statement runs. A column added to a table afterwards (a routine
// migration) is in no rule, yet SELECT * and to_jsonb(c) return it: on a
// table without a fence at once, on a fenced table once its view is
// created after the change (DESIGN.md invariant 10: columns no rule lists
// are not observable).
func TestReviewStarAfterAColumnIsAdded(t *testing.T) {
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
		if strings.Contains(fmt.Sprint(res.Columns, res.Rows), "SECRET-SSN") || slices.Contains(res.Columns, "ssn") {
			t.Errorf("%s: the agent reads a column no rule lists: %v %v", sql, res.Columns, res.Rows)
		}
	}
}
