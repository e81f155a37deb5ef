package pilot_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestReview3WriteTargetAfterAColumnIsAdded: a write target with no fence,
// and every INSERT target, is the table itself, not a view or subquery of
// the rule's columns. The target expands RETURNING * and t.* when the
// statement runs, so a column added after the Pilot read its catalog (a
// migration) came back though no rule lists it; a whole-row reference to
// the target (t::text in WHERE, to_jsonb(t) in RETURNING) read it too
// (DESIGN.md invariant 10). * and t.* are now the catalog's columns; a
// whole-row reference to a table written as itself is refused.
func TestReview3WriteTargetAfterAColumnIsAdded(t *testing.T) {
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
		return strings.Contains(fmt.Sprint(res.Columns, res.Rows), "SECRET-SSN") || slices.Contains(res.Columns, "ssn")
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
		if len(res.Rows) != 1 || !slices.Contains(res.Columns, "region") {
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

// TestPinnedTextSettings: the settings that decide a value's text
// (TimeZone, DateStyle, IntervalStyle, bytea_output, extra_float_digits)
// were the target's or the role's defaults, so a statement converting a
// time to text answered in another zone and style than the wire front
// announces (UTC, ISO), and a fence over such text meant one thing on one
// target and another elsewhere. The Pilot pins them.
func TestPinnedTextSettings(t *testing.T) {
	f := newFixture(t)
	f.addBound(t, "read-customers", []byte(`sentence: read customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, updated_at]
    max_rows: 10
`))
	conn := f.pilotConn(t)
	var db string
	if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"TimeZone = 'America/New_York'", "DateStyle = 'SQL, DMY'", "IntervalStyle = 'sql_standard'"} {
		if _, err := conn.Exec(t.Context(), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET `+set); err != nil {
			t.Fatal(err)
		}
	}
	// A Pilot whose connections open after the change.
	p, err := pilot.New(t.Context(), pilot.Config{Target: "shop", DSN: f.dsn}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sql := "SELECT id, updated_at::text AS t, (updated_at - updated_at + interval '1 day 2 hours')::text AS i FROM customers WHERE id = 1"
	for range 2 { // the literal path, then the remembered template
		res, err := p.Execute(t.Context(), f.request(t, "read-customers", sql))
		if err != nil || res.Outcome != pilot.Executed || len(res.Rows) != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		ts, _ := res.Rows[0]["t"].(string)
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00$`).MatchString(ts) {
			t.Errorf("updated_at::text = %q, want ISO in UTC", ts)
		}
		if iv := res.Rows[0]["i"]; iv != "1 day 02:00:00" {
			t.Errorf("interval::text = %q, want the postgres style", iv)
		}
	}
}
