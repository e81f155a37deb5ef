package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// Rehearsals of referred statements (DESIGN.md section 3, invariant 10).
//
// A referred statement is outside every signed bound, so its rehearsal
// runs it as written, unfenced: whether the rehearsal succeeds, what it
// counts, its digest and how long it takes all depend on rows the agent
// may not see. A CASE that divides by zero when some unlisted column holds
// a value would turn a visible rehearsal into an oracle, one bit per
// request. So the agent is answered first; the rehearsal is queued to a
// small pool of workers with their own timeout; its report is stored for
// the approver and never shown to the principal that sent the statement.
// When the queue is full, or the node stops first, a request simply has
// no rehearsal yet, and ProposeApproval rehearses it when a human asks.

// rehearsalJob is one referred request to rehearse.
type rehearsalJob struct {
	pilot pilot.Executor
	id    string
	sql   string
}

// rehearsals is the pool's queue; workers start with Run.
type rehearsals struct {
	jobs chan rehearsalJob
	wg   sync.WaitGroup
}

func newRehearsals(depth int) *rehearsals {
	return &rehearsals{jobs: make(chan rehearsalJob, depth)}
}

// enqueue hands a referred request to the pool without waiting.
func (g *Gateway) enqueueRehearsal(p pilot.Executor, req *request) {
	select {
	case g.rehearsals.jobs <- rehearsalJob{pilot: p, id: req.ID, sql: req.Canonical}:
	default:
		g.cfg.Logger.Warn("rehearsal queue full: the request is rehearsed when an approver asks", "request", req.ID)
	}
}

// runRehearsals runs the workers until ctx ends, and waits for them.
func (g *Gateway) runRehearsals(ctx context.Context) {
	for range g.cfg.RehearsalWorkers {
		g.rehearsals.wg.Add(1)
		go func() {
			defer g.rehearsals.wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-g.rehearsals.jobs:
					g.rehearse(context.WithoutCancel(ctx), j.pilot, j.id, j.sql)
				}
			}
		}()
	}
	<-ctx.Done()
	g.rehearsals.wg.Wait()
}

// rehearse runs a referred statement in a rolled-back transaction and
// stores its report for humans, unless the request already has one (the
// first report stored is the one an approval signs). A statement that
// cannot be rehearsed keeps no report.
func (g *Gateway) rehearse(ctx context.Context, p pilot.Executor, id, sql string) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.RehearsalTimeout)
	defer cancel()
	start := time.Now()
	_, js, err := p.RehearseRaw(ctx, sql)
	if err != nil {
		g.cfg.Logger.Info("not rehearsed", "request", id, "why", err, "ms", time.Since(start).Milliseconds())
		return
	}
	err = g.rq.SetRehearsal(ctx, id, string(js), pilot.Digest(js))
	if err != nil {
		g.cfg.Logger.Error("storing rehearsal", "request", id, "err", err)
	}
}
