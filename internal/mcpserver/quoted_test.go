package mcpserver

import (
	"slices"
	"testing"
)

// TestQuotedColumns: describe_tables' text names columns as a statement
// must write them, so an agent reading "end" writes "end", not end (a
// delegation may list columns named by reserved words, issue 23).
func TestQuotedColumns(t *testing.T) {
	got := quoted([]string{"id", "end", "order", "user", "Note", "total_cents"})
	want := []string{"id", `"end"`, `"order"`, `"user"`, `"Note"`, "total_cents"}
	if !slices.Equal(got, want) {
		t.Fatalf("quoted: %q, want %q", got, want)
	}
}
