package gateway

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
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
	if req.Canonical == "" {
		// Nothing checked to rehearse: say why in the log, by the check's
		// reason codes (the reasons themselves may quote the statement).
		g.cfg.Logger.Info("not rehearsed", "request", req.ID, "why", unrehearsableWhy(req.Reasons))
		return
	}
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

var reasonCodeRE = regexp.MustCompile(`\[([a-z_]+)\]$`)

// unrehearsableWhy says why a referred request has no checked statement
// to rehearse: stacked statements, or what the check said.
func unrehearsableWhy(reasons []string) string {
	var codes []string
	for _, r := range reasons {
		if m := reasonCodeRE.FindStringSubmatch(r); m != nil && !slices.Contains(codes, m[1]) {
			codes = append(codes, m[1])
		}
	}
	switch {
	case slices.Contains(codes, sqlcheck.CodeMultipleStatements):
		return "the statement is stacked (several statements sent as one): it can only be denied"
	case slices.Contains(codes, sqlcheck.CodeParseError):
		return "the statement does not parse: it can only be denied"
	case slices.Contains(codes, sqlcheck.CodeEmptyStatement):
		return "the statement is empty (only comments or whitespace): it can only be denied"
	case len(codes) > 0:
		return "the check produced no statement to run (" + strings.Join(codes, ", ") + "): it can only be denied"
	}
	return "the check produced no statement to run: it can only be denied"
}
