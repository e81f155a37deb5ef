package gateway

import (
	"context"
	"time"
)

// AgeDelegations makes the node's last good read of the delegations as
// old as age, as a store that stopped answering would.
func (g *Gateway) AgeDelegations(age time.Duration) {
	t := time.Now().Add(-age)
	g.delegationsRead.Store(&t)
}

// RefreshDelegations is one tick of the delegations service.
func (g *Gateway) RefreshDelegations(ctx context.Context) error { return g.refreshDelegations(ctx) }

// MeasureClock is one tick of the clock service.
func (g *Gateway) MeasureClock(ctx context.Context) error { return g.measureClock(ctx) }
