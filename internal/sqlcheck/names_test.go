package sqlcheck_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestParseColumnName: a column name as a delegation lists it. A keyword
// alone, reserved ones included, is the column of that name; SQL's
// double quotes keep case; anything but one name is refused. Each name
// read back from its QuoteIdent form is the same name.
func TestParseColumnName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"id": "id", "ID": "id", `"ID"`: "ID", ` status `: "status",
		"end": "end", "END": "end", `"end"`: "end", "order": "order", "user": "user", "from": "from",
		"select": "select", "name": "name", "type": "type", "int": "int", "current_user": "current_user",
		`"Order"`: "Order", `"two words"`: "two words", `"a""b"`: `a"b`,
	} {
		got, err := sqlcheck.ParseColumnName(in)
		if err != nil || got != want {
			t.Errorf("ParseColumnName(%q) = %q, %v; want %q", in, got, err, want)
			continue
		}
		if back, err := sqlcheck.ParseColumnName(sqlcheck.QuoteIdent(got)); err != nil || back != got {
			t.Errorf("ParseColumnName(QuoteIdent(%q)) = %q, %v", got, back, err)
		}
	}
	for _, in := range []string{"", " ", "*", "id + 1", "t.id", "end end", "id, status", "order by", "$1", "'end'", "1", "end;"} {
		if got, err := sqlcheck.ParseColumnName(in); !errors.Is(err, sqlcheck.ErrName) {
			t.Errorf("ParseColumnName(%q) = %q, %v; want ErrName", in, got, err)
		}
	}
}

// TestReservedWordColumnsCheck: statements that name reserved-word columns
// quoted are checked like any other: covered when the rule lists them,
// referred for the one it does not, and deparsed with the quotes.
func TestReservedWordColumnsCheck(t *testing.T) {
	t.Parallel()
	cat, err := sqlcheck.ParseSchemaDDL(`CREATE TABLE public.slots (id int PRIMARY KEY, "end" date, "order" int, "user" text, "from" text);`, nil)
	if err != nil {
		t.Fatal(err)
	}
	slots := sqlcheck.TableName{Schema: "public", Name: "slots"}
	rules := []sqlcheck.Rule{
		{Index: 0, Op: sqlcheck.OpSelect, Table: slots, Columns: []string{"end", "id", "order", "user"}},
		{Index: 1, Op: sqlcheck.OpUpdate, Table: slots, Columns: []string{"order"}},
	}
	for sql, want := range map[string]sqlcheck.Outcome{
		`SELECT "end", "order" FROM slots WHERE "user" = 'ann' ORDER BY "order"`: sqlcheck.Conforms,
		`SELECT s."end" FROM slots s WHERE s."order" > 1`:                        sqlcheck.Conforms,
		`UPDATE slots SET "order" = "order" + 1 WHERE "user" = 'ann'`:            sqlcheck.Conforms,
		`SELECT "from" FROM slots`:                                               sqlcheck.Refer,
		`UPDATE slots SET "end" = now() WHERE id = 1`:                            sqlcheck.Refer,
	} {
		d := sqlcheck.Check(sqlcheck.Analyze(sql, cat, sqlcheck.Limits{}), rules)
		if d.Outcome != want {
			t.Errorf("%s: %s %q, want %s", sql, d.Outcome, d.ReasonStrings(), want)
		}
		if want == sqlcheck.Conforms && !strings.Contains(d.CanonicalSQL, `"order"`) && !strings.Contains(d.CanonicalSQL, `"end"`) {
			t.Errorf("%s: canonical %q lost the quotes", sql, d.CanonicalSQL)
		}
		if want == sqlcheck.Refer && !strings.Contains(strings.Join(d.ReasonStrings(), " "), `"`) {
			t.Errorf("%s: the reasons %q do not name the column quoted", sql, d.ReasonStrings())
		}
	}
}
