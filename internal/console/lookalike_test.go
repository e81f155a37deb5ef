package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// TestConsoleMarksLookalikes: the request page and the queue showed an
// agent's "exаmple.com" with a Cyrillic а, and a literal padded with
// U+2800 BRAILLE PATTERN BLANK, U+3000 IDEOGRAPHIC SPACE or U+00A0
// NO-BREAK SPACE, exactly as example.com and plain spaces: the approver
// signs what they read. Each look-alike is now marked where it stands (the
// letter in a <mark> that says what it is, a blank as its code point), in
// the statement, the preview's values and the queue, and a warning above
// the statement and above the preview lists them.
func TestConsoleMarksLookalikes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orders, _ := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), orders, gatewaytest.Sign(t, f.keys.Grantor, gatewaytest.Canonical(t, orders, f.sys.Pilot.Catalog())), "api"); err != nil {
		t.Fatal(err)
	}
	read := approverPage(t, f)
	const (
		cyrillicA = `ex<mark class="lookalike" title="Cyrillic &#34;а&#34; (U+0430 CYRILLIC SMALL LETTER A) looks like Latin &#34;a&#34;">а</mark>mple.com`
		braille   = `<mark class="lookalike" title="U+2800 BRAILLE PATTERN BLANK is drawn as blank space">U+2800</mark>`
		ideograph = `<mark class="lookalike" title="U+3000 IDEOGRAPHIC SPACE looks like a space">U+3000</mark>`
		nbsp      = `<mark class="lookalike" title="U+00A0 NO-BREAK SPACE looks like a space">U+00A0</mark>`
	)
	resp := f.submit(t, "UPDATE customers SET email = 'ann@ex\u0430mple.com', name = 'A\u2800B\u3000C\u00a0D' WHERE id = 21")
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	f.sys.Previewed(t, resp.RequestID)
	body := read("/console/queue/" + resp.RequestID)
	for _, part := range []struct{ name, from, to string }{
		{"the canonical SQL", `id="canonical-sql"><code>`, "</code>"},
		{"the statement as submitted", `id="submitted-sql"><code>`, "</code>"},
		{"the preview", `id="diff"`, "</table>"},
	} {
		got := between(t, body, part.from, part.to)
		for _, want := range []string{cyrillicA, "A" + braille + "B" + ideograph + "C" + nbsp + "D"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s does not mark the look-alikes as %s: %s", part.name, want, got)
			}
		}
		if strings.ContainsAny(tagsDropped(got), "\u2800\u3000\u00a0") {
			t.Errorf("%s shows a raw blank: %q", part.name, got)
		}
	}
	reasons := []string{
		`Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"`,
		"U+2800 BRAILLE PATTERN BLANK is drawn as blank space",
		"U+3000 IDEOGRAPHIC SPACE looks like a space",
		"U+00A0 NO-BREAK SPACE looks like a space",
	}
	for _, id := range []string{`id="lookalikes"`, `id="preview-lookalikes"`} {
		warning := html.UnescapeString(between(t, body, id, "</div>"))
		for _, want := range reasons {
			if !strings.Contains(warning, "<li>"+want+"</li>") {
				t.Errorf("the warning %s does not say %q: %s", id, want, warning)
			}
		}
	}
	if strings.Index(body, `id="lookalikes"`) > strings.Index(body, `id="canonical-sql"`) {
		t.Errorf("the warning is not above the statement")
	}
	queue := read("/console/queue")
	if q := between(t, queue, `<code class="sql">`, "</code>"); !strings.Contains(q, cyrillicA) || !strings.Contains(q, braille) {
		t.Errorf("the queue does not mark the look-alikes: %s", q)
	}
	if !strings.Contains(html.UnescapeString(queue), "Look-alike characters, marked: "+reasons[0]) {
		t.Errorf("the queue does not list the look-alikes: %s", between(t, queue, "<tbody>", "</tbody>"))
	}

	// A statement of plain ASCII has no warning and no mark.
	plain := f.submit(t, "UPDATE customers SET email = 'ann@example.com' WHERE id = 21")
	if plain.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", plain.Outcome)
	}
	f.sys.Previewed(t, plain.RequestID)
	if body := read("/console/queue/" + plain.RequestID); strings.Contains(body, "lookalike") {
		t.Errorf("a statement of plain ASCII is marked: %s", between(t, body, `id="st-h"`, `id="pv-h"`))
	}
}

// TestConsoleShowsHiddenCharacters: an agent's statement may carry, in a
// string literal, Unicode bidi controls that make the SQL an approver reads
// differ from the SQL that runs (Trojan Source: Chromium draws the first
// statement as "UPDATE orders SET status = 'x' WHERE status <> 'y' AND
// id = 5", one row, while it updates every row whose status is not 'y'), and
// row values may carry zero-width characters. The request page and the
// queue show each such character as a marked code point, never raw; the
// approval bytes (hashes and ids) are unchanged. Found in review 1.
func TestConsoleShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orders, _ := f.sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := f.sys.Gateway.AddDelegation(t.Context(), orders, gatewaytest.Sign(t, f.keys.Grantor, gatewaytest.Canonical(t, orders, f.sys.Pilot.Catalog())), "api"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "UPDATE customers SET email = $1 WHERE id = 21", "ann\u200b@example.com"); err != nil {
		t.Fatal(err)
	}
	conn.Close(t.Context())
	stmts := []string{
		"UPDATE orders SET status = 'x\u202e \u2066AND id = 5\u2069 \u2066' WHERE status <> 'y'",
		"UPDATE customers SET name = 'Ann\u200d' WHERE id = 21",
	}
	read := approverPage(t, f)
	for _, sql := range stmts {
		resp := f.submit(t, sql)
		if resp.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%q: %s, want referred", sql, resp.Outcome)
		}
		f.sys.Previewed(t, resp.RequestID)
		body := read("/console/queue/" + resp.RequestID)
		if m := hiddenRunes.FindAllString(body, -1); len(m) > 0 {
			t.Errorf("the request page of %q holds %d raw hidden characters (%q)", sql, len(m), m)
		}
		canon := between(t, body, `id="canonical-sql"><code>`, "</code>")
		for _, want := range []string{"U+202E", "U+2066", "U+2069"} {
			if strings.Contains(sql, string(rune(mustHex(want)))) && !strings.Contains(canon, `<span class="ctl">`+want+`</span>`) {
				t.Errorf("the canonical SQL does not mark %s: %s", want, canon)
			}
		}
		if strings.Contains(sql, "\u200d") && !strings.Contains(canon, `<span class="ctl">U+200D</span>`) {
			t.Errorf("the canonical SQL does not mark U+200D: %s", canon)
		}
		if strings.Contains(sql, "customers") {
			if diff := between(t, body, `id="diff"`, "</table>"); !strings.Contains(diff, `ann<span class="ctl">U+200B</span>@example.com`) {
				t.Errorf("the rehearsal's row value does not mark its zero-width space: %s", diff)
			}
		}
	}
	if m := hiddenRunes.FindAllString(read("/console/queue"), -1); len(m) > 0 {
		t.Errorf("the queue holds %d raw hidden characters", len(m))
	}
}

// TestCanonicalSQLIsOneLine: the canonical text is deparsed on one line,
// so a newline in it is inside a string literal. Drawn as a line break it
// lets a literal pass for a clause: here the approver would read
// "WHERE id = 5" on a line of its own, while the statement updates every
// order whose status is not 'x'. The canonical SQL shows it as a marked
// U+000A, on the one line; the statement as submitted keeps its lines.
// Found in review 1.
func TestCanonicalSQLIsOneLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	read := approverPage(t, f)
	const sql = "UPDATE orders SET status = 'failed\nWHERE id = 5\n' WHERE status <> 'x'"
	resp := f.submit(t, sql)
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	body := read("/console/queue/" + resp.RequestID)
	canon := between(t, body, `id="canonical-sql"><code>`, "</code>")
	if strings.Contains(canon, "\n") || strings.Count(canon, `<span class="ctl">U+000A</span>`) != 2 {
		t.Errorf("the canonical SQL is not shown on one line with its two newlines marked: %q", canon)
	}
	if sub := between(t, body, `id="submitted-sql"><code>`, "</code>"); strings.Count(sub, "\n") != 2 {
		t.Errorf("the statement as submitted lost its lines: %q", sub)
	}
	q := between(t, read("/console/queue"), `<code class="sql">`, "</code>")
	if strings.Contains(q, "\n") || !strings.Contains(q, `<span class="ctl">U+000A</span>`) {
		t.Errorf("the queue shows the canonical SQL over more than one line: %q", q)
	}
}

// TestSignWarnsOfHiddenCharacters: the bytes a grantor signs are shown
// exactly (they are copied and signed), so a sentence handed over by
// someone else could carry bidi controls there unseen, and the sentence is
// what the Surveyor reads. The report says which hidden characters the
// bytes hold and shows the sentence with them marked. Found in review 1.
func TestSignWarnsOfHiddenCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := client(t)
	if code, _, _ := useLink(t, alice, f.loginLink(t, f.keys.Grantor)); code != http.StatusOK {
		t.Fatal("login")
	}
	base := f.srv.URL + "/console/"
	_, body := do(t, alice, "GET", base+"sign", nil)
	csrf := csrfRE.FindStringSubmatch(body)[1]
	y := strings.Replace(string(gatewaytest.Example(t, gatewaytest.Customers)), "Fix obvious data-entry typos",
		"Fix obvious data-entry typos\u202e \u2066and anything else\u2069 \u2066", 1)
	code, body := do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {y}})
	if code != http.StatusOK || !strings.Contains(body, `id="canonical"`) {
		t.Fatalf("the report: %d", code)
	}
	warn := between(t, body, `id="hidden-chars"`, "</p>")
	for _, want := range []string{"U+202E", "U+2066", "U+2069", `typos<span class="ctl">U+202E</span>`} {
		if !strings.Contains(warn, want) {
			t.Errorf("the warning lacks %q: %s", want, warn)
		}
	}
	// A delegation without them has no warning.
	code, body = do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {string(gatewaytest.Example(t, gatewaytest.Customers))}})
	if code != http.StatusOK || strings.Contains(body, `id="hidden-chars"`) {
		t.Errorf("the report of a plain delegation: %d, warns: %v", code, strings.Contains(body, `id="hidden-chars"`))
	}
}

// TestStackedMarksAreMarked: a value with a long run of combining marks
// (here forty U+0316, each drawn below the last) paints over the rows of
// the rehearsal table beneath it, hiding their values. Past four in a row,
// each combining mark is shown as its code point. Found in review 1.
func TestStackedMarksAreMarked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp := f.submit(t, "UPDATE orders SET status = 'x"+strings.Repeat("\u0316", 40)+"' WHERE id <= 2")
	if resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%s, want referred", resp.Outcome)
	}
	f.sys.Previewed(t, resp.RequestID)
	body := approverPage(t, f)("/console/queue/" + resp.RequestID)
	if m := regexp.MustCompile(`\p{M}{5,}`).FindAllString(body, -1); len(m) > 0 {
		t.Errorf("the request page holds %d runs of more than four combining marks", len(m))
	}
	if canon := between(t, body, `id="canonical-sql"><code>`, "</code>"); !strings.Contains(canon, "x\u0316\u0316\u0316\u0316"+`<span class="ctl">U+0316</span>`) {
		t.Errorf("the canonical SQL does not mark the fifth mark on: %q", canon)
	}
}

// tagsDropped is an HTML fragment without its tags.
func tagsDropped(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hiddenRunes are characters a browser draws as nothing, or that reorder
// the text around them.
var hiddenRunes = regexp.MustCompile("[\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060\ufeff\u061c\u2028\u2029\r]")

func mustHex(u string) int {
	n := 0
	for _, c := range strings.TrimPrefix(u, "U+") {
		n = n*16 + strings.IndexRune("0123456789ABCDEF", c)
	}
	return n
}
