package backtest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/backtest"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/store"
	"github.com/harbormaster-dev/harbormaster/internal/store/storetest"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// The statements agent:demo sends while only the Tier A orders delegation
// (examples/unstick-orders.yaml) is in force, and what the gateway decides.
var traffic = []struct {
	sql string
	was backtest.Outcome
}{
	{"SELECT id, status FROM orders WHERE status = 'pending'", backtest.FastPath},
	{"SELECT id, customer_id FROM orders /* the fast path */", backtest.FastPath},
	{"SELECT id, name FROM customers WHERE region = 'EU'", backtest.Referred},
	{"UPDATE customers SET name = 'John Smith' WHERE id = 3", backtest.Referred},
	{"DELETE FROM orders WHERE id = 1", backtest.Referred},
	{"SELEC id FROM orders", backtest.Rejected},
	// Inside the static check, and rolled back by the Pilot's check guard.
	{"UPDATE orders SET status = 'shipped' WHERE id = 4", backtest.FastPath},
	// Answered as an error at once, whatever the delegations: no human
	// could approve them (several statements, DDL, a placeholder).
	{"SELECT id FROM orders; SELECT id FROM customers", backtest.Rejected},
	{"DROP TABLE orders", backtest.Rejected},
	{"SELECT id, status FROM orders WHERE id = $1", backtest.Rejected},
	// Past agent:demo's referral rate (the three referrals above): refused.
	{"SELECT id, email FROM customers", backtest.Refused},
}

// rejectedReasons are the reasons the rejected rows give, by row.
var rejectedReasons = map[int]string{5: "syntax error", 7: "multiple_statements", 8: "drop", 9: "placeholder"}

// narrower lets agent:demo read two columns of orders only.
const narrower = `sentence: Read order statuses.
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, status]
    max_rows: 500
`

// wider adds the EU customers' names, readable and (Tier B) correctable.
const wider = `sentence: Unstick orders and fix obvious typos in EU customers' names.
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.orders
    columns: [id, customer_id, status, created_at, updated_at]
    max_rows: 500
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
    max_rows: 200
  - op: update
    table: public.customers
    columns: [name]
    fence: region = 'EU'
    max_rows: 1
    residual: only obvious data-entry typos in the name
`

func compile(t *testing.T, yaml string, cat *sqlcheck.Catalog) *bound.Bound {
	t.Helper()
	b, rep, err := backtest.Compile([]byte(yaml), "test.yaml", cat)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("the delegation does not compile: %v %+v", err, rep)
	}
	return b
}

// TestBacktest prepares a logbook with a real gateway run (real SQLite
// store, real target, real decisions, a real denial) and replays it under
// a narrower and a wider delegation, with exact counts.
func TestBacktest(t *testing.T) {
	ctx := context.Background()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	keys := gatewaytest.NewKeys(t)
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: storetest.New(t, store.SQLite, &shared).Path, Keys: keys,
		Gateway: gateway.Config{ReferralRate: quota.Rate{Count: 3, Per: time.Hour}}})
	yaml, sig := sys.SignedExample(t, gatewaytest.Orders)
	if _, _, err := sys.Gateway.AddDelegation(ctx, yaml, sig, gatewaytest.Orders); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(traffic))
	for i, s := range traffic {
		resp, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, s.sql)
		var se *gateway.SQLError
		var fe *gateway.FloodError
		switch {
		case errors.As(err, &se):
			ids[i] = se.RequestID
			if s.was != backtest.Rejected {
				t.Fatalf("%q: %v", s.sql, err)
			}
		case errors.As(err, &fe):
			ids[i] = fe.RequestID
			if s.was != backtest.Refused {
				t.Fatalf("%q: %v", s.sql, err)
			}
		case err != nil:
			t.Fatalf("%q: %v", s.sql, err)
		case s.was == backtest.Rejected || s.was == backtest.Refused:
			t.Fatalf("%q: %s, want %s", s.sql, resp.Outcome, s.was)
		default:
			ids[i] = resp.RequestID
			if (resp.Outcome == gateway.OutcomeExecuted) != (s.was == backtest.FastPath && i != 6) {
				t.Fatalf("%q: %s, want %s", s.sql, resp.Outcome, s.was)
			}
		}
	}
	// Another agent's statement is not agent:demo's traffic.
	if _, err := sys.Gateway.Submit(ctx, gatewaytest.Other, gatewaytest.Target, "SELECT id, name FROM customers"); err != nil {
		t.Fatal(err)
	}
	// A human denies the update.
	v := sys.Previewed(t, ids[3])
	denial, err := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: v.ID, Target: v.Target,
		StatementSHA256: marque.StatementHash(v.CanonicalSQL), Reason: "not a typo"})
	if err != nil {
		t.Fatal(err)
	}
	dsig, err := keys.Approver.Sign(signing.NamespaceDenial, denial)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Gateway.Deny(ctx, v.ID, denial, dsig); err != nil {
		t.Fatal(err)
	}
	if err := sys.Logbook.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	headBefore, _, err := sys.Logbook.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cat := sys.Pilot.Catalog()

	cases := []struct {
		name       string
		yaml       string
		would      []backtest.Outcome
		totals     backtest.Totals
		wantReason map[int]string // row -> a reason it must give
	}{
		{"narrower", narrower,
			[]backtest.Outcome{backtest.FastPath, backtest.Referred, backtest.Referred, backtest.Referred, backtest.Referred, backtest.Rejected, backtest.Referred,
				backtest.Rejected, backtest.Rejected, backtest.Rejected, backtest.Referred},
			backtest.Totals{Statements: 11, Would: backtest.Counts{FastPath: 1, Referred: 6, Rejected: 4},
				Was: backtest.Counts{FastPath: 3, Referred: 3, Rejected: 4, Refused: 1}, Changed: 3, Narrower: 2, Neither: 1},
			map[int]string{1: "customer_id"}},
		{"wider", wider,
			[]backtest.Outcome{backtest.FastPath, backtest.FastPath, backtest.FastPath, backtest.Surveyed, backtest.Referred, backtest.Rejected, backtest.Referred,
				backtest.Rejected, backtest.Rejected, backtest.Rejected, backtest.Referred},
			backtest.Totals{Statements: 11, Would: backtest.Counts{FastPath: 3, Surveyed: 1, Referred: 3, Rejected: 4},
				Was: backtest.Counts{FastPath: 3, Referred: 3, Rejected: 4, Refused: 1}, Changed: 4, Wider: 2, Narrower: 1, Neither: 1},
			map[int]string{4: "delete"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := compile(t, c.yaml, cat)
			rep, err := backtest.Run(ctx, backtest.Input{Logbook: sys.Logbook, Delegation: b, Catalog: cat, Since: 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Totals != c.totals {
				t.Errorf("totals %+v, want %+v", rep.Totals, c.totals)
			}
			// Every statement is counted once on each side, and every change
			// once.
			sum := func(c backtest.Counts) int { return c.FastPath + c.Surveyed + c.Referred + c.Rejected + c.Refused }
			if tt := rep.Totals; sum(tt.Would) != tt.Statements || sum(tt.Was) != tt.Statements || tt.Wider+tt.Narrower+tt.Neither != tt.Changed {
				t.Errorf("the totals do not add up: %+v", tt)
			}
			if len(rep.Rows) != len(traffic) {
				t.Fatalf("%d rows, want %d", len(rep.Rows), len(traffic))
			}
			for i, r := range rep.Rows {
				if r.RequestID != ids[i] || r.Statement != traffic[i].sql || r.Was != traffic[i].was || r.Would != c.would[i] ||
					r.Changed != (r.Was != r.Would) {
					t.Errorf("row %d: %+v, want request %s, was %s, would %s", i, r, ids[i], traffic[i].was, c.would[i])
				}
				if r.Would == backtest.Referred && len(r.Reasons) == 0 {
					t.Errorf("row %d is referred without a reason", i)
				}
			}
			// A statement the gateway rejected at once is rejected under any
			// delegation, for the gateway's reason.
			for i, want := range rejectedReasons {
				if r := rep.Rows[i]; r.Would != backtest.Rejected || len(r.Reasons) != 1 || !strings.Contains(strings.ToLower(r.Reasons[0]+" "+strings.Join(r.WasReasons, " ")), want) ||
					r.Reasons[0] != strings.Join(r.WasReasons, "") || r.Rule != nil {
					t.Errorf("row %d: would %s for %q (was %q), want rejected for the reason the gateway gave, naming %q", i, r.Would, r.Reasons, r.WasReasons, want)
				}
			}
			for i, want := range c.wantReason {
				if got := strings.ToLower(strings.Join(rep.Rows[i].Reasons, " ")); !strings.Contains(got, want) {
					t.Errorf("row %d reasons %q, want one naming %q", i, got, want)
				}
			}
			// The canonical text is the real parser's deparse: the comment is gone.
			if cs := rep.Rows[1].CanonicalSQL; cs == "" || strings.Contains(cs, "fast path") {
				t.Errorf("canonical %q: not the deparsed statement", cs)
			}
			if rep.Rows[3].Then != "denied" || rep.Rows[2].Then != "" || rep.Rows[0].Then != "" || rep.Rows[6].Then != "rolled back by the Pilot: check_violation" {
				t.Errorf("then: %q, %q, %q and %q, want denied, nothing, nothing and the Pilot's rollback",
					rep.Rows[3].Then, rep.Rows[2].Then, rep.Rows[0].Then, rep.Rows[6].Then)
			}
			if rep.Grantee != gatewaytest.Agent || rep.Target != gatewaytest.Target || rep.Tier != b.Tier() {
				t.Errorf("report names %s on %s (tier %s)", rep.Grantee, rep.Target, rep.Tier)
			}
		})
	}

	t.Run("window", func(t *testing.T) {
		b := compile(t, wider, cat)
		rep, err := backtest.Run(ctx, backtest.Input{Logbook: sys.Logbook, Delegation: b, Catalog: cat, Since: time.Hour, Now: time.Now().Add(2 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.Statements != 0 || len(rep.Rows) != 0 {
			t.Fatalf("a window that ended an hour after the traffic holds %d statements", rep.Totals.Statements)
		}
		rep, err = backtest.Run(ctx, backtest.Input{Logbook: sys.Logbook, Delegation: b, Catalog: cat, Since: time.Hour, MaxRows: 2})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.Statements != len(traffic) || len(rep.Rows) != 2 || !rep.Truncated || rep.Rows[1].RequestID != ids[len(ids)-1] {
			t.Fatalf("MaxRows 2: %d statements, %d rows (truncated %v)", rep.Totals.Statements, len(rep.Rows), rep.Truncated)
		}
	})

	// The backtest wrote nothing.
	if err := sys.Logbook.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if head, _, err := sys.Logbook.Head(ctx); err != nil || head != headBefore {
		t.Fatalf("the logbook head moved from %d to %d (%v)", headBefore, head, err)
	}
}

func TestParseWindow(t *testing.T) {
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "12h": 12 * time.Hour, "2w": 14 * 24 * time.Hour,
		"90m": 90 * time.Minute, "1h30m": 90 * time.Minute} {
		if got, err := backtest.ParseWindow(in); err != nil || got != want {
			t.Errorf("ParseWindow(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "0d", "-3d", "1.5d", "30", "thirty days", "-1h"} {
		if _, err := backtest.ParseWindow(in); err == nil {
			t.Errorf("ParseWindow(%q) accepted", in)
		}
	}
}

func TestCompileRefusesRulesThatDoNotCompile(t *testing.T) {
	cat, err := sqlcheck.ParseSchemaDDL("CREATE TABLE public.orders (id bigint NOT NULL, status text NOT NULL);", []string{"public"})
	if err != nil {
		t.Fatal(err)
	}
	if _, rep, err := backtest.Compile([]byte(strings.Replace(narrower, "[id, status]", "[id, nope]", 1)), "x.yaml", cat); !errors.Is(err, backtest.ErrDoesNotCompile) || len(rep.Problems) == 0 {
		t.Fatalf("an unknown column: %v, %+v", err, rep)
	}
	// No expiry: not signable, but a backtest runs.
	if b, _, err := backtest.Compile([]byte(strings.Replace(narrower, "expires: 2027-12-31T00:00:00Z\n", "", 1)), "x.yaml", cat); err != nil || b == nil {
		t.Fatalf("without an expiry: %v", err)
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	if _, err := backtest.Run(context.Background(), backtest.Input{}); !errors.Is(err, backtest.ErrBadInput) {
		t.Fatalf("empty input: %v", err)
	}
}
