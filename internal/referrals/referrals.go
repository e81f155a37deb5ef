package referrals

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// Config configures the referral service.
type Config struct {
	// ReferralRate is how many statements per principal may be referred
	// to a human; past it a statement that would be referred is refused
	// (Admit). Defaults to 1000/hour; a negative Count turns it off.
	ReferralRate quota.Rate
	// MaxWaiting caps the requests one principal may have waiting for a
	// human; past it a statement that would be referred is refused.
	// Defaults to 1000; negative turns it off.
	MaxWaiting int
	// Webhook, when set, receives a Slack-compatible JSON message for every
	// new referral (Referred). Failures never block the statement path.
	Webhook string
	// HTTPClient sends webhooks. Defaults to a client with a 5s timeout.
	HTTPClient *http.Client
	// Clock refills the referral rate's buckets. Defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// Metrics, when set, records the referrals refused.
	Metrics *metrics.Metrics
	// Target returns the preview role of a target's Pilot, or the error
	// that says the target is unknown (returned as it is). Required.
	Target func(name string) (Previewer, error)
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.ReferralRate.Count == 0 {
		c.ReferralRate = quota.Rate{Count: 1000, Per: time.Hour}
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 1000
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service admits, announces and previews referrals. It is safe for
// concurrent use.
type Service struct {
	cfg   Config
	led   *ledger.Ledger
	quota *quota.Limiter // the referral rate's buckets, one per principal
}

// New returns the referral service over the request ledger.
func New(cfg Config, led *ledger.Ledger) (*Service, error) {
	cfg = cfg.WithDefaults()
	if led == nil || cfg.Target == nil {
		return nil, errors.New("referrals: the ledger and Config.Target are required")
	}
	return &Service{cfg: cfg, led: led, quota: quota.New(cfg.Clock)}, nil
}
