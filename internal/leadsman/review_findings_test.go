package leadsman_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

// TestNotesIgnoreHiddenRows (hostile review, rv-http; issue 22): a note
// was once written on a schedule that depended on whether the request's
// background rehearsal succeeded, which depends on rows outside the
// agent's bound, and harbormaster_leadsman_notes_total told the agent
// which. Now nothing of a referred statement runs until a human asks, and
// the Leadsman never asks: two referrals of one probe on a target that
// differs only in the email (a column no rule lists) of a US customer
// (outside the fence) are noted in the same poll, from the same prompt,
// and neither gains a preview.
func TestNotesIgnoreHiddenRows(t *testing.T) {
	ctx := context.Background()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: storetest.New(t, store.SQLite, &shared).Path, Keys: gatewaytest.NewKeys(t)})
	sys.AddExamples(t)
	const probe = "SELECT count(*) FROM customers WHERE 1 / (CASE WHEN email = 'probe@example.com' THEN 0 ELSE 1 END) = 1"
	submit := func(sql string) string {
		t.Helper()
		r, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
		if err != nil || r.Outcome != gateway.OutcomeReferred {
			t.Fatalf("%s: %+v, %v", sql, r, err)
		}
		return r.RequestID
	}
	clean := submit(probe)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE customers SET email = 'probe@example.com' WHERE id = 21 AND region = 'US'"); err != nil {
		t.Fatal(err)
	}
	poisoned := submit(probe)

	srv := llmtest.NewOpenAI(t, llmtest.Text("A note."))
	w, err := llm.NewWriter(llm.ProviderConfig{Name: "scripted", Kind: llm.KindOpenAI, BaseURL: srv.URL, Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New([]string{gatewaytest.Target}, nil, nil)
	l, err := leadsman.New(ctx, leadsman.Config{Metrics: m}, w, sys.Store, sys.Logbook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if n, err := l.Once(ctx); n != 2 || err != nil {
		t.Fatalf("one poll noted %d of the two referrals (%v), want both", n, err)
	}
	for _, id := range []string{clean, poisoned} {
		if _, err := leadsman.NewReader(sys.Store).Note(ctx, id); err != nil {
			t.Fatalf("%s not noted: %v", id, err)
		}
		if v, err := sys.Gateway.Request(ctx, id, ""); err != nil || v.PreviewSHA256 != "" || len(v.Preview) != 0 {
			t.Fatalf("%s: the Leadsman's note gave it a preview (%v): only a human asks for one", id, err)
		}
	}
	// The prompts differ in the request id and each prompt's own random
	// marker, nothing else.
	reqs := srv.AllRequests()
	user := func(r llmtest.Request, id string) string {
		marker := strings.Fields(r.System[strings.Index(r.System, "BEGIN UNTRUSTED ")+len("BEGIN UNTRUSTED "):])[0]
		return strings.NewReplacer(id, "ID", marker, "MARKER").Replace(r.User)
	}
	if len(reqs) != 2 || user(reqs[0], clean) != user(reqs[1], poisoned) {
		t.Fatalf("the two prompts differ beyond their request ids and markers: %+v", reqs)
	}
}
