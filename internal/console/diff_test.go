package console

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// The rehearsal's before/after table pairs rows by id, marks exactly the
// values that change, and keeps an inserted or deleted row on its own.
func TestDiff(t *testing.T) {
	t.Parallel()
	rep := &pilot.Rehearsal{Kind: "update", RowsReached: 2,
		Before: []map[string]any{{"id": 2.0, "name": "Jonh", "region": "EU"}, {"id": 5.0, "name": "Ana", "region": "EU"}},
		After:  []map[string]any{{"id": 5.0, "name": "Anna", "region": "EU"}, {"id": 2.0, "name": "John", "region": "EU"}, {"id": 9.0, "name": "New", "region": "EU"}}}
	d := diff(rep)
	if got := d.Columns; len(got) != 3 || got[0] != "id" || got[1] != "name" || got[2] != "region" {
		t.Fatalf("columns %v, want id first then sorted", got)
	}
	if len(d.Rows) != 3 {
		t.Fatalf("%d rows, want 3 (two updated, one only after)", len(d.Rows))
	}
	changed := func(r diffRow) (out []string) {
		for i, c := range r.Cells {
			if c.Changed {
				out = append(out, d.Columns[i]+":"+c.Before+">"+c.After)
			}
		}
		return out
	}
	for i, want := range []string{"name:Jonh>John", "name:Ana>Anna"} {
		if got := changed(d.Rows[i]); len(got) != 1 || got[0] != want {
			t.Errorf("row %d changes %v, want %s", i, got, want)
		}
	}
	if c := d.Rows[2].Cells[1]; c.HasBefore || !c.HasAfter || c.Changed || c.After != "New" {
		t.Errorf("the inserted row's name cell %+v", c)
	}
	// Without ids, rows pair by position.
	d = diff(&pilot.Rehearsal{Before: []map[string]any{{"n": 1.0}}, After: []map[string]any{{"n": 2.0}}})
	if len(d.Rows) != 1 || !d.Rows[0].Cells[0].Changed {
		t.Errorf("positional pairing: %+v", d.Rows)
	}
}
