// Package switches holds the polled state that enables Tier B, per
// deployment and per target (DESIGN.md section 9, invariant 8).
//
// Switches live in the control store. Every node polls them (by default
// once a second) and decides from its last good read. Tier B is on for a
// target only when the deployment switch and the target's switch are both
// on AND the node read them successfully within the last three intervals:
// a node that cannot read its switches treats Tier B as off. Defaults are
// off; there is no configuration that turns Tier B on without a logged,
// signed operator act.
package switches

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// TierB is the name of the Tier B switch.
const TierB = "tier_b"

// Deployment is the scope of a deployment-wide switch; a target's scope is
// "target:NAME".
const Deployment = "deployment"

// TargetScope is the scope of a target's switch.
func TargetScope(target string) string { return "target:" + target }

// Config configures a Poller.
type Config struct {
	// Interval between polls. Defaults to 1s; at most 1s (the design's bound).
	Interval time.Duration
	// StaleAfter is how many intervals without a good read turn Tier B off.
	// Defaults to 3.
	StaleAfter int
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger.
	Logger *slog.Logger
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 || c.Interval > time.Second {
		c.Interval = time.Second
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 3
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Key is one switch.
type Key struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

// State is one switch's value.
type State struct {
	Key
	On        bool      `json:"on"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by"`
}

// Poller keeps a node's view of the switches fresh.
type Poller struct {
	cfg  Config
	read func(context.Context) (map[Key]State, error)

	mu       sync.RWMutex
	snap     map[Key]State
	lastGood time.Time
	failures int64
}

// New returns a poller reading st.
func New(st *store.Store, cfg Config) *Poller {
	return &Poller{cfg: cfg.WithDefaults(), read: func(ctx context.Context) (map[Key]State, error) { return ReadAll(ctx, st) }}
}

// Interval is the poll interval in force.
func (p *Poller) Interval() time.Duration { return p.cfg.Interval }

// Poll reads the switches once.
func (p *Poller) Poll(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Interval)
	defer cancel()
	snap, err := p.read(rctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failures++
		return fmt.Errorf("switches: poll: %w", err)
	}
	p.snap, p.lastGood = snap, p.cfg.Clock()
	return nil
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	if err := p.Poll(ctx); err != nil {
		p.cfg.Logger.Warn("switches: poll failed", "err", err)
	}
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := p.Poll(ctx); err != nil {
				p.cfg.Logger.Warn("switches: poll failed; Tier B turns off after three failed intervals", "err", err)
			}
		}
	}
}

// Staleness is the time since the last good read (a large value when
// never read).
func (p *Poller) Staleness() time.Duration {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.lastGood.IsZero() {
		return time.Duration(1<<62 - 1)
	}
	return p.cfg.Clock().Sub(p.lastGood)
}

// Failures counts failed polls.
func (p *Poller) Failures() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.failures
}

// TierBOn reports whether Tier B is on for target, and why not.
func (p *Poller) TierBOn(target string) (bool, string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.lastGood.IsZero() {
		return false, "the switches have not been read yet"
	}
	if age := p.cfg.Clock().Sub(p.lastGood); age > time.Duration(p.cfg.StaleAfter)*p.cfg.Interval {
		return false, fmt.Sprintf("the switches could not be read for %s, so Tier B is treated as off", age.Round(time.Millisecond))
	}
	if !p.snap[Key{TierB, Deployment}].On {
		return false, "Tier B is switched off for this deployment"
	}
	if !p.snap[Key{TierB, TargetScope(target)}].On {
		return false, "Tier B is switched off for target " + target
	}
	return true, ""
}

// Snapshot returns the last good read.
func (p *Poller) Snapshot() []State {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]State, 0, len(p.snap))
	for _, s := range p.snap {
		out = append(out, s)
	}
	return out
}

// ReadAll reads every switch from the store.
func ReadAll(ctx context.Context, st *store.Store) (map[Key]State, error) {
	rows, err := st.Switches(ctx)
	if err != nil {
		return nil, err
	}
	out := map[Key]State{}
	for _, r := range rows {
		var s State
		s.Name, s.Scope, s.UpdatedBy = r.Name, r.Scope, r.UpdatedBy
		s.On, s.UpdatedAt = r.On, time.Unix(0, r.UpdatedNS).UTC()
		out[s.Key] = s
	}
	return out, nil
}

// ErrUnknown is returned for a switch name other than TierB.
var ErrUnknown = errors.New("unknown switch")

// Set writes one switch. The caller logs the act.
func Set(ctx context.Context, st *store.Store, k Key, on bool, by string, now time.Time) error {
	if k.Name != TierB {
		return fmt.Errorf("switches: set %q: %w", k.Name, ErrUnknown)
	}
	err := st.SetSwitch(ctx, store.Switch{Name: k.Name, Scope: k.Scope, On: on, UpdatedNS: now.UnixNano(), UpdatedBy: by})
	if err != nil {
		return fmt.Errorf("switches: set: %w", err)
	}
	return nil
}
