package cli_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestQueueShowMarksLookalikes: queue show and queue list printed an
// agent's "exаmple.com" (a Cyrillic а) as example.com, and U+2800, U+3000
// and U+00A0 in a literal as plain spaces. Each is now printed as its code
// point and name between ⟦ and ⟧, in the statement and in the preview's
// values, under a warning that lists them; the letter itself appears only
// in that list, where it is named.
func TestQueueShowMarksLookalikes(t *testing.T) {
	t.Parallel()
	const sql = "UPDATE customers SET email = 'ann@ex\u0430mple.com', name = 'A\u2800B\u3000C\u00a0D ⟦U+0041⟧' WHERE id = 21"
	id, queue := referredQueue(t, sql)
	out, errOut, code := queue("show", id)
	if code != 0 {
		t.Fatalf("queue show: exit %d\n%s\n%s", code, out, errOut)
	}
	const (
		email = "ann@ex⟦U+0430 CYRILLIC SMALL LETTER A⟧mple.com"
		name  = "A⟦U+2800 BRAILLE PATTERN BLANK⟧B⟦U+3000 IDEOGRAPHIC SPACE⟧C⟦U+00A0 NO-BREAK SPACE⟧D " +
			"⟦U+27E6 MATHEMATICAL LEFT WHITE SQUARE BRACKET⟧U+0041⟦U+27E7 MATHEMATICAL RIGHT WHITE SQUARE BRACKET⟧"
	)
	var runsAs, sets string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "runs as "):
			runsAs = l
		case strings.Contains(l, "email="):
			sets = l
		}
	}
	for _, line := range []string{runsAs, sets} {
		if !strings.Contains(line, email) || !strings.Contains(line, name) {
			t.Errorf("a line does not mark the look-alikes as %s and %s: %q\n%s", email, name, line, out)
		}
	}
	if strings.ContainsAny(out, "\u2800\u3000\u00a0") {
		t.Errorf("queue show printed a raw blank:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "\u0430") && !strings.HasPrefix(l, "  ! ") {
			t.Errorf("queue show printed the Cyrillic а outside the list of look-alikes: %q", l)
		}
	}
	for _, want := range []string{
		"warning   the statement holds characters that look like others, marked ⟦…⟧ below:\n" +
			`  ! Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"` + "\n" +
			"  ! U+2800 BRAILLE PATTERN BLANK is drawn as blank space\n" +
			"  ! U+3000 IDEOGRAPHIC SPACE looks like a space\n" +
			"  ! U+00A0 NO-BREAK SPACE looks like a space\n" +
			"submitted ",
		"  warning: the values hold characters that look like others, marked ⟦…⟧ below:\n" +
			`  ! Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("queue show does not warn with %q:\n%s", want, out)
		}
	}

	out, errOut, code = queue("list")
	if code != 0 {
		t.Fatalf("queue list: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, email) || !strings.Contains(out, `    look-alike characters, marked ⟦…⟧: Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"; U+2800`) {
		t.Errorf("queue list does not mark or list the look-alikes:\n%s", out)
	}
}

// TestQueueShowMarksHiddenCharacters: queue show is the CLI's signing
// ceremony ("runs as" is the statement the approval covers). Its one-line
// printing replaced only C0 controls, so a statement's string literal could
// carry bidi controls (U+202E, U+2066..U+2069: a terminal that applies
// bidi draws "... status = 'x' WHERE status <> 'y' AND id = 5" while every
// row is updated) and C1 controls (U+009B is
// CSI to a terminal that reads 8-bit controls) to the approver's terminal.
// Each is printed as its code point. And the rehearsal's numbers were
// read as floats, so an integer past 2^53 printed as another value. Found
// in review 1.
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

// referredQueue submits sql as the agent to a fresh system (it must be
// referred), has a human's preview computed, and returns its request id and
// a runner of harbormaster queue as bob against that system.
func referredQueue(t *testing.T, sql string) (string, func(args ...string) (stdout, stderr string, code int)) {
	t.Helper()
	sys, queue := queueNode(t, false)
	resp, err := sys.Gateway.Submit(context.Background(), gatewaytest.Agent, gatewaytest.Target, sql)
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v", resp, err)
	}
	sys.Previewed(t, resp.RequestID)
	return resp.RequestID, queue
}

// queueNode is a node over a fresh shop target (with the example
// delegations, if examples) and the queue command against its API, with
// bob's key.
func queueNode(t *testing.T, examples bool) (*gatewaytest.System, func(args ...string) (stdout, stderr string, code int)) {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	keys := gatewaytest.NewKeys(t)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: keys})
	if examples {
		sys.AddExamples(t)
	}
	api := httptest.NewServer(sys.API.Handler())
	t.Cleanup(api.Close)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "bob")
	if err := os.WriteFile(keyFile, keys.ApproverPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return sys, func(args ...string) (string, string, int) {
		return run(t, dir, nil, append(append([]string{"queue"}, args...), "--server", api.URL, "--key", keyFile)...)
	}
}
