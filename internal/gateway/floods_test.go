package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// A flood of referrals is refused, recorded and not queued: past the
// referral rate, and past the cap on waiting requests. Statements that run
// do not count.
func TestReferralFloods(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		rate    quota.Rate
		waiting int
		code    string
	}{
		{"referral rate", quota.Rate{Count: 3, Per: time.Hour}, -1, gateway.FloodReferralRate},
		{"waiting cap", quota.Rate{Count: -1}, 3, gateway.FloodTooManyWait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(o *gatewaytest.Options) {
				o.Gateway.ReferralRate, o.Gateway.MaxWaiting = c.rate, c.waiting
			})
			ctx := context.Background()
			for i := range 3 {
				if r := f.submit(t, gatewaytest.Agent, fmt.Sprintf("DELETE FROM orders WHERE id = %d", i+1)); r.Outcome != gateway.OutcomeReferred {
					t.Fatalf("referral %d: %+v", i, r)
				}
				// Statements that run are not referrals.
				if r := f.submit(t, gatewaytest.Agent, fmt.Sprintf("SELECT id FROM orders WHERE id = %d", i+1)); r.Outcome != gateway.OutcomeExecuted {
					t.Fatalf("read %d: %+v", i, r)
				}
			}
			_, err := f.sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, "DELETE FROM orders WHERE id = 9")
			var flood *gateway.FloodError
			if !errors.As(err, &flood) || flood.Code != c.code || flood.RequestID == "" {
				t.Fatalf("got %v, want a %s refusal", err, c.code)
			}
			// Recorded as a decision, not queued.
			v := f.view(t, flood.RequestID)
			if v.Status != gateway.StatusRefused || v.Outcome != gateway.OutcomeRefused {
				t.Fatalf("the refused request is %s/%s", v.Status, v.Outcome)
			}
			es, err := f.sys.Logbook.Find(ctx, logbook.Query{SubjectKey: "request", SubjectValue: flood.RequestID})
			if err != nil || len(es) != 1 || es[0].Kind != "decision" || !strings.Contains(string(es[0].Payload), `"outcome":"refused"`) {
				t.Fatalf("logbook: %v %v", es, err)
			}
			q, err := f.sys.Gateway.Queue(ctx, nil)
			if err != nil || len(q) != 3 {
				t.Fatalf("queue: %d waiting, %v; want the 3 referrals only", len(q), err)
			}
			// Another agent is not affected.
			if r := f.submit(t, gatewaytest.Other, "DELETE FROM orders WHERE id = 9"); r.Outcome != gateway.OutcomeReferred {
				t.Fatalf("another agent: %+v", r)
			}
			// Over HTTP it is 429 with the request id.
			req := httptest.NewRequest(http.MethodPost, "/v1/statements", strings.NewReader(`{"target":"shop","sql":"DELETE FROM orders WHERE id = 10"}`))
			req.Header.Set("Authorization", "Bearer "+gatewaytest.AgentToken)
			w := httptest.NewRecorder()
			f.sys.API.Handler().ServeHTTP(w, req)
			var body struct {
				Error struct{ Code, Message, RequestID string }
			}
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != http.StatusTooManyRequests || body.Error.Code != c.code || w.Header().Get("Retry-After") == "" {
				t.Fatalf("HTTP %d %s", w.Code, w.Body.String())
			}
		})
	}
}
