package leadsman_test

import (
	"context"
	"testing"
	"time"

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

// TestFindingNoteTimeRevealsRehearsal (hostile review, rv-http): the
// Leadsman notes a rehearsed request at its next poll and an unrehearsed
// one only after RehearsalWait (15 s by default), and counts every note
// in harbormaster_leadsman_notes_total, which GET /metrics serves to
// anyone on the API's listener, agents included. Whether a referred
// statement's rehearsal succeeded depends on rows outside the agent's
// bound, so an agent that sends a probe and watches the counter learns
// it: the oracle the background rehearsal exists to close (invariant 10).
// Here two referrals of one statement differ only in the email (a column
// no rule lists) of a US customer (outside the fence).
//
// Not fixed: proposed, note every referral on one schedule (after
// RehearsalWait from its creation, rehearsed or not), or serve /metrics
// on an operator listener or behind an operator credential.
func TestFindingNoteTimeRevealsRehearsal(t *testing.T) {
	t.Skip("FINDING: when the Leadsman notes a referral (and so /metrics) depends on whether its rehearsal succeeded")
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
	if v := sys.WaitRehearsed(t, clean); v.RehearsalSHA256 == "" {
		t.Fatal("setup: the first probe was not rehearsed")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE customers SET email = 'probe@example.com' WHERE id = 21 AND region = 'US'"); err != nil {
		t.Fatal(err)
	}
	poisoned := submit(probe)
	decoy := submit("UPDATE customers SET name = 'Jon Smith' WHERE id = 3")
	if v := sys.WaitRehearsed(t, decoy); v.RehearsalSHA256 == "" {
		t.Fatal("setup: the decoy was not rehearsed")
	}
	time.Sleep(200 * time.Millisecond)
	if v, err := sys.Gateway.Request(ctx, poisoned, ""); err != nil || v.RehearsalSHA256 != "" {
		t.Fatalf("setup: the second probe's rehearsal should have failed: %v", err)
	}

	srv := llmtest.NewOpenAI(t, llmtest.Text("A note."))
	w, err := llm.NewWriter(llm.ProviderConfig{Name: "scripted", Kind: llm.KindOpenAI, BaseURL: srv.URL, Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New([]string{gatewaytest.Target}, nil, nil)
	l, err := leadsman.New(ctx, leadsman.Config{RehearsalWait: time.Hour, Metrics: m}, w, sys.Store, sys.Logbook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.Once(ctx); err != nil {
		t.Fatal(err)
	}
	noted := func(id string) bool {
		_, err := leadsman.NewReader(sys.Store).Note(ctx, id)
		return err == nil
	}
	if noted(clean) != noted(poisoned) {
		t.Fatalf("one poll notes the referral whose rehearsal succeeded (%v) and not the one whose rehearsal failed on a row outside the bound (%v): the notes counter on /metrics tells the agent which", noted(clean), noted(poisoned))
	}
}
