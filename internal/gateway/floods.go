package gateway

import "github.com/harbormaster-dev/harbormaster/internal/referrals"

// Referral floods are the referral service's (internal/referrals): past a
// principal's referral rate or waiting cap, a statement that would be
// referred is refused, recorded and not queued. The fronts read the
// refusal as the gateway's.

// FloodError is a statement refused because its principal sends referrals
// too fast or has too many waiting (referrals.FloodError).
type FloodError = referrals.FloodError

// Codes of FloodError.
const (
	FloodReferralRate = referrals.FloodReferralRate
	FloodTooManyWait  = referrals.FloodTooManyWait
)
