package sqlcheck_test

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestUnapprovable: what no human could approve is known from the text,
// identically whatever the catalog holds (invariant 10); everything else
// is not unapprovable.
func TestUnapprovable(t *testing.T) {
	t.Parallel()
	full, err := sqlcheck.NewCatalog([]sqlcheck.Table{{Name: sqlcheck.TableName{Schema: "public", Name: "orders"},
		Columns: []sqlcheck.Column{{Name: "id", Type: "bigint"}, {Name: "status", Type: "text"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := sqlcheck.NewCatalog(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		sql, code string
	}{
		{"UPDATE orders SET status = 'x' WHERE id = 1; DROP TABLE orders", sqlcheck.CodeMultipleStatements},
		{"SELECT 1; SELECT 2", sqlcheck.CodeMultipleStatements},
		{"DROP TABLE orders", sqlcheck.CodeStatementNotAllow},
		{"CREATE TABLE x (id int)", sqlcheck.CodeStatementNotAllow},
		{"TRUNCATE orders", sqlcheck.CodeStatementNotAllow},
		{"SET search_path = evil", sqlcheck.CodeStatementNotAllow},
		{"BEGIN", sqlcheck.CodeStatementNotAllow},
		{"SELECT id INTO copy FROM orders", sqlcheck.CodeSelectInto},
		{"SELECT id FROM orders FOR UPDATE", sqlcheck.CodeLockingClause},
		{"SELECT id FROM orders WHERE id = $1", sqlcheck.CodeParamNotAllowed},
		{"UPDATE orders SET status = $2 WHERE id = 1", sqlcheck.CodeParamNotAllowed},
		{"UPDATE nosuch SET x = $1", sqlcheck.CodeParamNotAllowed},
		// Not unapprovable: a human may approve, or the reason depends on the catalog.
		{"SELECT id FROM orders WHERE status = '$1'", ""},
		{"SELECT id FROM nosuch", ""},
		{"SELECT nosuch FROM orders", ""},
		{"DELETE FROM orders WHERE id = 7", ""},
		{"SELEC id FROM orders", ""},
		{"", ""},
	}
	for _, c := range cases {
		for name, cat := range map[string]*sqlcheck.Catalog{"full": full, "empty": empty} {
			a := sqlcheck.Analyze(c.sql, cat, sqlcheck.Limits{})
			r, ok := a.Unapprovable()
			if ok != (c.code != "") || ok && r.Code != c.code {
				t.Errorf("%q (%s catalog): %v %+v, want %q", c.sql, name, ok, r, c.code)
			}
		}
	}
}
