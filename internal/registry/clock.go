package registry

import (
	"context"
	"time"
)

// MeasureClock is one tick of the clock service: one reading of the
// store's clock, taken as at the midpoint of its round trip. Without a
// Config.StoreClock it measures nothing.
func (r *Registry) MeasureClock(ctx context.Context) error {
	if r.cfg.StoreClock == nil {
		return nil
	}
	t0 := r.cfg.Now()
	st, err := r.cfg.StoreClock(ctx)
	if err != nil {
		return err
	}
	t1 := r.cfg.Now()
	off := st.Sub(t0.Add(t1.Sub(t0) / 2))
	beyond := off > r.cfg.ClockLeeway || -off > r.cfg.ClockLeeway
	was := r.skewBeyond.Swap(beyond)
	r.skew.Store(int64(off))
	r.cfg.Metrics.ClockSkew(off, beyond)
	if beyond && !was {
		r.cfg.Logger.Warn("this node's clock differs from the store's beyond the leeway; expiry decisions hold at both",
			"offset", off.String(), "leeway", r.cfg.ClockLeeway.String())
	}
	return nil
}

// instants are the times an expiry decision made at now must hold at: now,
// and the store's time as well while this node's clock is off it by more
// than the leeway.
func (r *Registry) instants(now time.Time) []time.Time {
	if !r.skewBeyond.Load() {
		return []time.Time{now}
	}
	return []time.Time{now, now.Add(time.Duration(r.skew.Load()))}
}

// inForce reports whether d is in force at every instant of now. The
// caller holds r.mu.
func (r *Registry) inForce(d *Delegation, now time.Time) bool {
	for _, t := range r.instants(now) {
		if !d.Active(t) {
			return false
		}
	}
	return true
}

// ExpiredAt reports whether exp has passed at any instant of now: by this
// node's clock, or by the store's while the two differ beyond the leeway.
func (r *Registry) ExpiredAt(exp, now time.Time) bool {
	for _, t := range r.instants(now) {
		if !t.Before(exp) {
			return true
		}
	}
	return false
}
