package gateway_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
)

// TestResponseJSON: a Response's JSON keeps the documented shape
// (docs/api.md): columns by their keys, a repeated name suffixed with
// the first _N no column holds, each row an object with its keys in
// column order, "rows" always an array; and it reads back (the MCP stdio
// server reads the HTTP API's answers) with its values in order.
func TestResponseJSON(t *testing.T) {
	t.Parallel()
	r := gateway.Response{Outcome: gateway.OutcomeExecuted, RequestID: "req_x", RowsAffected: 1, Reasons: []string{},
		Columns: []gateway.Column{{Name: "id", Type: 20}, {Name: "id", Type: 20}, {Name: "id_2", Type: 23}, {Name: "id", Type: 25}, {Name: "b", Type: 25}},
		Rows:    [][]any{{int64(2), int64(15), int32(1), "two", nil}}}
	if got, want := r.Keys(), []string{"id", "id_3", "id_2", "id_4", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"outcome":"executed","request_id":"req_x","rows_affected":1,"columns":["id","id_3","id_2","id_4","b"],` +
		`"rows":[{"id":2,"id_3":15,"id_2":1,"id_4":"two","b":null}],"truncated":false,"reasons":[]}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	var back gateway.Response
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Keys(); !reflect.DeepEqual(got, r.Keys()) || len(back.Rows) != 1 ||
		!reflect.DeepEqual(back.Rows[0], []any{float64(2), float64(15), float64(1), "two", nil}) {
		t.Errorf("read back: columns %v rows %v", back.Columns, back.Rows)
	}

	// No rows: "rows" is an array, "columns" omitted.
	b, err = json.Marshal(gateway.Response{Outcome: gateway.OutcomeReferred, Reasons: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"outcome":"referred","request_id":"","rows_affected":0,"rows":[],"truncated":false,"reasons":[]}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}

	// A row that is not one value per column is an error, both ways.
	if _, err := json.Marshal(gateway.Response{Columns: []gateway.Column{{Name: "a"}}, Rows: [][]any{{1, 2}}}); err == nil {
		t.Error("a row of two values for one column marshalled")
	}
	for _, in := range []string{`{"columns":["a"],"rows":[{"a":1,"b":2}]}`, `{"columns":["a","b"],"rows":[{"a":1,"c":2}]}`} {
		if err := json.Unmarshal([]byte(in), &back); err == nil {
			t.Errorf("%s read as %+v", in, back)
		}
	}
}
