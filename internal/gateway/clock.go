package gateway

import (
	"context"
	"time"
)

// Several nodes decide expiries with their own clocks. A node measures its
// clock against the store's (Config.StoreClock, the clock every node
// shares) with the clock service. While the two differ by more than
// Config.ClockLeeway, the node's expiry decisions hold at both instants, its
// own and the store's, which is never less strict than either: a delegation
// is in force only if it is in force at both, an approval is used only if it
// has expired at neither. The offset is in the metrics
// (harbormaster_clock_skew_seconds, harbormaster_clock_skew_beyond_leeway),
// and a node beyond the leeway logs a warning.

// measureClock is the clock service: one reading of the store's clock,
// taken as at the midpoint of its round trip.
func (g *Gateway) measureClock(ctx context.Context) error {
	t0 := time.Now()
	st, err := g.cfg.StoreClock(ctx)
	if err != nil {
		return err
	}
	t1 := time.Now()
	off := st.Sub(t0.Add(t1.Sub(t0) / 2))
	beyond := off > g.cfg.ClockLeeway || -off > g.cfg.ClockLeeway
	was := g.skewBeyond.Swap(beyond)
	g.skew.Store(int64(off))
	g.cfg.Metrics.ClockSkew(off, beyond)
	if beyond && !was {
		g.cfg.Logger.Warn("this node's clock differs from the store's beyond the leeway; expiry decisions hold at both",
			"offset", off.String(), "leeway", g.cfg.ClockLeeway.String())
	}
	return nil
}

// instants are the times an expiry decision made at now must hold at: now,
// and the store's time as well while this node's clock is off it by more
// than the leeway.
func (g *Gateway) instants(now time.Time) []time.Time {
	if !g.skewBeyond.Load() {
		return []time.Time{now}
	}
	return []time.Time{now, now.Add(time.Duration(g.skew.Load()))}
}

// inForce reports whether d is in force at every instant of now.
func (g *Gateway) inForce(d *Delegation, now time.Time) bool {
	for _, t := range g.instants(now) {
		if !d.Active(t) {
			return false
		}
	}
	return true
}

// expiredAt reports whether exp has passed at any instant of now.
func (g *Gateway) expiredAt(exp, now time.Time) bool {
	for _, t := range g.instants(now) {
		if !t.Before(exp) {
			return true
		}
	}
	return false
}
