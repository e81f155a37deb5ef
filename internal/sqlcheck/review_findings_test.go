package sqlcheck_test

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestReviewGroupingSetPositionsStayInTheText: inside ROLLUP, CUBE,
// GROUPING SETS and an implicit row of GROUP BY, PostgreSQL reads an
// integer constant as a position in the select list, exactly as in a plain
// GROUP BY 1; pg_query's normalize still makes it a parameter, and a
// parameter there is a value to group by. Such a constant must stay in
// the template's text (its value part of the key), or the template runs a
// statement other than the one checked (found in review: GROUP BY CUBE (1)
// over count(*) is an error as text, and ran as a template).
func TestReviewGroupingSetPositionsStayInTheText(t *testing.T) {
	c := loadCorpus(t)
	for _, tc := range []struct {
		sql           string
		params, baked int
	}{
		{"SELECT count(*) FROM orders GROUP BY CUBE (1)", 0, 1},
		{"SELECT count(*) FROM orders GROUP BY ROLLUP ((1))", 0, 1},
		{"SELECT count(*) FROM orders GROUP BY GROUPING SETS ((1), ())", 0, 1},
		{"SELECT status, count(*) FROM orders WHERE id > 3 GROUP BY ROLLUP (1, (2))", 1, 2},
		{"SELECT count(*) FROM orders GROUP BY (1, 2)", 0, 2},
		{"SELECT count(*) FROM orders GROUP BY GROUPING SETS (ROLLUP (1), CUBE (2))", 0, 2},
		// Elsewhere a row's constants are values, as before.
		{"SELECT id FROM orders WHERE (id, 1) = (2, 3)", 3, 0},
		{"SELECT id % 3 FROM orders GROUP BY id % 3", 0, 0},
	} {
		s, ok := sqlcheck.ShapeOf(tc.sql, sqlcheck.Limits{})
		if !ok {
			if tc.params+tc.baked > 0 {
				t.Errorf("%q: no shape", tc.sql)
			}
			continue
		}
		a := sqlcheck.Analyze(tc.sql, c.Checker.Catalog, sqlcheck.Limits{})
		tpl, err := sqlcheck.NewTemplate(a, s)
		if err != nil {
			if tc.params+tc.baked > 0 {
				t.Errorf("%q: %v", tc.sql, err)
			}
			continue
		}
		if tpl.NumParams() != tc.params || len(tpl.Baked()) != tc.baked {
			t.Errorf("%q: %d parameters and %d baked, want %d and %d", tc.sql, tpl.NumParams(), len(tpl.Baked()), tc.params, tc.baked)
		}
	}
}
