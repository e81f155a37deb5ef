package console

import (
	"fmt"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// The preview's before/after table pairs an UPDATE's rows by position
// (its after images hold the columns it sets, over the rest of the row),
// marks exactly the values that change and those shown as written, and
// keeps an inserted row on its own.
func TestDiff(t *testing.T) {
	t.Parallel()
	pv := &pilot.Preview{Kind: "update", Rows: 2,
		Before:    []map[string]any{{"id": 2.0, "name": "Jonh", "region": "EU"}, {"id": 5.0, "name": "Ana", "region": "EU"}},
		After:     []map[string]any{{"name": "John"}, {"name": "Anna"}},
		AsWritten: []map[string]string{{"updated_at": "now()"}, {"updated_at": "now()"}}}
	pv.Before[0]["updated_at"], pv.Before[1]["updated_at"] = "2026-01-01", "2026-01-02"
	d := diff(pv)
	if got := d.Columns; len(got) != 4 || got[0] != "id" || got[1] != "name" || got[2] != "region" || got[3] != "updated_at" {
		t.Fatalf("columns %v, want id first then sorted", got)
	}
	if len(d.Rows) != 2 {
		t.Fatalf("%d rows, want 2 (two updated)", len(d.Rows))
	}
	changed := func(r diffRow) (out []string) {
		for i, c := range r.Cells {
			if c.Changed {
				out = append(out, fmt.Sprintf("%s:%s>%s%v", d.Columns[i], c.Before, c.After, c.AfterAsWritten))
			}
		}
		return out
	}
	for i, want := range [][]string{{"name:Jonh>Johnfalse", "updated_at:2026-01-01>now()true"}, {"name:Ana>Annafalse", "updated_at:2026-01-02>now()true"}} {
		if got := changed(d.Rows[i]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("row %d changes %v, want %v", i, got, want)
		}
	}
	// An INSERT's rows stand alone, as added.
	d = diff(&pilot.Preview{Kind: "insert", Rows: 1, After: []map[string]any{{"id": 9.0, "name": "New"}}, AsWritten: []map[string]string{{}}})
	if len(d.Rows) != 1 || d.Rows[0].Side != "after" {
		t.Fatalf("an inserted row: %+v", d.Rows)
	}
	if c := d.Rows[0].Cells[1]; c.HasBefore || !c.HasAfter || c.Changed || c.After != "New" {
		t.Errorf("the inserted row's name cell %+v", c)
	}
	// A DELETE's rows stand alone, as before.
	d = diff(&pilot.Preview{Kind: "delete", Rows: 1, Before: []map[string]any{{"n": 1.0}}})
	if len(d.Rows) != 1 || d.Rows[0].Side != "before" {
		t.Errorf("a deleted row: %+v", d.Rows)
	}
}
