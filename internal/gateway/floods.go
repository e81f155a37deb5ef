package gateway

import (
	"context"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// Referral floods. Every referral is a human's time: an agent that sends
// statements outside its bound as fast as it can would bury the queue (and
// the real referrals in it). So referrals count against a per-principal
// rate, and the requests a principal has waiting are capped. Past either,
// a statement that would be referred is refused instead: it is recorded in
// the logbook as a decision with outcome "refused", it is not queued, and
// the agent gets a FloodError (HTTP 429, an MCP tool error) that says to
// slow down. The statements that run are untouched: only referrals count.

// Codes of FloodError.
const (
	FloodReferralRate = "referral_rate"
	FloodTooManyWait  = "too_many_waiting"
)

// FloodError is a statement refused because its principal sends referrals
// too fast or has too many waiting. The request is recorded (RequestID).
type FloodError struct {
	RequestID string
	Code      string
	Message   string
}

func (e *FloodError) Error() string { return e.Message }

// admitReferral takes a referral token for principal and checks its
// waiting requests; it returns the refusal when either is used up.
func (g *Gateway) admitReferral(ctx context.Context, principal string) (*FloodError, error) {
	if g.cfg.MaxWaiting > 0 {
		n, _, err := g.led.Count(ctx, StatusWaiting, principal)
		if err != nil {
			return nil, fmt.Errorf("gateway: waiting requests: %w", err)
		}
		if n >= g.cfg.MaxWaiting {
			g.cfg.Metrics.QuotaRefusal("waiting")
			return &FloodError{Code: FloodTooManyWait, Message: fmt.Sprintf(
				"%s has %d requests waiting for a human, the most allowed; nothing was queued or run: wait for decisions before sending statements outside your delegations", principal, n)}, nil
		}
	}
	if g.takeReferral(principal) {
		return nil, nil
	}
	g.cfg.Metrics.QuotaRefusal("referral")
	return &FloodError{Code: FloodReferralRate, Message: fmt.Sprintf(
		"%s has sent more statements that need a human than its referral rate (%s) allows; nothing was queued or run: slow down, or stay inside your delegations", principal, g.cfg.ReferralRate)}, nil
}

// takeReferral takes one token from principal's referral bucket.
func (g *Gateway) takeReferral(principal string) bool {
	if g.cfg.ReferralRate.Count <= 0 {
		return true
	}
	return g.quota.Take(quota.Want{Key: "referral:" + principal, Rate: g.cfg.ReferralRate}) == ""
}
