package pgwire

import (
	"encoding/json"
	"testing"
)

// TestReview2JSONStringScalarKeepsItsQuotes: the Pilot now answers a json
// or jsonb value as its raw text (json.RawMessage), so a JSON string
// scalar reaches the wire front as "abc" with its quotes. PostgreSQL
// prints json '"abc"' as "abc"; the front unquoted every raw string and
// sent abc, which the same value from a remote Pilot (a Go string, quoted
// again below) does not.
func TestReview2JSONStringScalarKeepsItsQuotes(t *testing.T) {
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
