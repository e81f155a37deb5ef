package pilot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestPreviewShowsWithoutRunning: a preview (issue 22) reads what a
// referred statement would do and runs none of it: no row it reaches is
// locked or changed, no sequence value is drawn, run-time values are
// shown as written, the table's own defaults and what would fire are
// listed from the catalog, and a row another session holds locked does
// not make it wait.
func TestPreviewShowsWithoutRunning(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	seq := f.notes(t, "kind text DEFAULT 'memo'", "at timestamptz DEFAULT now()")
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, ddl := range []string{
		"CREATE FUNCTION public.touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$",
		"CREATE TRIGGER notes_touch BEFORE INSERT ON public.notes FOR EACH ROW EXECUTE FUNCTION public.touch()",
	} {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	before := f.snapshot(t, "customers") + f.snapshot(t, "orders")
	nextID := seq()

	// Another session holds customer 3's row lock: the preview of an
	// UPDATE of that row does not wait for it (a SELECT takes none).
	holder, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT 1 FROM customers WHERE id = 3 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pv, _, err := f.pilot.Preview(ctx, "UPDATE customers SET name = 'John Smith', updated_at = now() WHERE id = 3")
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("the preview waited %v for a row lock", time.Since(start))
	}
	if pv.Kind != "update" || pv.Rows != 1 || len(pv.Before) != 1 || pv.Before[0]["name"] != "Jonh Smith" || pv.Before[0]["email"] != "jonh.smith@example.com" ||
		len(pv.After) != 1 || pv.After[0]["name"] != "John Smith" || pv.AsWritten[0]["updated_at"] != "now()" || pv.Digest == "" {
		t.Errorf("update preview %+v", pv)
	}
	_ = tx.Rollback(ctx)

	// A DELETE of customers lists the foreign key that references it.
	pv, _, err = f.pilot.Preview(ctx, "DELETE FROM customers WHERE id = 3")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Rows != 1 || !strings.Contains(strings.Join(pv.Fires, "\n"), "foreign key orders_customer_id_fkey of orders") {
		t.Errorf("delete preview: rows %d, fires %q", pv.Rows, pv.Fires)
	}

	// An INSERT: the serial's nextval is listed as a default, not drawn;
	// DEFAULT and now() are shown as written; the trigger is listed.
	pv, _, err = f.pilot.Preview(ctx, "INSERT INTO notes (body, kind, at) VALUES ('a', DEFAULT, now()), ('b', 'todo', now())")
	if err != nil {
		t.Fatal(err)
	}
	fires := strings.Join(pv.Fires, "\n")
	if pv.Rows != 2 || len(pv.After) != 2 || pv.After[0]["body"] != "a" || pv.AsWritten[0]["kind"] != "DEFAULT" || pv.AsWritten[1]["kind"] != "'todo'" ||
		pv.AsWritten[1]["at"] != "now()" || !strings.Contains(fires, "trigger notes_touch on notes") {
		t.Errorf("insert preview %+v", pv)
	}
	if !strings.HasPrefix(pv.Defaults["id"], "default nextval(") || pv.Defaults["kind"] != "default 'memo'::text" {
		t.Errorf("defaults %v: want id's nextval and kind's DEFAULT (written as DEFAULT in a row)", pv.Defaults)
	}
	if _, ok := pv.Defaults["at"]; ok {
		t.Errorf("defaults %v: at is supplied by the statement in every row", pv.Defaults)
	}
	if _, ok := pv.Defaults["body"]; ok {
		t.Errorf("defaults %v: body has no default", pv.Defaults)
	}

	// A bulk INSERT ... SELECT counts its rows without drawing a value.
	pv, _, err = f.pilot.Preview(ctx, "INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, 5000)")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Rows != 5000 {
		t.Errorf("insert ... select preview: %d rows, want 5000", pv.Rows)
	}

	if got := seq(); got != nextID {
		t.Errorf("the previews drew sequence values: next id %d, was %d", got, nextID)
	}
	if f.snapshot(t, "customers")+f.snapshot(t, "orders") != before {
		t.Error("a preview changed the target")
	}
	var notes int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM notes").Scan(&notes); err != nil || notes != 0 {
		t.Errorf("notes holds %d rows (%v) after previews only", notes, err)
	}
	if _, _, err := f.pilot.Preview(ctx, "DROP TABLE notes"); err == nil || !strings.Contains(err.Error(), pilot.ErrNotPreviewable.Error()) {
		t.Errorf("DROP TABLE previewed: %v", err)
	}
}
