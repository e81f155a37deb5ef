package gateway

import (
	"context"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
)

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
