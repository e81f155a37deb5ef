package pgwire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestTextValue renders the values the Pilot answers (in this process, and
// as a remote Pilot's JSON decodes) in PostgreSQL's text output.
func TestTextValue(t *testing.T) {
	t.Parallel()
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	decoded := func(v any) any { var out any; _ = json.Unmarshal(raw(v), &out); return out }
	at := time.Date(2024, 2, 29, 12, 34, 56, 789000000, time.FixedZone("x", 3600))
	iv := pgtype.Interval{Months: 14, Days: 3, Microseconds: 3723000001, Valid: true}
	tm := pgtype.Time{Microseconds: 45296000000, Valid: true}
	cases := []struct {
		oid  uint32
		v    any
		want string
	}{
		{oidBool, true, "t"}, {oidInt8, int64(-7), "-7"}, {oidInt8, float64(7000000000), "7000000000"},
		{oidFloat8, 0.1, "0.1"}, {oidFloat8, 1e20, "1e+20"}, {oidNumeric, json.RawMessage("12.345"), "12.345"},
		{oidTimestamptz, at, "2024-02-29 11:34:56.789+00"}, {oidTimestamptz, "2024-02-29T12:34:56.789+01:00", "2024-02-29 11:34:56.789+00"},
		{oidDate, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "2024-02-29"},
		{oidBytea, []byte{0xde, 0xad}, `\xdead`}, {oidBytea, "3q0=", `\xdead`},
		{oidJSONB, map[string]any{"a": []any{1.0, "x"}}, `{"a":[1,"x"]}`}, {oidJSONB, "s", `"s"`},
		{1009, []any{"a b", "", nil, `q"`}, `{"a b","",NULL,"q\""}`}, {1007, []any{1.0, 2.0}, "{1,2}"},
		{oidInterval, raw(iv), "1 year 2 mons 3 days 01:02:03.000001"}, {oidInterval, decoded(iv), "1 year 2 mons 3 days 01:02:03.000001"},
		{oidTime, raw(tm), "12:34:56"}, {oidTime, decoded(tm), "12:34:56"},
		{oidInterval, raw(pgtype.Interval{Days: 1, Valid: true}), "1 day"}, {oidInterval, raw(pgtype.Interval{Valid: true}), "00:00:00"},
		{oidInterval, raw(pgtype.Interval{Microseconds: -1500000, Valid: true}), "-00:00:01.5"},
	}
	for _, c := range cases {
		if got, ok := textValue(c.oid, c.v); !ok || got != c.want {
			t.Errorf("textValue(%d, %#v) = %q, want %q", c.oid, c.v, got, c.want)
		}
	}
	if _, ok := textValue(oidText, nil); ok {
		t.Error("NULL rendered as a value")
	}
}

// TestJSONStringScalarKeepsItsQuotes: the Pilot now answers a json
// or jsonb value as its raw text (json.RawMessage), so a JSON string
// scalar reaches the wire front as "abc" with its quotes. PostgreSQL
// prints json '"abc"' as "abc"; the front unquoted every raw string and
// sent abc, which the same value from a remote Pilot (a Go string, quoted
// again below) does not. Found in review 2.
func TestJSONStringScalarKeepsItsQuotes(t *testing.T) {
	for _, oid := range []uint32{oidJSON, oidJSONB} {
		for raw, want := range map[string]string{`"abc"`: `"abc"`, `"a\"b"`: `"a\"b"`, `{"k": "v"}`: `{"k": "v"}`, `1.50`: `1.50`} {
			if got, ok := textValue(oid, json.RawMessage(raw)); !ok || got != want {
				t.Errorf("textValue(%d, RawMessage(%s)) = %q, want %q", oid, raw, got, want)
			}
			// The same value from a remote Pilot, decoded from its JSON.
			var v any
			if err := json.Unmarshal([]byte(raw), &v); err == nil {
				if s, ok := v.(string); ok {
					if got, _ := textValue(oid, s); got != want {
						t.Errorf("remote: textValue(%d, %q) = %q, want %q", oid, s, got, want)
					}
				}
			}
		}
	}
}
