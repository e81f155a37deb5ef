package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// prompts records what each juror was asked.
type prompts struct {
	mu   sync.Mutex
	seen []llmtest.Request
}

func (p *prompts) record(req llmtest.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, req)
	p.mu.Unlock()
}

func (p *prompts) all() []llmtest.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]llmtest.Request(nil), p.seen...)
}

// TestReview5PanelIsShownEveryResidualClause: a statement may rely on
// several rules with residual clauses (the write's and a read's). The
// panel was shown only the last of them in rule order, so the clause of
// the write could go unjudged: with a select rule's lenient clause after
// an update rule's "only obvious typos", "SET name = 'Mallory'" was
// judged against the select's clause alone. Every clause relied on is now
// in the certify and refute prompts (and none in the shape screen's).
func TestReview5PanelIsShownEveryResidualClause(t *testing.T) {
	t.Parallel()
	const readClause = "only customers who asked for a correction themselves"
	var p prompts
	b := llmtest.Scripted(func(req llmtest.Request) llm.Verdict {
		p.record(req)
		return llm.Refer
	})
	f := newTierB(t, b, tierBOptions{edit: func(y []byte) []byte {
		return []byte(strings.Replace(string(y), "    max_rows: 200\n", "    max_rows: 200\n    residual: "+readClause+"\n", 1))
	}})
	if f.d.Bound.Rules[0].Residual != readClause {
		t.Fatalf("rule 0 is %+v, want the read clause", f.d.Bound.Rules[0])
	}
	f.sys.EnableTierB(t, f.d, 0, f.panel.Identity(), f.panel.Bundle().Version)
	f.mustRefer(t, "UPDATE customers SET name = 'John Smith' WHERE id = 3", "the Surveyor referred it")
	writeClause := f.d.Bound.Rules[residualRule].Residual
	seen := p.all()
	if len(seen) != 3 {
		t.Fatalf("%d juror calls, want 3", len(seen))
	}
	for _, req := range seen {
		shape := strings.Contains(req.System, "shape screen")
		for _, clause := range []string{readClause, writeClause} {
			if got := strings.Contains(req.User, clause); got == shape {
				t.Errorf("juror (shape screen %v) shown clause %q: %v; prompt:\n%s", shape, clause, got, req.User)
			}
		}
	}
}

// TestReview5ExecutedValuesAreTheRehearsedOnes: the Pilot compared the
// rows an UPDATE reaches with its rehearsal, and their count, but not the
// values it writes. A value that depends on the clock (or on chance:
// gen_random_uuid) showed the panel a typo fix in the rehearsal and wrote
// something else at execution. The written columns of the after images are
// now compared too, and a difference rolls back and refers.
func TestReview5ExecutedValuesAreTheRehearsedOnes(t *testing.T) {
	t.Parallel()
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote pilot %v", remote), func(t *testing.T) {
			t.Parallel()
			executedValuesAreTheRehearsedOnes(t, remote)
		})
	}
}

func executedValuesAreTheRehearsedOnes(t *testing.T, remote bool) {
	var p prompts
	var at atomic.Pointer[time.Time]
	b := llmtest.Scripted(func(req llmtest.Request) llm.Verdict {
		p.record(req)
		// Answer once the clock has passed the statement's switch instant.
		time.Sleep(time.Until(at.Load().Add(200 * time.Millisecond)))
		return llm.Conforms
	})
	f := newTierB(t, b, tierBOptions{tune: func(o *gatewaytest.Options) { o.RemotePilot = remote }})
	switchAt := time.Now().Add(time.Second).UTC()
	at.Store(&switchAt)
	before := f.customers(t)
	sql := fmt.Sprintf("UPDATE customers SET name = CASE WHEN now() < '%s' THEN 'John Smith' ELSE 'Mallory' END WHERE id = 3",
		switchAt.Format("2006-01-02 15:04:05.999999+00"))
	f.mustRefer(t, sql, "differ")
	for _, req := range p.all() {
		if !strings.Contains(untrusted(req.User), `"after":[{"id":3,"name":"John Smith"`) {
			t.Fatalf("the panel was not shown the typo fix in the rehearsal:\n%s", req.User)
		}
	}
	if after := f.customers(t); after != before {
		t.Errorf("customers changed:\n%s\nwant\n%s", after, before)
	}
	if got := f.name(t, 3); got != "Jonh Smith" {
		t.Errorf("row 3's name is %q", got)
	}
}

// TestReview5SurveyedPathRecheckedAfterThePanel: the path was checked open
// (switches, enablement, suspension, the delegation in force) before the
// panel, which may deliberate for surveyor.timeout (30 s), and its conforms
// was acted on whatever happened meanwhile: Tier B switched off, or the
// delegation revoked, while the jurors thought, and the statement still
// ran. The path is now checked again when the panel answers conforms.
func TestReview5SurveyedPathRecheckedAfterThePanel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		act  func(ctx context.Context, f *tierB, revoke [2][]byte) error
		why  string
	}{
		{"switched off", func(ctx context.Context, f *tierB, _ [2][]byte) error {
			return f.sys.Gateway.SetSwitch(ctx, switches.Key{Name: switches.TierB, Scope: switches.Deployment}, false, "alice")
		}, "Tier B is switched off"},
		{"revoked", func(ctx context.Context, f *tierB, revoke [2][]byte) error {
			_, err := f.sys.Gateway.Revoke(ctx, revoke[0], revoke[1])
			return err
		}, "revoked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var fp atomic.Pointer[tierB]
			var revoke atomic.Pointer[[2][]byte]
			var once sync.Once
			var actErr atomic.Pointer[error]
			b := llmtest.Scripted(func(llmtest.Request) llm.Verdict {
				once.Do(func() {
					if err := tc.act(context.Background(), fp.Load(), *revoke.Load()); err != nil {
						actErr.Store(&err)
					}
				})
				return llm.Conforms
			})
			f := newTierB(t, b, tierBOptions{})
			act, sig := revocation(t, f.sys.Opts.Keys.Grantor, signing.NamespaceRevocation, f.d, gatewaytest.Target)
			revoke.Store(&[2][]byte{act, sig})
			fp.Store(f)
			before, receipts := f.customers(t), gatewaytest.Receipts(t, f.dsn)
			resp := f.submit(t, "UPDATE customers SET name = 'John Smith' WHERE id = 3")
			if e := actErr.Load(); e != nil {
				t.Fatalf("the act during the panel failed: %v", *e)
			}
			if !referred(resp, "while the Surveyor judged") || !strings.Contains(strings.Join(resp.Reasons, "\n"), tc.why) {
				t.Errorf("%s path %q %q, want referred because %q while the Surveyor judged", resp.Outcome, resp.Path, resp.Reasons, tc.why)
			}
			if f.customers(t) != before || gatewaytest.Receipts(t, f.dsn) != receipts {
				t.Errorf("the statement ran")
			}
		})
	}
}

// TestReview5TruncatedRehearsalRefers: the rehearsal shows the panel at
// most MaxImageRows (50) rows each way. A statement reaching more rows
// than that was judged on the rows shown, the rest unseen by the panel and
// absent from the reviewer's evidence set. It now refers before the panel.
func TestReview5TruncatedRehearsalRefers(t *testing.T) {
	t.Parallel()
	f := newTierB(t, llmtest.AlwaysConforms(), tierBOptions{maxRows: 3,
		edit: func(y []byte) []byte {
			return []byte(strings.Replace(string(y), "    max_rows: 1\n", "    max_rows: 3\n", 1))
		},
		tune: func(o *gatewaytest.Options) { o.Pilot.MaxImageRows = 2 }})
	before := f.customers(t)
	f.mustRefer(t, "UPDATE customers SET name = initcap(name) WHERE id IN (3, 4, 7)", "more rows than its rehearsal can show")
	if f.panelCalls() != 0 {
		t.Errorf("the panel was convened on a truncated rehearsal")
	}
	if f.customers(t) != before {
		t.Errorf("customers changed")
	}
	// Two rows are shown in full and may run.
	resp := f.submit(t, "UPDATE customers SET name = initcap(name) WHERE id IN (3, 4)")
	if resp.Outcome != gateway.OutcomeExecuted || resp.RowsAffected != 2 {
		t.Errorf("two rows: %s %d %q", resp.Outcome, resp.RowsAffected, resp.Reasons)
	}
}

// TestReview5RowChangedBetweenTheComparisonAndTheWrite: at execution the
// Pilot read the before images, compared them with the rehearsal, then
// ran the write, each statement in a snapshot of its own (READ
// COMMITTED). A row changed by a transaction that committed in between
// passed the comparison with its old value and was then written from its
// new one: the panel judged "Jonh Smith" to "John Smith", and the write
// overwrote "Maria Rossi". The surveyed write now runs in one snapshot
// (REPEATABLE READ) with its comparison, and such a row refers.
func TestReview5RowChangedBetweenTheComparisonAndTheWrite(t *testing.T) {
	t.Parallel()
	var dsn atomic.Pointer[string]
	var once sync.Once
	errs := make(chan error, 1)
	b := llmtest.Scripted(func(llmtest.Request) llm.Verdict {
		once.Do(func() {
			// Another client changes row 3 and holds its lock until the
			// Pilot's write waits on it, then commits.
			ctx := context.Background()
			c, err := pgx.Connect(ctx, *dsn.Load())
			if err == nil {
				_, err = c.Exec(ctx, "BEGIN; UPDATE customers SET name = 'Maria Rossi' WHERE id = 3")
			}
			if err != nil {
				errs <- err
				return
			}
			go func() {
				defer c.Close(ctx)
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					var n int
					if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").Scan(&n); err != nil {
						errs <- err
						return
					}
					if n > 0 {
						_, err := c.Exec(ctx, "COMMIT")
						errs <- err
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				_, _ = c.Exec(ctx, "COMMIT")
				errs <- fmt.Errorf("the Pilot's write never waited on the row lock")
			}()
		})
		return llm.Conforms
	})
	f := newTierB(t, b, tierBOptions{})
	dsn.Store(&f.dsn)
	resp := f.submit(t, "UPDATE customers SET name = 'John Smith' WHERE id = 3")
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if got := f.name(t, 3); got != "Maria Rossi" || resp.Outcome != gateway.OutcomeReferred {
		t.Errorf("row 3 is %q after %s %q: the statement wrote over a row the panel never saw", got, resp.Outcome, resp.Reasons)
	}
}
