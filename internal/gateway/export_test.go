package gateway

import "context"

// RecordMarque is an approval's step that records its marque id
// (executing), as the node that claimed request id would take it.
func (g *Gateway) RecordMarque(ctx context.Context, id, target, previous, marqueID string) error {
	return g.executing(ctx, &request{ID: id, Target: target, MarqueID: marqueID}, previous)
}

// HoldExecutionEntry makes request id look as if its execution entry were
// still being written, until release is called.
func (g *Gateway) HoldExecutionEntry(id string) (release func()) {
	done := make(chan struct{})
	g.pendMu.Lock()
	if g.pending == nil {
		g.pending = map[string]chan struct{}{}
	}
	g.pending[id] = done
	g.pendMu.Unlock()
	return func() {
		g.pendMu.Lock()
		delete(g.pending, id)
		g.pendMu.Unlock()
		close(done)
	}
}
