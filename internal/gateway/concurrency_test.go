package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// concurrencyDuration is how long TestConcurrentAgents drives load: 5s,
// or 30s with HARBORMASTER_LONG=1 (CI runs the short one).
func concurrencyDuration() time.Duration {
	if os.Getenv("HARBORMASTER_LONG") == "1" {
		return 30 * time.Second
	}
	return 5 * time.Second
}

// agentStatement is one kind of statement the load mixes, with the answer
// it must get.
type agentStatement struct {
	kind    string
	sql     func(n int) string
	outcome string // executed, referred or rejected (HTTP 422)
}

var agentMix = []agentStatement{
	{"select", func(n int) string { return fmt.Sprintf("SELECT id, status FROM orders WHERE id = %d", 1+n%240) }, gateway.OutcomeExecuted},
	{"update", func(n int) string {
		return fmt.Sprintf("UPDATE orders SET status = 'failed' WHERE id = %d", 100000+n) // inside the fence, no row
	}, gateway.OutcomeExecuted},
	{"select eu", func(n int) string {
		return "SELECT id, name FROM customers WHERE region = 'EU' AND id = " + fmt.Sprint(1+n%20)
	},
		gateway.OutcomeExecuted},
	{"column", func(n int) string { return fmt.Sprintf("SELECT id, total_cents FROM orders WHERE id = %d", 1+n%240) }, gateway.OutcomeReferred},
	{"delete", func(n int) string { return fmt.Sprintf("DELETE FROM orders WHERE id = %d", 1+n%240) }, gateway.OutcomeReferred},
	{"tier B", func(n int) string { return fmt.Sprintf("UPDATE customers SET name = 'Name %d' WHERE id = 3", n) }, gateway.OutcomeReferred},
	{"parse error", func(n int) string { return fmt.Sprintf("SELEC %d FROM orders", n) }, gateway.OutcomeRejected},
}

type agentResult struct {
	id      string
	kind    string
	outcome string
	latency time.Duration
}

// TestConcurrentAgents: 200 agents (one HTTP client each, all agent:demo)
// send a mix of statements that execute, are referred or do not parse, for
// concurrencyDuration. Every request id answered has exactly one decision
// entry, the executed ones exactly one receipt, the logbook verifies, and
// no goroutine outlives the load. It reports throughput and latency.
//
// Not parallel: it counts goroutines.
func TestConcurrentAgents(t *testing.T) {
	const agents = 200
	dur := concurrencyDuration()
	// 200 agents share one principal here and a third of what they send
	// is referred: a flood by design, so the referral rate and the waiting
	// cap are off (TestReferralFloods tests them).
	f := newEmptyFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.ReferralRate, o.Gateway.MaxWaiting = quota.Rate{Count: -1}, -1
	})
	// The orders delegation without its 120/hour quota, so the load is not
	// mostly quota referrals.
	f.addDelegation(t, rewrite(t, gatewaytest.Example(t, gatewaytest.Orders), "quota: 120/hour\n", ""))
	f.addDelegation(t, gatewaytest.Example(t, gatewaytest.Customers))
	srv := httptest.NewServer(f.sys.API.Handler())
	t.Cleanup(srv.Close)

	post := func(c *http.Client, sql string) (int, []byte, error) {
		body, _ := json.Marshal(map[string]string{"target": gatewaytest.Target, "sql": sql})
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/statements", bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	// Warm up (pools, prepared catalogs), then count goroutines.
	warm := &http.Transport{}
	for _, s := range agentMix {
		if st, b, err := post(&http.Client{Transport: warm}, s.sql(0)); err != nil || st >= 500 {
			t.Fatalf("warm-up %s: %d %s %v", s.kind, st, b, err)
		}
	}
	warm.CloseIdleConnections()
	before := settledGoroutines(0, 500*time.Millisecond)

	var (
		mu       sync.Mutex
		results  []agentResult
		failures []string
		wg       sync.WaitGroup
	)
	transports := make([]*http.Transport, agents)
	start := time.Now()
	stop := start.Add(dur)
	for a := range agents {
		transports[a] = &http.Transport{MaxIdleConnsPerHost: 1}
		client := &http.Client{Transport: transports[a], Timeout: 2 * time.Minute}
		wg.Go(func() {
			var mine []agentResult
			var errs []string
			for n := a; time.Now().Before(stop); n += agents {
				s := agentMix[n%len(agentMix)]
				sql := s.sql(n)
				t0 := time.Now()
				st, body, err := post(client, sql)
				lat := time.Since(t0)
				if err != nil {
					errs = append(errs, fmt.Sprintf("%s %q: %v", s.kind, sql, err))
					continue
				}
				// gateway.Response has its own UnmarshalJSON: the body is
				// read into it and, apart, into its error.
				var resp gateway.Response
				var rej struct {
					Error struct {
						Code      string `json:"code"`
						RequestID string `json:"request_id"`
					} `json:"error"`
				}
				if err := errors.Join(json.Unmarshal(body, &resp), json.Unmarshal(body, &rej)); err != nil {
					errs = append(errs, fmt.Sprintf("%s: %d %s", s.kind, st, body))
					continue
				}
				r := agentResult{kind: s.kind, latency: lat, id: resp.RequestID, outcome: resp.Outcome}
				if st == http.StatusUnprocessableEntity {
					r.id, r.outcome = rej.Error.RequestID, gateway.OutcomeRejected
				} else if st != http.StatusOK {
					errs = append(errs, fmt.Sprintf("%s %q: HTTP %d %s", s.kind, sql, st, body))
					continue
				}
				if r.outcome != s.outcome || r.id == "" {
					errs = append(errs, fmt.Sprintf("%s %q: %s (id %q), want %s: %s", s.kind, sql, r.outcome, r.id, s.outcome, body))
				}
				mine = append(mine, r)
			}
			mu.Lock()
			results = append(results, mine...)
			failures = append(failures, errs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}
	if len(failures) > 0 {
		t.Fatalf("%d of %d statements failed; first: %s", len(failures), len(failures)+len(results), strings.Join(failures[:min(5, len(failures))], "\n"))
	}

	// Throughput and latency, overall and by outcome.
	byOutcome := map[string][]time.Duration{}
	var all []time.Duration
	executed := 0
	for _, r := range results {
		byOutcome[r.outcome] = append(byOutcome[r.outcome], r.latency)
		all = append(all, r.latency)
		if r.outcome == gateway.OutcomeExecuted {
			executed++
		}
	}
	t.Logf("%d agents for %s: %d statements, %.0f/s; latency %s", agents, elapsed.Round(time.Millisecond), len(results),
		float64(len(results))/elapsed.Seconds(), percentiles(all))
	for _, o := range []string{gateway.OutcomeExecuted, gateway.OutcomeReferred, gateway.OutcomeRejected} {
		t.Logf("  %-8s %5d  %s", o, len(byOutcome[o]), percentiles(byOutcome[o]))
	}
	for _, o := range []string{gateway.OutcomeExecuted, gateway.OutcomeReferred, gateway.OutcomeRejected} {
		if len(byOutcome[o]) == 0 {
			t.Fatalf("the load produced no %s statements", o)
		}
	}

	// Exactly one decision entry per request id answered, and none other.
	// Execution entries are written after the answer: wait for them (a
	// PostgreSQL store's commits take longer than the loop above does).
	f.sys.Gateway.Drain()
	ctx := t.Context()
	decisions := map[string]int{}
	err := f.sys.Logbook.Iterate(ctx, logbook.Query{Kind: "decision"}, func(e logbook.Entry) error {
		decisions[e.Subjects["request"]]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range results {
		if seen[r.id] {
			t.Fatalf("request id %s answered twice", r.id)
		}
		seen[r.id] = true
		if n := decisions[r.id]; n != 1 {
			t.Fatalf("%s (%s): %d decision entries, want exactly 1", r.id, r.kind, n)
		}
	}
	if extra := len(decisions) - len(agentMix); extra != len(results) {
		t.Fatalf("%d decision entries beyond the warm-up for %d answered requests", extra, len(results))
	}
	execs, err := f.sys.Logbook.Find(ctx, logbook.Query{Kind: "execution"})
	if err != nil {
		t.Fatal(err)
	}
	if want := executed + 3; len(execs) != want { // 3 warm-up statements executed
		t.Fatalf("%d execution entries, want %d", len(execs), want)
	}
	if n := f.ran(t); n != executed+3 {
		t.Fatalf("%d receipts for %d executed statements", n, executed+3)
	}
	rep := f.sys.Verify(t)
	t.Logf("logbook: %d entries verified", rep.HeadSeq)

	// No goroutine outlives the load (a small slack for runtime helpers).
	const slack = 8
	after := settledGoroutines(before+slack, 20*time.Second)
	t.Logf("goroutines: %d before the load, %d after", before, after)
	if after > before+slack {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Fatalf("goroutines: %d before the load, %d after it settled\n%s", before, after, buf.String())
	}
}

// settledGoroutines waits up to d for the goroutine count to fall to at
// most want, and returns the last count.
func settledGoroutines(want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n <= want || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	p := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s", p(0.50), p(0.90), p(0.99), s[len(s)-1].Round(time.Millisecond))
}
