package pilot_test

import (
	"reflect"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestDescribe: a statement with placeholders inside a signed bound is
// described (its parameters' and columns' types) without running it; one
// outside the bound, on the wrong path, or under a bound the grantor did
// not sign is refused.
func TestDescribe(t *testing.T) {
	f := newFixture(t)
	const orders, typos = "unstick-orders.yaml", "fix-name-typos.yaml"
	before := f.snapshot(t, "orders") + f.snapshot(t, "customers")
	receipts := f.receipts(t)
	for _, c := range []struct {
		bound, path, sql string
		params           []uint32
		cols             []string
		types            []uint32
	}{
		{orders, marque.PathCompiled, "SELECT id, status, created_at FROM orders WHERE customer_id = $1 AND id < $2",
			[]uint32{20, 20}, []string{"id", "status", "created_at"}, []uint32{20, 25, 1184}},
		// A cast's type; a placeholder with no context is text, and so
		// is its column, the NULL's.
		{orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = $1::int4", []uint32{23}, []string{"id"}, []uint32{20}},
		{orders, marque.PathCompiled, "SELECT id, $1 AS x FROM orders WHERE id = 1", []uint32{25}, []string{"id", "x"}, []uint32{20, 25}},
		// A placeholder the target cannot type ($1 IS NULL) leaves the
		// parameters untyped (nil); the columns are still described.
		{orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = 1 AND $1 IS NULL", nil, []string{"id"}, []uint32{20}},
		// Two columns of one name take the names Execute gives them: the
		// target's, both "id" (issue 23).
		{orders, marque.PathCompiled, "SELECT o.id, p.id FROM orders o JOIN orders p ON p.id = o.id WHERE o.id = $1",
			[]uint32{20}, []string{"id", "id"}, []uint32{20, 20}},
		// A write: no columns; with RETURNING, its columns, not the guard's.
		{orders, marque.PathCompiled, "UPDATE orders SET status = $1, updated_at = now() WHERE id = $2", []uint32{25, 20}, nil, nil},
		{orders, marque.PathCompiled, "UPDATE orders SET status = $1 WHERE id = $2 RETURNING id, status",
			[]uint32{25, 20}, []string{"id", "status"}, []uint32{20, 25}},
		{typos, marque.PathSurveyed, "UPDATE customers SET name = $1 WHERE id = $2", []uint32{25, 20}, nil, nil},
	} {
		res, err := f.pilot.Describe(t.Context(), c.sql, f.bounds[c.bound], f.auth(c.bound), "agent:demo", c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if res.Outcome != pilot.Described {
			t.Errorf("%s: %s %s %v, want described", c.sql, res.Outcome, res.Code, res.Reasons)
			continue
		}
		if !reflect.DeepEqual(res.ParamTypes, c.params) || !reflect.DeepEqual(pilot.ColumnNames(res.Columns), c.cols) || !reflect.DeepEqual(columnTypes(res), c.types) {
			t.Errorf("%s: parameters %v columns %v %v, want %v %v %v", c.sql, res.ParamTypes, pilot.ColumnNames(res.Columns), columnTypes(res), c.params, c.cols, c.types)
		}
		if res.Rows != nil || res.RowsAffected != 0 || res.MarqueID != "" {
			t.Errorf("%s: a description with rows or a marque: %+v", c.sql, res)
		}
	}
	if after := f.snapshot(t, "orders") + f.snapshot(t, "customers"); after != before || f.receipts(t) != receipts {
		t.Fatal("describing changed the target")
	}

	// Refused: outside the bound, on a path the bound does not open for
	// it, not one statement, under a bound its grantor did not sign.
	refusals := []struct {
		name, bound, path, sql, code string
		auth                         func(marque.Auth) marque.Auth
		principal                    string
	}{
		{"a column outside the rule", orders, marque.PathCompiled, "SELECT id, total_cents FROM orders WHERE id = $1", pilot.RefusedCheck, nil, ""},
		{"a table no rule names", orders, marque.PathCompiled, "SELECT id FROM customers WHERE id = $1", pilot.RefusedCheck, nil, ""},
		{"a write past its rule's columns", orders, marque.PathCompiled, "UPDATE orders SET total_cents = $1 WHERE id = $2", pilot.RefusedCheck, nil, ""},
		{"a residual rule on the compiled path", typos, marque.PathCompiled, "UPDATE customers SET name = $1 WHERE id = $2", pilot.RefusedCheck, nil, ""},
		{"two statements", orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = $1; SELECT 1", pilot.RefusedCheck, nil, ""},
		{"another bound's signature", orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = $1", pilot.RefusedSignature,
			func(a marque.Auth) marque.Auth { a.Signature = string(f.sigs[typos]); return a }, ""},
		{"no signature", orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = $1", pilot.RefusedSignature,
			func(a marque.Auth) marque.Auth { a.Signature = ""; return a }, ""},
		{"another bound's hash", orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = $1", pilot.RefusedBound,
			func(a marque.Auth) marque.Auth { a.BoundSHA256 = f.auth(typos).BoundSHA256; return a }, ""},
		{"another grantee", orders, marque.PathCompiled, "SELECT id FROM orders WHERE id = $1", pilot.RefusedBound, nil, "agent:other"},
	}
	for _, c := range refusals {
		auth := f.auth(c.bound)
		if c.auth != nil {
			auth = c.auth(auth)
		}
		principal := "agent:demo"
		if c.principal != "" {
			principal = c.principal
		}
		res, err := f.pilot.Describe(t.Context(), c.sql, f.bounds[c.bound], auth, principal, c.path)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Outcome != pilot.Refused || res.Code != c.code || res.Columns != nil || res.ParamTypes != nil {
			t.Errorf("%s: %s %s %v columns %v parameters %v, want refused %s and nothing described", c.name, res.Outcome, res.Code, res.Reasons, res.Columns, res.ParamTypes, c.code)
		}
	}
}
