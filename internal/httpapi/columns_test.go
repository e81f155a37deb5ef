package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// TestDuplicateColumnsJSON: an executed statement's answer lists its
// columns in the statement's order, and each row is an object with its
// keys in that order; a repeated column name takes the first free suffix
// _2, _3, ..., so no value is lost (docs/api.md). The wire front sends
// the same result's columns under their own names (pgwire's
// TestColumnsInOrderWithTheirNames).
func TestDuplicateColumnsJSON(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	for _, c := range []struct{ sql, want string }{
		{"SELECT status AS x, id AS x, customer_id, id AS a FROM orders WHERE id = 3",
			`"columns":["x","x_2","customer_id","a"],"rows":[{"x":"pending","x_2":3,"customer_id":22,"a":3}]`},
		// A suffix that a later column holds is not taken.
		{"SELECT id, customer_id AS id, 1 AS id_2, id AS id FROM orders WHERE id = 2",
			`"columns":["id","id_3","id_2","id_4"],"rows":[{"id":2,"id_3":15,"id_2":1,"id_4":2}]`},
	} {
		status, body := f.do(t, http.MethodPost, "/v1/statements", gatewaytest.AgentToken, map[string]string{"target": gatewaytest.Target, "sql": c.sql})
		if status != http.StatusOK || !strings.Contains(string(body), `"outcome":"executed"`) {
			t.Fatalf("%s: %d %s", c.sql, status, body)
		}
		if !strings.Contains(string(body), c.want) {
			t.Errorf("%s:\n%s\nwant it to hold\n%s", c.sql, body, c.want)
		}
	}
}
