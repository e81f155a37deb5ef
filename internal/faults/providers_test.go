package faults_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/faults"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// switchable is a Behaviour a test changes between statements.
type switchable struct {
	b atomic.Pointer[llmtest.Behaviour]
}

func (s *switchable) set(b llmtest.Behaviour) { s.b.Store(&b) }
func (s *switchable) behave(r llmtest.Request) llmtest.Response {
	return (*s.b.Load())(r)
}

// TestProviderFailures has the Surveyor's providers fail mid-judgment
// (no answer within the timeout, the connection reset, half a body,
// garbage instead of the envelope), one juror's or all of them, for Tier B
// statements the panel would otherwise pass: every one refers and nothing
// runs; its judgment entry names each failed juror and why, its decision
// entry says the Surveyor referred it; the failing providers really were
// called. A control statement with healthy providers runs first, so the
// surveyed path is shown open.
func TestProviderFailures(t *testing.T) {
	t.Parallel()
	sb := newScoreboard(t, "provider-failures")
	rng := newRand(t)
	ctx := t.Context()
	dsn := newTarget(t, pgtmptest.NewDatabase(t, shared.Server(t)))

	const jurorTimeout = 500 * time.Millisecond
	var behaviours [3]switchable
	var servers [3]*llmtest.Server
	var jurors []llm.Juror
	for i, start := range []func(testing.TB, llmtest.Behaviour) *llmtest.Server{llmtest.NewOpenAI, llmtest.NewAnthropic, llmtest.NewOpenAI} {
		behaviours[i].set(llmtest.AlwaysConforms())
		servers[i] = start(t, behaviours[i].behave)
		kind := llm.KindOpenAI
		if i == 1 {
			kind = llm.KindAnthropic
		}
		j, err := llm.New(llm.ProviderConfig{Name: fmt.Sprintf("%s-%d", kind, i), Kind: kind, BaseURL: servers[i].URL, Model: "m", Timeout: jurorTimeout}, nil)
		if err != nil {
			t.Fatal(err)
		}
		jurors = append(jurors, j)
	}
	// A provider that failed is passed over for DownFor: each statement
	// here must meet the providers it breaks, so they are back at once.
	panel, err := surveyor.NewPanel(surveyor.Config{DownFor: time.Nanosecond}, jurors, nil)
	if err != nil {
		t.Fatal(err)
	}
	opt := gatewaytest.Options{TargetDSN: dsn, StorePath: filepath.Join(t.TempDir(), "store.db"), Keys: gatewaytest.NewKeys(t), Audit: &audit.Config{}}
	opt.Gateway.Surveyor = panel
	sys := gatewaytest.Start(t, opt)
	y, sig := sys.SignedExample(t, gatewaytest.Customers)
	d, _, err := sys.Gateway.AddDelegation(ctx, y, sig, gatewaytest.Customers)
	if err != nil {
		t.Fatal(err)
	}
	const residualRule = 1 // UPDATE customers(name), fence region = 'EU', max_rows 1
	sys.EnableTierB(t, d, residualRule, panel.Identity(), panel.Bundle().Version)

	answered := map[string]string{}
	submit := func(sql string) *gateway.Response {
		t.Helper()
		r, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		answered[r.RequestID] = r.Outcome
		return r
	}
	// Customers 1..3 are EU: a one-row name update is inside the bound.
	rename := func(i int) string {
		return fmt.Sprintf("UPDATE customers SET name = 'Fault %d' WHERE id = %d", i, 1+i%3)
	}
	if r := submit(rename(0)); r.Outcome != gateway.OutcomeExecuted || r.Path != marque.PathSurveyed {
		t.Fatalf("control: healthy providers, %+v; want executed on the surveyed path", r)
	}

	faultsByName := []struct {
		name, failure string
		b             llmtest.Behaviour
	}{
		{"timeout", llm.FailureTimeout, llmtest.Hang()},
		{"reset", llm.FailureTransport, llmtest.Reset()},
		{"half-body", llm.FailureTransport, llmtest.HalfBody()},
		{"garbage", llm.FailureTransport, llmtest.Garbage()},
	}
	rounds := pick(1, 5)
	var slowest time.Duration
	n := 0
	for round := range rounds {
		for _, f := range faultsByName {
			for _, scope := range []string{"one", "all"} {
				n++
				failing := []int{rng.IntN(3)}
				if scope == "all" {
					failing = []int{0, 1, 2}
				}
				before := make([]int, 3)
				for i := range servers {
					behaviours[i].set(llmtest.AlwaysConforms())
					before[i] = servers[i].Requests()
				}
				for _, i := range failing {
					behaviours[i].set(f.b)
				}
				snap := gatewaytest.Snapshot(t, dsn, "customers")
				receipts := gatewaytest.Receipts(t, dsn)
				when := fmt.Sprintf("round %d, %s, %s juror(s) %v", round+1, f.name, scope, failing)
				began := time.Now()
				r := submit(rename(n))
				slowest = max(slowest, time.Since(began))
				sb.run()
				if r.Outcome != gateway.OutcomeReferred || r.RowsAffected != 0 || r.Path != "" {
					sb.violate("%s: %+v, want referred", when, r)
				}
				if !strings.Contains(strings.Join(r.Reasons, "\n"), "the Surveyor referred it") {
					sb.violate("%s: the agent's reasons %q do not say the Surveyor referred it", when, r.Reasons)
				}
				if gatewaytest.Snapshot(t, dsn, "customers") != snap || gatewaytest.Receipts(t, dsn) != receipts {
					sb.violate("%s: the target changed", when)
				}
				for _, i := range failing {
					if servers[i].Requests() <= before[i] {
						sb.violate("%s: provider %d was never called", when, i)
					}
				}
				for _, v := range judgmentProblems(t, sys, r.RequestID, failing, f.failure) {
					sb.violate("%s: %s", when, v)
				}
			}
		}
	}
	// Healthy again: the surveyed path serves at once.
	for i := range behaviours {
		behaviours[i].set(llmtest.AlwaysConforms())
	}
	if r := submit(rename(n + 1)); r.Outcome != gateway.OutcomeExecuted {
		sb.violate("recovered providers: %+v, want executed", r)
	}
	sys.Gateway.Drain()
	_, _ = sys.Logbook.Checkpoint(ctx)
	rep := sb.check(ctx, faults.Check{Store: sys.Store, Origin: sys.Opts.Logbook.Origin, Verifier: sys.CheckpointVerifier,
		TargetDSN: dsn, Answered: answered}, "at the end")
	sb.figure("executed", rep.Executed)
	sb.figure("slowest_referral_ms", slowest.Milliseconds())
	sb.figure("juror_timeout_ms", jurorTimeout.Milliseconds())
}

// judgmentProblems reads request id's entries: its judgment must be refer,
// name every failing juror as failed with failure, and its decision must
// name the judgment and not run.
func judgmentProblems(t *testing.T, sys *gatewaytest.System, id string, failing []int, failure string) []string {
	t.Helper()
	es, err := sys.Logbook.Find(t.Context(), logbook.Query{SubjectKey: "request", SubjectValue: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var judged, decided bool
	for _, e := range es {
		switch e.Kind {
		case "judgment":
			judged = true
			var j surveyor.Judgment
			if err := json.Unmarshal(e.Payload, &j); err != nil {
				t.Fatal(err)
			}
			if j.Outcome != surveyor.OutcomeRefer {
				out = append(out, fmt.Sprintf("judgment outcome %q, want refer", j.Outcome))
			}
			failed := map[string]bool{}
			for _, jr := range j.Jurors {
				if jr.Outcome == llm.Failed && strings.HasPrefix(jr.Failure, failure) {
					failed[jr.Provider] = true
				}
			}
			for _, i := range failing {
				kind := llm.KindOpenAI
				if i == 1 {
					kind = llm.KindAnthropic
				}
				if !failed[fmt.Sprintf("%s-%d", kind, i)] {
					out = append(out, fmt.Sprintf("judgment does not record provider %d failing with %s: %s", i, failure, e.Payload))
				}
			}
			if !strings.Contains(strings.Join(j.Reasons, "\n"), "failed to answer: "+failure) {
				out = append(out, fmt.Sprintf("judgment reasons %q do not say why", j.Reasons))
			}
		case "decision":
			decided = true
			var p struct {
				Outcome    string   `json:"outcome"`
				Path       string   `json:"path"`
				JudgmentID string   `json:"judgment_id"`
				Reasons    []string `json:"reasons"`
				Detail     string   `json:"detail"`
			}
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Outcome != gateway.OutcomeReferred || p.Path != "" || p.JudgmentID == "" ||
				!strings.Contains(p.Detail, "failed to answer: "+failure) {
				out = append(out, fmt.Sprintf("decision entry %s, want referred naming its judgment and the failure", e.Payload))
			}
		case "execution":
			out = append(out, fmt.Sprintf("an execution entry: %s", e.Payload))
		}
	}
	if !judged || !decided {
		out = append(out, fmt.Sprintf("judgment entry %v, decision entry %v: want both", judged, decided))
	}
	return out
}
