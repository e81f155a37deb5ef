package bound

import (
	"slices"
	"strings"
	"testing"
)

// TestReservedWordColumns: a rule lists a column named by a reserved word
// as it is written, bare or in YAML's quotes ("order"), or in SQL's double
// quotes inside YAML's ('"end"'); fences and checks name it quoted, as SQL
// does. The bound holds the names themselves, every spelling gives the
// same bound, and what people read (the rule's summary, lints) quotes them.
func TestReservedWordColumns(t *testing.T) {
	t.Parallel()
	cat := ddlCatalog(t, `CREATE TABLE public.slots (id int PRIMARY KEY, "end" date NOT NULL, "order" int NOT NULL, "user" text NOT NULL, "from" text, "Note" text);`)
	src := func(cols string) string {
		return delegationWith(
			rule("op: select", "table: slots", "columns: "+cols, `fence: '"user" = ''ann'''`, "max_rows: 10"),
			rule("op: update", "table: slots", `columns: ["order", '"Note"']`, `fence: '"user" = ''ann'' AND "order" < 10'`, `check: '"order" BETWEEN 0 AND 100'`, "max_rows: 1"))
	}
	var first []byte
	for _, cols := range []string{
		`[id, end, "order", user, from, '"Note"']`,
		`[ID, END, Order, USER, FROM, '"Note"']`,
		`['"id"', '"end"', '"order"', '"user"', '"from"', '"Note"']`,
		"\n      - id\n      - end\n      - order\n      - user\n      - from\n      - '\"Note\"'",
	} {
		b, rep := compileSrc(t, src(cols), cat)
		if !rep.Signable {
			t.Fatalf("columns %s: not signable: %+v", cols, rep.Problems)
		}
		if want := []string{"Note", "end", "from", "id", "order", "user"}; !slices.Equal(b.Rules[0].Columns, want) {
			t.Errorf("columns %s compile to %q, want %q", cols, b.Rules[0].Columns, want)
		}
		c := canonical(t, b)
		if first == nil {
			first = c
		} else if string(c) != string(first) {
			t.Errorf("columns %s give another bound:\n%s\n%s", cols, c, first)
		}
		if b.Rules[0].Fence != `"user" = 'ann'` || b.Rules[1].Check != `"order" >= 0 AND "order" <= 100` && b.Rules[1].Check != `"order" BETWEEN 0 AND 100` {
			t.Errorf("fence %q, check %q", b.Rules[0].Fence, b.Rules[1].Check)
		}
		if got := Summary(b.Rules[0]); !strings.HasPrefix(got, `read "Note", "end", "from", id, "order", "user" of public.slots where "user" = 'ann'`) {
			t.Errorf("summary %q", got)
		}
		// The fence reads "order", which the rule writes: the lint names it
		// as SQL does.
		if _, ok := findProblem(rep.Lints, "allow[1].fence", `the fence reads "order", which this rule lets the grantee write`); !ok {
			t.Errorf("no lint naming \"order\": %+v", rep.Lints)
		}
	}
	// A keyword that is no column of the table is still a missing column.
	_, rep := compileSrc(t, src(`[id, select]`), cat)
	if _, ok := findProblem(rep.Problems, "allow[0].columns", `column "select" does not exist in public.slots`); !ok {
		t.Errorf("an unknown keyword column: %+v", rep.Problems)
	}
}
