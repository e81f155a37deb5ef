package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// A node's background work is a set of services, each periodic with its
// own interval, started by Run and stopped with the node. None of them is
// needed for a statement to be decided correctly on one node; each keeps
// the state of several nodes sharing one store converging.
//
//   - queue-expiry: waiting requests past the queue's time-to-live expire;
//   - delegation-expiry: each delegation past its expiry is logged once;
//   - reconcile: requests left running (a marque minted, no outcome
//     recorded) past ReconcileAfter are settled from the target's receipt;
//   - delegations: delegations added or revoked through other nodes are
//     read from the store. While this service runs, a node whose last good
//     read is older than Services.DelegationsStale runs nothing on the fast
//     path: a revocation on another node takes effect here within that bound;
//   - clock: the store's clock is read and this node's offset from it
//     measured (registry.Registry.MeasureClock), when the store is not on
//     this machine;
//   - retention: logbook entries older than Retention.Retain, and the rows
//     of the settled requests they decided, are removed (ledger.Prune),
//     when Retention.Retain is set.
type Services struct {
	// QueueExpiry, DelegationExpiry, Reconcile and Delegations are the
	// services' intervals. Each defaults to one second.
	QueueExpiry      time.Duration
	DelegationExpiry time.Duration
	Reconcile        time.Duration
	Delegations      time.Duration
	// Clock is how often the store's clock is read (internal/registry),
	// when the gateway has a StoreClock. Defaults to 5s.
	Clock time.Duration
	// DelegationsStale is how old the last good read of the delegations may
	// be before the fast path stops. Defaults to five Delegations intervals.
	DelegationsStale time.Duration
	// Retention is what the retention service removes, every RetentionEvery
	// (default one hour). A zero Retention.Retain keeps everything.
	Retention      ledger.Retention
	RetentionEvery time.Duration
}

// WithDefaults fills unset fields.
func (s Services) WithDefaults() Services {
	for _, d := range []*time.Duration{&s.QueueExpiry, &s.DelegationExpiry, &s.Reconcile, &s.Delegations} {
		if *d <= 0 {
			*d = time.Second
		}
	}
	if s.Clock <= 0 {
		s.Clock = 5 * time.Second
	}
	if s.DelegationsStale <= 0 {
		s.DelegationsStale = 5 * s.Delegations
	}
	if s.RetentionEvery <= 0 {
		s.RetentionEvery = time.Hour
	}
	return s
}

// Service is one piece of background work.
type Service struct {
	Name  string
	Every time.Duration
	Tick  func(ctx context.Context) error
}

// Services lists the gateway's background services.
func (g *Gateway) Services() []Service {
	s := g.cfg.Services
	out := []Service{
		{Name: "queue-expiry", Every: s.QueueExpiry, Tick: g.expireWaiting},
		{Name: "delegation-expiry", Every: s.DelegationExpiry, Tick: g.logExpiries},
		{Name: "reconcile", Every: s.Reconcile, Tick: func(ctx context.Context) error {
			if _, err := g.led.ReconcileDeciding(ctx, g.cfg.ReconcileAfter); err != nil {
				return err
			}
			n, err := g.led.ReconcileRunning(ctx, g.cfg.ReconcileAfter)
			if n > 0 {
				g.cfg.Logger.Warn("reconciled requests whose outcome was not recorded", "count", n)
			}
			return err
		}},
		{Name: "delegations", Every: s.Delegations, Tick: g.reg.Refresh},
	}
	if g.cfg.StoreClock != nil {
		out = append(out, Service{Name: "clock", Every: s.Clock, Tick: g.reg.MeasureClock})
	}
	if s.Retention.Retain > 0 {
		out = append(out, Service{Name: "retention", Every: s.RetentionEvery, Tick: func(ctx context.Context) error {
			p, err := g.led.Prune(ctx, s.Retention)
			if p != (ledger.Pruned{}) {
				g.cfg.Logger.Info("retention", "entries", p.Entries, "requests", p.Requests, "receipts", p.Receipts, "retain", s.Retention.Retain)
			}
			return err
		}})
	}
	return out
}

// Run runs every service until ctx ends, then
// waits for the execution entries still being written (Drain).
func (g *Gateway) Run(ctx context.Context) error {
	g.reg.Watch()
	var wg sync.WaitGroup
	for _, s := range g.Services() {
		wg.Add(1)
		go func() { defer wg.Done(); runService(ctx, s, g.cfg.Logger) }()
	}
	<-ctx.Done()
	g.Drain()
	wg.Wait()
	return nil
}

func runService(ctx context.Context, s Service, log *slog.Logger) {
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
				log.Warn("background service", "service", s.Name, "err", err)
			}
		}
	}
}

// quotaTimeout bounds one take from the shared quota buckets.
const quotaTimeout = 5 * time.Second

// StoreQuota takes fast-path tokens from the quota buckets in the store
// (Config.SharedQuota): every node on the store takes from the same
// buckets, in one transaction per statement, so a quota holds exactly
// across nodes.
func StoreQuota(st *store.Store) func(ctx context.Context, now time.Time, wants []quota.Want) (string, error) {
	return func(ctx context.Context, now time.Time, wants []quota.Want) (string, error) {
		// A store that hangs must not hold the statement: past the
		// deadline the quota is unknown, and the statement is referred.
		ctx, cancel := context.WithTimeout(ctx, quotaTimeout)
		defer cancel()
		ws := make([]store.QuotaWant, len(wants))
		for i, w := range wants {
			ws[i] = store.QuotaWant{Key: w.Key, Count: w.Rate.Count, PerNS: int64(w.Rate.Per)}
		}
		return st.TakeQuota(ctx, now.UnixNano(), ws)
	}
}
