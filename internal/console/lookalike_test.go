package console_test

import (
	"html"
	"strings"
	"testing"

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
