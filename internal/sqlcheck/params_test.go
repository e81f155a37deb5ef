package sqlcheck_test

import (
	"errors"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestNullTwin: a statement's NULL twin has a NULL for each placeholder,
// its casts kept; putting the placeholders back into the twin's tree
// gives the statement again.
func TestNullTwin(t *testing.T) {
	for _, c := range []struct {
		sql, twin string
		params    int
	}{
		{"SELECT id FROM orders WHERE id = $1", "SELECT id FROM orders WHERE id = NULL", 1},
		{"SELECT id, 'x' AS k FROM orders WHERE status = $2::text AND id IN ($1, 3, -4)",
			"SELECT id, 'x' AS k FROM orders WHERE status = NULL::text AND id IN (NULL, 3, -4)", 2},
		{"UPDATE orders SET status = $1, updated_at = now() - interval '1 day' WHERE id = $2 /* c */ RETURNING id",
			"UPDATE orders SET status = NULL, updated_at = now() - '1 day'::interval WHERE id = NULL RETURNING id", 2},
		{"INSERT INTO kinds (id, ints) VALUES ($1, ARRAY[$2::int4, 7]) ON CONFLICT (id) DO NOTHING",
			"INSERT INTO kinds (id, ints) VALUES (NULL, ARRAY[NULL::int4, 7]) ON CONFLICT (id) DO NOTHING", 2},
		{"SELECT id FROM orders WHERE id = 5", "SELECT id FROM orders WHERE id = 5", 0},
	} {
		twin, tree, n, err := sqlcheck.NullTwin(c.sql, sqlcheck.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if twin != c.twin || n != c.params {
			t.Errorf("%s:\n twin %s (%d parameters)\n want %s (%d)", c.sql, twin, n, c.twin, c.params)
		}
		back, err := pg.Parse(twin)
		if err != nil {
			t.Fatal(err)
		}
		if err := sqlcheck.RestoreParams(tree, back); err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got, _ := pg.Deparse(back)
		want, _ := pg.Deparse(tree)
		if got != want {
			t.Errorf("%s: restored %s, want %s", c.sql, got, want)
		}
	}
	for _, sql := range []string{"SELECT $1; SELECT 2", "SELECT FROM WHERE", "", "SELECT 1 /* x"} {
		if _, _, _, err := sqlcheck.NullTwin(sql, sqlcheck.Limits{}); !errors.Is(err, sqlcheck.ErrNoParamTwin) {
			t.Errorf("%q: %v, want ErrNoParamTwin", sql, err)
		}
	}
}

// TestRestoreParamsRefusesOtherTrees: a tree that is not the twin's (a
// constant more or less, a value where the NULL was) is refused.
func TestRestoreParamsRefusesOtherTrees(t *testing.T) {
	orig, err := pg.Parse("SELECT id FROM orders WHERE id = $1 AND status = 'x'")
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{
		"SELECT id FROM orders WHERE id = 7 AND status = 'x'",
		"SELECT id FROM orders WHERE id = NULL",
		"SELECT id FROM orders WHERE id = NULL AND status = 'x' AND 1 = 1",
		"SELECT id FROM orders WHERE id = $1 AND status = 'x'",
	} {
		tree, err := pg.Parse(other)
		if err != nil {
			t.Fatal(err)
		}
		if err := sqlcheck.RestoreParams(orig, tree); !errors.Is(err, sqlcheck.ErrNoParamTwin) {
			t.Errorf("%s: %v, want ErrNoParamTwin", other, err)
		}
	}
}
