package sqlcheck_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestCorpus runs every case of testdata/corpus/cases against its compiled
// delegation: the decision and the expected reason code, the canonical text
// (present when the statement may run, free of comments, stable when
// re-checked) and the golden record of every decision.
func TestCorpus(t *testing.T) {
	c := loadCorpus(t)
	total, commented := 0, 0
	for _, f := range c.Files {
		var golden bytes.Buffer
		fmt.Fprintf(&golden, "# Decisions for testdata/corpus/cases/%s.yaml; regenerate with\n", f.Stem)
		fmt.Fprintf(&golden, "# go test ./internal/sqlcheck/ -run TestCorpus -update\n")
		t.Run(f.Stem, func(t *testing.T) {
			for _, cc := range f.Cases {
				total++
				if len(comments(cc.SQL)) > 0 {
					commented++
				}
				rules := c.Rules[cc.Delegation]
				d := c.Checker.Check(cc.SQL, rules)
				writeGolden(&golden, cc.Name, d)
				t.Run(cc.Name, func(t *testing.T) {
					checkCase(t, c, cc, rules, d)
				})
			}
		})
		path := filepath.Join(corpusRoot, "golden", f.Stem+".golden")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, golden.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (run with -update to create it)", err)
			continue
		}
		if !bytes.Equal(want, golden.Bytes()) {
			t.Errorf("%s differs from the decisions (run with -update and review the diff):\n%s", path, firstDiff(string(want), golden.String()))
		}
	}
	if total < 700 {
		t.Errorf("the corpus has %d cases, expected at least 700: files went missing", total)
	}
	if commented < 20 {
		t.Errorf("only %d cases have comments: the comment checks would prove little", commented)
	}
	t.Logf("%d cases, %d with comments", total, commented)
}

func checkCase(t *testing.T, c *corpus, cc corpusCase, rules []sqlcheck.Rule, d sqlcheck.Decision) {
	t.Helper()
	if string(d.Outcome) != cc.Expect {
		t.Errorf("decision %s, want %s (%s)\nsql: %.300q\nreasons: %v", d.Outcome, cc.Expect, cc.Why, cc.SQL, d.ReasonStrings())
	}
	if cc.Reason != "" && !d.HasCode(cc.Reason) {
		t.Errorf("reasons lack %s (%s)\nsql: %.300q\nreasons: %v", cc.Reason, cc.Why, cc.SQL, d.ReasonStrings())
	}
	if len(d.Reasons) == 0 {
		t.Errorf("decision %s with no reasons", d.Outcome)
	}
	switch d.Outcome {
	case sqlcheck.Conforms, sqlcheck.Survey:
		if d.CanonicalSQL == "" {
			t.Errorf("%s decision without canonical SQL", d.Outcome)
		}
		if d.Rule == nil {
			t.Errorf("%s decision without a rule", d.Outcome)
		}
		if d.Outcome == sqlcheck.Survey && !d.HasCode(sqlcheck.CodeResidual) {
			t.Errorf("survey decision without a %s reason: %v", sqlcheck.CodeResidual, d.ReasonStrings())
		}
	case sqlcheck.Refer:
		if d.Rule != nil {
			t.Errorf("refer decision names rule %d", *d.Rule)
		}
	}
	if d.CanonicalSQL == "" {
		return
	}

	// Comments never reach the database (invariant 4): the canonical text
	// has no comment token, whatever the input had.
	if n := len(comments(d.CanonicalSQL)); n > 0 {
		t.Errorf("canonical SQL has %d comment tokens (input had %d): %.300q", n, len(comments(cc.SQL)), d.CanonicalSQL)
	}
	for _, cm := range comments(cc.SQL) {
		// The comment's text must not survive, unless the statement also
		// says it outside the comment.
		body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(cm.text, "--"), "/*"), "*/"))
		rest := cc.SQL[:cm.start] + " " + cc.SQL[cm.end:]
		if len(body) >= 4 && !strings.Contains(rest, body) && strings.Contains(d.CanonicalSQL, body) {
			t.Errorf("canonical SQL carries the text of the comment %.100q: %.300q", cm.text, d.CanonicalSQL)
		}
	}

	// The Pilot runs the canonical text, so it must decide exactly like the
	// statement that was checked, and deparse to itself. A refer's canonical
	// text may fail to parse (the deparser drops what the checker refused,
	// such as a non-constant type modifier); it must still refer.
	again := c.Checker.Check(d.CanonicalSQL, rules)
	if d.Outcome == sqlcheck.Refer && again.CanonicalSQL == "" {
		if again.Outcome != sqlcheck.Refer {
			t.Errorf("the canonical SQL of a refer decides %s", again.Outcome)
		}
		return
	}
	if again.Outcome != d.Outcome || !sameRule(again.Rule, d.Rule) || !slices.Equal(reasonCodes(again), reasonCodes(d)) {
		t.Errorf("re-checking the canonical SQL decides %s rule %s %v, the original %s rule %s %v\ncanonical: %.300q",
			again.Outcome, ruleString(again.Rule), reasonCodes(again), d.Outcome, ruleString(d.Rule), reasonCodes(d), d.CanonicalSQL)
	}
	if again.CanonicalSQL != d.CanonicalSQL {
		t.Errorf("deparse is not a fixed point:\nfirst:  %.300q\nsecond: %.300q", d.CanonicalSQL, again.CanonicalSQL)
	}
}

type comment struct {
	start, end int
	text       string
}

// comments returns the SQL comments (-- and /* */) of sql as the real
// scanner sees them: a "--" inside a string literal is no comment.
func comments(sql string) []comment {
	res, err := pg.Scan(sql)
	if err != nil {
		return nil
	}
	var out []comment
	for _, tok := range res.Tokens {
		if tok.Token == pg.Token_SQL_COMMENT || tok.Token == pg.Token_C_COMMENT {
			s, e := int(tok.Start), int(tok.End)
			if s >= 0 && s <= e && e <= len(sql) {
				out = append(out, comment{start: s, end: e, text: sql[s:e]})
			}
		}
	}
	return out
}

func sameRule(a, b *int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func ruleString(r *int) string {
	if r == nil {
		return "-"
	}
	return strconv.Itoa(*r)
}

// writeGolden appends one case's record: stable text, one field a line,
// the canonical SQL Go-quoted so control bytes and newlines stay visible.
func writeGolden(w *bytes.Buffer, name string, d sqlcheck.Decision) {
	fmt.Fprintf(w, "\n== %s\n", name)
	fmt.Fprintf(w, "decision: %s\n", d.Outcome)
	fmt.Fprintf(w, "rule: %s\n", ruleString(d.Rule))
	fmt.Fprintf(w, "reasons: %s\n", strings.Join(reasonCodes(d), " "))
	fmt.Fprintf(w, "canonical: %s\n", strconv.Quote(d.CanonicalSQL))
}

// firstDiff shows the first differing line of two golden texts.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d\n  golden: %.300s\n  now:    %.300s", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// TestCheckerConcurrent: a Checker is shared by every request, so the same
// statements decided from several goroutines at once decide as they do
// alone (run with -race to catch shared state).
func TestCheckerConcurrent(t *testing.T) {
	t.Parallel()
	c := loadCorpus(t)
	cases := c.allCases()
	want := make([]string, len(cases))
	for i, cc := range cases {
		want[i] = decisionKey(c.Checker.Check(cc.SQL, c.Rules[cc.Delegation]))
	}
	const workers = 4
	errs := make(chan string, workers)
	for w := range workers {
		go func() {
			for i := range cases {
				j := (i + w*len(cases)/workers) % len(cases) // each starts elsewhere
				cc := cases[j]
				if got := decisionKey(c.Checker.Check(cc.SQL, c.Rules[cc.Delegation])); got != want[j] {
					errs <- fmt.Sprintf("%s: %s concurrently, %s alone", cc.Name, got, want[j])
					return
				}
			}
			errs <- ""
		}()
	}
	for range workers {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}

func decisionKey(d sqlcheck.Decision) string {
	return fmt.Sprintf("%s %s %v %q", d.Outcome, ruleString(d.Rule), reasonCodes(d), d.CanonicalSQL)
}
