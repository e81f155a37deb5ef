package mcpserver_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
)

// TestDuplicateColumns: run_sql answers a result whose columns share a
// name as the HTTP API does (docs/api.md): columns in the statement's
// order, a repeated name suffixed (x, x_2), every value kept, and the
// text lists each row's keys in column order; over streamable HTTP and
// over stdio, which reads the HTTP API's answer.
func TestDuplicateColumns(t *testing.T) {
	f := newFixture(t)
	const sql = "SELECT status AS x, id AS x, customer_id, id AS a FROM orders WHERE id = 3"
	for _, c := range []struct {
		name string
		r    result[gateway.Response]
	}{
		{"streamable HTTP", call[gateway.Response](t, f.connect(t, f.token), mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": sql})},
		{"stdio", call[gateway.Response](t, f.stdio(t, f.token), mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": sql})},
	} {
		r := c.r
		if r.isError || r.structured.Outcome != gateway.OutcomeExecuted {
			t.Fatalf("%s: %+v %s", c.name, r.structured, r.text)
		}
		if got, want := r.raw["columns"], []any{"x", "x_2", "customer_id", "a"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: columns %v, want %v", c.name, got, want)
		}
		if got, want := r.raw["rows"], []any{map[string]any{"x": "pending", "x_2": float64(3), "customer_id": float64(22), "a": float64(3)}}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rows %v, want %v", c.name, got, want)
		}
		if !strings.Contains(r.text, "columns: x, x_2, customer_id, a\n"+`{"x": "pending", "x_2": 3, "customer_id": 22, "a": 3}`) {
			t.Errorf("%s: the text does not list the row in column order:\n%s", c.name, r.text)
		}
	}
}
