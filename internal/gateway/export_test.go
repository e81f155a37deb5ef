package gateway

import (
	"context"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
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

// RecordMarque is an approval's step that records its marque id
// (executing), as the node that claimed request id would take it.
func (g *Gateway) RecordMarque(ctx context.Context, id, target, previous, marqueID string) error {
	return g.led.Executing(ctx, &ledger.Request{ID: id, Target: target, MarqueID: marqueID}, previous)
}

// HoldExecutionEntry makes request id look as if its execution entry were
// still being written, until release is called.
func (g *Gateway) HoldExecutionEntry(id string) (release func()) {
	return g.led.HoldExecutionEntry(id)
}
