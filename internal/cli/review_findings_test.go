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
	ctx := context.Background()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	keys := gatewaytest.NewKeys(t)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: keys})
	api := httptest.NewServer(sys.API.Handler())
	defer api.Close()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "bob")
	if err := os.WriteFile(keyFile, keys.ApproverPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	const sql = "UPDATE orders SET status = 'x\u202e \u2066AND id = 5\u2069 \u2066\u009b2J\u200b', total_cents = 9007199254740993 WHERE status <> 'y'"
	resp, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v", resp, err)
	}
	sys.Previewed(t, resp.RequestID)
	out, errOut, code := run(t, dir, nil, "queue", "show", resp.RequestID, "--server", api.URL, "--key", keyFile)
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
