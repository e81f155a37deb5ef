package referrals

import (
	"context"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// Referral floods. Every referral is a human's time: an agent that sends
// statements outside its bound as fast as it can would bury the queue (and
// the real referrals in it). So referrals count against a per-principal
// rate, and the requests a principal has waiting are capped. Past either,
// a statement that would be referred is refused instead: the statement
// path records it in the logbook as a decision with outcome "refused", it
// is not queued, and the agent gets a FloodError (HTTP 429, an MCP tool
// error) that says to slow down. The statements that run are untouched:
// only referrals count.

// Codes of FloodError.
const (
	FloodReferralRate = "referral_rate"
	FloodTooManyWait  = "too_many_waiting"
)

// FloodError is a statement refused because its principal sends referrals
// too fast or has too many waiting. The request is recorded (RequestID,
// which the statement path sets once it is).
type FloodError struct {
	RequestID string
	Code      string
	Message   string
}

func (e *FloodError) Error() string { return e.Message }

// Admit takes a referral token for principal and checks its waiting
// requests; it returns the refusal when either is used up, and an error
// only when the waiting requests cannot be counted.
func (s *Service) Admit(ctx context.Context, principal string) (*FloodError, error) {
	if s.cfg.MaxWaiting > 0 {
		n, _, err := s.led.Count(ctx, ledger.StatusWaiting, principal)
		if err != nil {
			return nil, fmt.Errorf("referrals: waiting requests: %w", err)
		}
		if n >= s.cfg.MaxWaiting {
			s.cfg.Metrics.QuotaRefusal("waiting")
			return &FloodError{Code: FloodTooManyWait, Message: fmt.Sprintf(
				"%s has %d requests waiting for a human, the most allowed; nothing was queued or run: wait for decisions before sending statements outside your delegations", principal, n)}, nil
		}
	}
	if s.Take(principal) {
		return nil, nil
	}
	s.cfg.Metrics.QuotaRefusal("referral")
	return &FloodError{Code: FloodReferralRate, Message: fmt.Sprintf(
		"%s has sent more statements that need a human than its referral rate (%s) allows; nothing was queued or run: slow down, or stay inside your delegations", principal, s.cfg.ReferralRate)}, nil
}

// Take takes one token from principal's referral bucket, and reports
// whether it had one. A statement referred after it was decided to run
// (the Pilot referred it, or it did not run) is queued all the same: the
// statement path takes its token without asking Admit.
func (s *Service) Take(principal string) bool {
	if s.cfg.ReferralRate.Count <= 0 {
		return true
	}
	return s.quota.Take(quota.Want{Key: "referral:" + principal, Rate: s.cfg.ReferralRate}) == ""
}
