package sqlcheck_test

import (
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestInputCaps: input that would crash the C parser (SIGSEGV in cgo,
// which no recover catches) is refused before it reaches it. Each case is
// followed by an ordinary check: reaching it proves the process survived.
func TestInputCaps(t *testing.T) {
	c := loadCorpus(t)
	rules := c.Rules["orders_ops"]
	const ok = "SELECT id FROM orders WHERE status = 'pending'"
	nest := func(n int) string {
		return "SELECT id FROM orders WHERE " + strings.Repeat("(", n) + "id = 1" + strings.Repeat(")", n)
	}
	chain := func(n int) string { // n operators in all, counting the "="
		return "SELECT id FROM orders WHERE id = 0" + strings.Repeat(" + 1", n-1)
	}
	for _, tc := range []struct {
		name   string
		sql    string
		want   sqlcheck.Outcome
		code   string
		parsed bool // whether the statement reaches the parser
	}{
		{"24000-term-sum", "SELECT " + strings.TrimSuffix(strings.Repeat("1+", 24000), "+"), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		{"1MB-statement", "SELECT id FROM orders WHERE status = '" + strings.Repeat("x", 1<<20) + "'", sqlcheck.Refer, sqlcheck.CodeInputTooLarge, false},
		{"1MB-of-whitespace", "SELECT id FROM orders" + strings.Repeat(" ", 1<<20), sqlcheck.Refer, sqlcheck.CodeInputTooLarge, false},
		{"one-byte-over", "SELECT id FROM orders WHERE status = '" + strings.Repeat("x", 64<<10) + "'", sqlcheck.Refer, sqlcheck.CodeInputTooLarge, false},
		{"200-parentheses", nest(200), sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"201-parentheses", nest(201), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		{"201-brackets", "SELECT id FROM orders WHERE id = " + strings.Repeat("ARRAY[", 201) + "1" + strings.Repeat("]", 201) + "[1]", sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		{"201-unbalanced-parentheses", "SELECT id FROM orders WHERE " + strings.Repeat("(", 201), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		{"4001-operators", chain(4001), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		{"4001-NOTs", "SELECT id FROM orders WHERE " + strings.Repeat("NOT ", 4001) + "true", sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		{"2001-CASE-NOTs", "SELECT id FROM orders WHERE " + strings.Repeat("CASE WHEN NOT ", 2001) + "true" + strings.Repeat(" THEN true END", 2001), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, false},
		// Under the operator cap the parser sees the chain; the tree is
		// deeper than the walker goes, so it still refers.
		{"4000-operators", chain(4000), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, true},
		{"900-operators", chain(900), sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"IS-NULL-chain-under-the-byte-cap", "SELECT id FROM orders WHERE id" + strings.Repeat(" IS NULL", 8000), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, true},
		{"ISNULL-chain-under-the-byte-cap", "SELECT id FROM orders WHERE id" + strings.Repeat(" ISNULL", 9300), sqlcheck.Refer, sqlcheck.CodeInputTooDeep, true},
		{"parentheses-in-a-string", "SELECT id FROM orders WHERE status = '" + strings.Repeat("(", 20000) + strings.Repeat("[", 20000) + "'", sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"parentheses-in-a-quoted-identifier", "SELECT id AS \"" + strings.Repeat("(", 300) + "\" FROM orders", sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"parentheses-in-a-dollar-string", "SELECT id FROM orders WHERE status = $$" + strings.Repeat("((", 5000) + "$$", sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"operators-in-a-block-comment", "SELECT id FROM orders /* " + strings.Repeat("+ - * / < > = ~ ! @ # % ^ & | ` ? ", 1600) + "*/", sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"operators-in-line-comments", "SELECT id FROM orders" + strings.Repeat("\n-- + + + NOT CASE AND OR :: <= >= <> ((((", 1000) + "\n", sqlcheck.Conforms, sqlcheck.CodeCovered, true},
		{"operators-in-a-string", "SELECT id FROM orders WHERE status = '" + strings.Repeat("1+", 20000) + "'", sqlcheck.Conforms, sqlcheck.CodeCovered, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := c.Checker.Check(tc.sql, rules)
			if d.Outcome != tc.want || !d.HasCode(tc.code) {
				t.Errorf("%s: %s %.300v, want %s with %s", tc.name, d.Outcome, d.ReasonStrings(), tc.want, tc.code)
			}
			a := sqlcheck.Analyze(tc.sql, c.Checker.Catalog, sqlcheck.Limits{})
			// The caps' own reasons say "over the ... limit"; the parser's
			// own depth error does not.
			refused := a.Tree == nil && len(a.Reasons) > 0 && strings.Contains(a.Reasons[0].Message, "over the")
			if parsed := !refused; parsed != tc.parsed {
				t.Errorf("%s: reached the parser %v, want %v (%.300v)", tc.name, parsed, tc.parsed, d.ReasonStrings())
			}
			if !tc.parsed && !a.Unparseable() {
				t.Errorf("%s: a refused input is not Unparseable", tc.name)
			}
			if d := c.Checker.Check(ok, rules); d.Outcome != sqlcheck.Conforms {
				t.Fatalf("after %s: an ordinary statement decides %s %v", tc.name, d.Outcome, d.ReasonStrings())
			}
		})
	}
}

// TestLimitsDefaults: the zero Limits are the documented caps, and a
// configured cap is honoured both ways.
func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	got := sqlcheck.Limits{}.WithDefaults()
	if want := (sqlcheck.Limits{MaxBytes: 64 << 10, MaxDepth: 200, MaxOperators: 4000}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	if got := (sqlcheck.Limits{MaxBytes: 10, MaxDepth: 3, MaxOperators: 7}).WithDefaults(); got.MaxBytes != 10 || got.MaxDepth != 3 || got.MaxOperators != 7 {
		t.Errorf("configured limits changed: %+v", got)
	}
	c := loadCorpus(t)
	rules := c.Rules["orders_ops"]
	tight := &sqlcheck.Checker{Catalog: c.Checker.Catalog, Limits: sqlcheck.Limits{MaxBytes: 40, MaxDepth: 1, MaxOperators: 1}}
	for _, tc := range []struct{ sql, code string }{
		{"SELECT id FROM orders WHERE status = 'pending'", sqlcheck.CodeInputTooLarge},
		{"SELECT id FROM orders WHERE ((id=1))", sqlcheck.CodeInputTooDeep},
		{"SELECT id FROM orders WHERE id<1+1", sqlcheck.CodeInputTooDeep},
	} {
		if d := tight.Check(tc.sql, rules); d.Outcome != sqlcheck.Refer || !d.HasCode(tc.code) {
			t.Errorf("tight limits: %s: %s %v, want %s", tc.sql, d.Outcome, d.ReasonStrings(), tc.code)
		}
	}
	if d := tight.Check("SELECT id FROM orders WHERE (id=1)", rules); d.Outcome != sqlcheck.Conforms {
		t.Errorf("tight limits: a statement at every cap: %s %v", d.Outcome, d.ReasonStrings())
	}
}
