package cli_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/backtest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// TestDelegationBacktest runs the command over a store holding decision
// entries in the gateway's form: the JSON report's totals are exact, the
// text report names the change, and --since excludes what is older.
func TestDelegationBacktest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := exampleDir(t)
	path := filepath.Join(dir, "store.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	clock := func() time.Time { return old }
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := logbook.NewCheckpointSigner("harbormaster", priv)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := logbook.New(st, signer, func() time.Time { return clock() }, nil, logbook.Config{Origin: "harbormaster/logbook"})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lb.Run(rctx) }()
	decide := func(id, principal, sql, outcome, path string) {
		t.Helper()
		if _, err := lb.Append(ctx, logbook.Record{Kind: logbook.KindDecision,
			Subjects: map[string]string{"request": id, "principal": principal, "target": "shop"},
			Payload: map[string]any{"request_id": id, "principal": principal, "target": "shop", "statement": sql,
				"outcome": outcome, "path": path, "reasons": []string{}}}); err != nil {
			t.Fatal(err)
		}
	}
	decide("req_old", "agent:demo", "SELECT id, name FROM customers WHERE region = 'EU'", "referred", "")
	clock = time.Now
	decide("req_1", "agent:demo", "SELECT id, status FROM orders", "run", "compiled")
	decide("req_2", "agent:demo", "UPDATE customers SET name = 'John Smith' WHERE id = 3", "referred", "")
	decide("req_3", "agent:other", "SELECT id, status FROM orders", "referred", "")
	decide("req_4", "agent:demo", "DROP TABLE orders", "rejected", "")
	decide("req_5", "agent:demo", "SELECT id, email FROM customers", "refused", "")
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st.Close()

	out, errOut, code := run(t, dir, nil, "delegation", "backtest", "fix-name-typos.yaml", "--store", "store.db", "--schema", "shop.sql", "--since", "1d", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep backtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := backtest.Totals{Statements: 4, Would: backtest.Counts{Surveyed: 1, Referred: 2, Rejected: 1}, Was: backtest.Counts{FastPath: 1, Referred: 1, Rejected: 1, Refused: 1},
		Changed: 3, Wider: 1, Narrower: 1, Neither: 1}
	if rep.Totals != want || rep.Tier != "B" || len(rep.Rows) != 4 || rep.Rows[0].RequestID != "req_1" {
		t.Fatalf("report %+v, want totals %+v", rep, want)
	}
	out, errOut, code = run(t, dir, nil, "delegation", "backtest", "fix-name-typos.yaml", "--store", "store.db", "--schema", "shop.sql", "--since", "3d")
	if code != 0 || !strings.Contains(out, "5 statement(s)") || !strings.Contains(out, "was referred, would be fast_path") ||
		!strings.Contains(out, "  was rejected, would be rejected\n    DROP TABLE orders\n    why: DROP statements are not allowed") ||
		!strings.Contains(out, "changed   4: 2 with less human involvement than then, 1 with more, 1 between referred, rejected and refused\n") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code = run(t, dir, nil, "delegation", "backtest", "fix-name-typos.yaml", "--store", "store.db", "--schema", "shop.sql", "--since", "soon"); code != 2 || !strings.Contains(errOut, "--since") {
		t.Fatalf("a bad window: exit %d: %s", code, errOut)
	}
	// The tour's delegation (docs/delegations.md) backtests.
	wider, err := filepath.Abs("../../examples/backtest/wider.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, dir, nil, "delegation", "backtest", wider, "--store", "store.db", "--schema", "shop.sql", "--since", "3d")
	if code != 0 || !strings.Contains(out, "backtest of a tier B delegation for agent:demo on shop") {
		t.Fatalf("examples/backtest/wider.yaml: exit %d\n%s\n%s", code, out, errOut)
	}
}
