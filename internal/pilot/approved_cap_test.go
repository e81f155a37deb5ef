package pilot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestApprovedWriteStopsAtItsCap (issue 22): the approved path runs a
// statement only on the preview its approval signed, recomputed in the
// statement's own snapshot, so it reaches the rows the preview counted;
// should a run still reach more (a value computed at run time), the row
// cap stops it as it writes one row past the approval's max_rows, so it
// draws at most max_rows + 1 sequence values before it rolls back.
func TestApprovedWriteStopsAtItsCap(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	next := f.notes(t)
	for _, c := range []struct {
		sql  string
		rows int64
	}{
		{"INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, 100000)", 100000},
		{"UPDATE customers SET name = name || '' WHERE id <= 20", 20},
		{"DELETE FROM orders WHERE id <= 200", 200},
	} {
		before := next()
		n, err := f.pilot.RunApprovedGuarded(ctx, c.sql, 2)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "HM002" {
			t.Errorf("%s under an approval of 2 rows: %d rows, %v; want HM002", c.sql, n, err)
		}
		if drawn := next() - before; drawn > 3 {
			t.Errorf("%s drew %d sequence values under an approval of 2 rows", c.sql, drawn)
		}
		if n, err := f.pilot.RunApprovedGuarded(ctx, c.sql, c.rows); err != nil || n != c.rows {
			t.Errorf("%s under an approval of its %d rows: %d, %v", c.sql, c.rows, n, err)
		}
	}
}

// notes creates public.notes (a serial id and a body) on the fixture's
// target, has the Pilot read it, and returns the id its next insert
// would draw.
func (f *fixture) notes(t *testing.T, extra ...string) (next func() int64) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	cols := strings.Join(append([]string{"id serial PRIMARY KEY", "body text"}, extra...), ", ")
	if _, err := conn.Exec(ctx, "CREATE TABLE public.notes ("+cols+")"); err != nil {
		t.Fatal(err)
	}
	if err := f.pilot.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	return func() int64 {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END FROM public.notes_id_seq").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
