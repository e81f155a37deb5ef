package pilot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestValuesInJSON: every value of an executed read marshals (an answer
// never fails on one of its values), numbers are JSON numbers, and the
// types JSON has no faithful form for (intervals, times of day, dates,
// inet, bit strings, NaN and the infinities, years past 9999 or before 1)
// are PostgreSQL's own text, as docs/api.md says: "others as their text".
// Found in review: an interval and a time came out as the JSON of pgx's
// Go structs, and a NaN, an infinity or a BC date made the whole answer
// fail to encode after the statement had run.
func TestValuesInJSON(t *testing.T) {
	f := newFixture(t)
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	asText := []string{
		"interval '1 hour 2 minutes'",
		"interval '1 year 2 months 3 days 04:05:06.5'",
		"interval '-3 days -00:00:01'",
		"interval '0'",
		"time '12:34:56.789'",
		"time '00:00'",
		"'12:00+02'::timetz",
		"date '2024-01-02'",
		"'0044-03-15 BC'::date",
		"'infinity'::date",
		"'-infinity'::timestamptz",
		"timestamp '10000-01-01 00:00:00'",
		"'0044-03-15 10:00:00.25 BC'::timestamptz",
		"'NaN'::float8",
		"'Infinity'::float8",
		"'-Infinity'::float4",
		"'NaN'::numeric",
		"'10.0.0.1'::inet",
		"'10.0.0.1/24'::inet",
		"'::1'::inet",
		"'10.0.0.0/8'::cidr",
		"B'101'::bit(3)",
		"'08:00:2b:01:02:03'::macaddr",
	}
	asJSON := map[string]string{
		"1.5::float8":                          "1.5",
		"1.25::numeric":                        "1.25",
		"42::int8":                             "42",
		"'a'::text":                            `"a"`,
		"true":                                 "true",
		"'{\"k\": [1, 2.5]}'::jsonb":           `{"k":[1,2.5]}`,
		"'{1,2}'::int4[]":                      "[1,2]",
		"timestamptz '2024-01-02 03:04:05+00'": `"2024-01-02T03:04:05Z"`,
	}
	var exprs []string
	exprs = append(exprs, asText...)
	for e := range asJSON {
		exprs = append(exprs, e)
	}
	for _, e := range exprs {
		sql := fmt.Sprintf("SELECT id, %s AS v FROM orders WHERE id = 1", e)
		res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml", sql))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != "executed" || len(res.Rows) != 1 {
			t.Errorf("%s: %s %s %v, want executed with one row", e, res.Outcome, res.Code, res.Reasons)
			continue
		}
		got, err := json.Marshal(byName(res)[0]["v"])
		if err != nil {
			t.Errorf("%s: the value %#v does not marshal: %v", e, byName(res)[0]["v"], err)
			continue
		}
		want, isJSON := asJSON[e]
		if !isJSON {
			// The server's own output, as a client reading text sees it
			// (not a ::text cast, which differs for inet).
			r := conn.PgConn().ExecParams(t.Context(), "SELECT "+e, nil, nil, nil, []int16{0}).Read()
			if r.Err != nil || len(r.Rows) != 1 {
				t.Fatalf("%s: %v", e, r.Err)
			}
			b, _ := json.Marshal(string(r.Rows[0][0]))
			want = string(b)
		}
		if string(got) != want {
			t.Errorf("%s: the Pilot answers %s, want %s", e, got, want)
		}
	}
}

// TestDuplicateColumnNamesKept: a result whose columns share a name (a
// join's two ids) keeps every column, in the target's order, with the
// name the target gave it, and no value is lost. Found in review: the
// second id's value was dropped over HTTP and MCP when rows were maps by
// column name (the fronts' JSON now suffixes a repeated name:
// gateway.Response, TestDuplicateColumnsJSON).
func TestDuplicateColumnNamesKept(t *testing.T) {
	f := newFixture(t)
	res, err := f.pilot.Execute(t.Context(), f.request(t, "unstick-orders.yaml",
		"SELECT id, customer_id AS id, 1 AS id_2, id AS id FROM orders WHERE id = 2"))
	if err != nil || res.Outcome != "executed" || len(res.Rows) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if got := fmt.Sprint(pilot.ColumnNames(res.Columns)); got != "[id id id_2 id]" {
		t.Errorf("columns %s, want [id id id_2 id]", got)
	}
	if got := fmt.Sprint(columnTypes(res)); got != "[20 20 23 20]" {
		t.Errorf("column types %s, want [20 20 23 20]", got)
	}
	row := res.Rows[0]
	if len(row) != 4 || fmt.Sprint(row[0]) != "2" || row[1] == nil || fmt.Sprint(row[1]) == "2" || fmt.Sprint(row[2]) != "1" || fmt.Sprint(row[3]) != "2" {
		t.Errorf("row %v: want every column's value in its place", row)
	}
}

// TestJSONPastFloat64: the Pilot keeps json and jsonb raw so that
// no number loses digits, but rows.Values() decodes every column first,
// and pgx decodes json through encoding/json into float64: a value such
// as 1e400, valid json and jsonb, fails the whole answer.
// Found in review 2.
func TestJSONPastFloat64(t *testing.T) {
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

// TestPinnedTextSettings: the settings that decide a value's text
// (TimeZone, DateStyle, IntervalStyle, bytea_output, extra_float_digits)
// were the target's or the role's defaults, so a statement converting a
// time to text answered in another zone and style than the wire front
// announces (UTC, ISO), and a fence over such text meant one thing on one
// target and another elsewhere. The Pilot pins them. Found in review 3.
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
		ts, _ := byName(res)[0]["t"].(string)
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\+00$`).MatchString(ts) {
			t.Errorf("updated_at::text = %q, want ISO in UTC", ts)
		}
		if iv := byName(res)[0]["i"]; iv != "1 day 02:00:00" {
			t.Errorf("interval::text = %q, want the postgres style", iv)
		}
	}
}
