package cli_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestQueueShowMarksHiddenCharacters: queue show is the CLI's signing
// ceremony ("runs as" is the statement the approval covers). Its one-line
// printing replaced only C0 controls, so a statement's string literal could
// carry bidi controls (U+202E, U+2066..U+2069: a terminal that applies
// bidi draws "... status = 'x' WHERE status <> 'y' AND id = 5" while every
// row is updated) and C1 controls (U+009B is
// CSI to a terminal that reads 8-bit controls) to the approver's terminal.
// Each is printed as its code point. And the rehearsal's numbers were
// read as floats, so an integer past 2^53 printed as another value.
func TestQueueShowMarksHiddenCharacters(t *testing.T) {
	t.Parallel()
	const sql = "UPDATE orders SET status = 'x\u202e \u2066AND id = 5\u2069 \u2066\u009b2J\u200b', total_cents = 9007199254740993 WHERE status <> 'y'"
	id, queue := referredQueue(t, sql)
	out, errOut, code := queue("show", id)
	if code != 0 {
		t.Fatalf("queue show: exit %d\n%s\n%s", code, out, errOut)
	}
	if m := regexp.MustCompile("[\u0080-\u009f\u202a-\u202e\u2066-\u2069\u200b-\u200f]").FindAllString(out, -1); len(m) > 0 {
		t.Errorf("queue show printed %d raw hidden characters %q:\n%s", len(m), m, out)
	}
	for _, want := range []string{"⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧", "⟦U+2066 LEFT-TO-RIGHT ISOLATE⟧", "⟦U+2069 POP DIRECTIONAL ISOLATE⟧", "⟦U+009B⟧", "⟦U+200B ZERO WIDTH SPACE⟧"} {
		if !strings.Contains(out, "runs as   UPDATE orders SET status = 'x") || !strings.Contains(out, want) {
			t.Errorf("queue show does not mark %s:\n%s", want, out)
		}
	}
	// The report holds the integer exactly; so does what queue show prints.
	if !strings.Contains(out, "total_cents=9007199254740993") {
		t.Errorf("queue show does not print the rehearsal's exact value:\n%s", out)
	}
}
