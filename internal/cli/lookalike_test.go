package cli_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
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

// referredQueue submits sql as the agent to a fresh system (it must be
// referred), has a human's preview computed, and returns its request id and
// a runner of harbormaster queue as bob against that system.
func referredQueue(t *testing.T, sql string) (string, func(args ...string) (stdout, stderr string, code int)) {
	t.Helper()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	keys := gatewaytest.NewKeys(t)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: keys})
	api := httptest.NewServer(sys.API.Handler())
	t.Cleanup(api.Close)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "bob")
	if err := os.WriteFile(keyFile, keys.ApproverPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := sys.Gateway.Submit(context.Background(), gatewaytest.Agent, gatewaytest.Target, sql)
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v", resp, err)
	}
	sys.Previewed(t, resp.RequestID)
	return resp.RequestID, func(args ...string) (string, string, int) {
		return run(t, dir, nil, append(append([]string{"queue"}, args...), "--server", api.URL, "--key", keyFile)...)
	}
}
