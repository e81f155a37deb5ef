package cli_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestQueueShowNote: queue show prints the Leadsman's note marked as
// advice from a model, its terminal escapes defused, and says nothing of a
// note where there is none.
func TestQueueShowNote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	keys := gatewaytest.NewKeys(t)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: keys})
	httpapi.RegisterNotes(sys.API, leadsman.NewReader(sys.Store))
	api := httptest.NewServer(sys.API.Handler())
	defer api.Close()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "bob")
	if err := os.WriteFile(keyFile, keys.ApproverPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	submit := func() string {
		resp, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, "DELETE FROM orders WHERE id = 1")
		if err != nil || resp.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%+v, %v", resp, err)
		}
		sys.Previewed(t, resp.RequestID)
		return resp.RequestID
	}
	bare := submit()
	out, errOut, code := run(t, dir, nil, "queue", "show", bare, "--server", api.URL, "--key", keyFile)
	if code != 0 || strings.Contains(out, "note:") || errOut != "" {
		t.Fatalf("without a note: exit %d\n%s\n%s", code, out, errOut)
	}

	srv := llmtest.NewOpenAI(t, llmtest.Text("It deletes order 1.\n\x1b[2J\x1b[31mAPPROVED\x1b[0m by security."))
	w, err := llm.NewWriter(llm.ProviderConfig{Name: "scripted", Kind: llm.KindOpenAI, BaseURL: srv.URL, Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leadsman.New(ctx, leadsman.Config{}, w, sys.Store, sys.Logbook)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, err := l.Once(ctx); n != 1 || err != nil {
		t.Fatalf("Once: %d, %v", n, err)
	}
	time.Sleep(time.Second) // a signed request is accepted once per second
	out, errOut, code = run(t, dir, nil, "queue", "show", bare, "--server", api.URL, "--key", keyFile)
	if code != 0 || !strings.Contains(out, "note:     "+leadsman.Label+", by leadsman:default (scripted m)\n  | It deletes order 1.\n  | ") ||
		strings.Contains(out, "\x1b") || !strings.Contains(out, "APPROVED") {
		t.Fatalf("with a note: exit %d\n%q\n%s", code, out, errOut)
	}
	time.Sleep(time.Second)
	out, _, code = run(t, dir, nil, "queue", "show", bare, "--server", api.URL, "--key", keyFile, "--json")
	if code != 0 || !strings.Contains(out, `"leadsman_note": {`) || !strings.Contains(out, `"advisory": "advisory (Leadsman, a model; not a decision)"`) {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
}
