package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/memo"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Errors of the ledger.
var (
	// ErrLogUnavailable: the logbook (and so the request's row, which
	// commits with its entry) could not be written.
	ErrLogUnavailable = errors.New("the logbook cannot be written")
	// ErrNotFound: no such request, or not the asking principal's.
	ErrNotFound = errors.New("not found")
	// ErrSettledElsewhere: an approved request was settled by a
	// reconciliation (this node's or another's) before its marque could
	// be recorded; it did not run and will not.
	ErrSettledElsewhere = errors.New("the request was settled while this node was recording its marque; it did not run")
)

// Config configures a ledger.
type Config struct {
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// Append writes a logbook record; the gateway times it. Defaults to
	// the logbook's Append.
	Append func(ctx context.Context, rec logbook.Record) (logbook.Entry, error)
	// Targets are the targets' Pilots, by target name, that reconciliation
	// reads receipts from: their settling role alone, so the ledger can
	// burn a marque but never run a statement. A running request on a
	// target not listed is left alone.
	Targets map[string]pilot.Settler
}

// Ledger is the requests' lifecycle: their rows, each change of status
// along the transition table, and the logbook entries that record them.
type Ledger struct {
	cfg Config
	lb  *logbook.Logbook
	rq  *store.Requests

	waitMu  sync.Mutex
	waiters map[string]chan struct{} // request id -> closed on its next change

	pendMu   sync.Mutex
	pending  map[string]chan struct{} // request id -> closed once its execution entry is written
	flights  map[string]int           // request id -> holders: decided here, outcome not yet recorded
	draining bool                     // Drain has begun: record before answering
	inflight sync.WaitGroup           // execution entries being written after the answer

	reconcileMu sync.Mutex

	// executedTexts are the executed texts an execution entry of this
	// ledger has committed, by SHA-256, and when (executedOnce).
	executedTexts memo.Map[[32]byte, time.Time]

	// seen, when set (tests), is told every move the ledger makes.
	seen func(from, to Status)
}

// maxExecutedTexts bounds the executed texts a ledger remembers having
// logged; past it, it forgets them all and logs each once more.
const maxExecutedTexts = 4096

// New opens the ledger on the store's requests table.
func New(ctx context.Context, cfg Config, st *store.Store, lb *logbook.Logbook) (*Ledger, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Append == nil {
		cfg.Append = lb.Append
	}
	rq, err := store.NewRequests(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Ledger{cfg: cfg, lb: lb, rq: rq, executedTexts: memo.Map[[32]byte, time.Time]{Max: maxExecutedTexts}}, nil
}

// List returns the requests f selects, oldest first.
func (l *Ledger) List(ctx context.Context, f Filter) ([]*Request, error) {
	// A read's row may still be in the logbook's journal (logbook.View).
	if err := l.visible(ctx); err != nil {
		return nil, fmt.Errorf("gateway: requests: %w", err)
	}
	rows, err := l.rq.List(ctx, f.store())
	if err != nil {
		return nil, fmt.Errorf("gateway: requests: %w", err)
	}
	out := make([]*Request, 0, len(rows))
	for _, r := range rows {
		out = append(out, fromRow(r))
	}
	return out, nil
}

// visible waits until every request row a logbook record derives is in
// the store (logbook.Logbook.Visible).
func (l *Ledger) visible(ctx context.Context) error {
	if l.lb == nil {
		return nil
	}
	return l.lb.Visible(ctx)
}

// Get returns one request. A principal other than "" may only see its
// own. A request read as running whose execution entry this node is
// writing is read again once it is written.
func (l *Ledger) Get(ctx context.Context, id, principal string) (*Request, error) {
	// Whose it is comes first: another principal's request is not found at
	// once, never after waiting for its execution to be recorded, so the
	// time of the answer says nothing of it (DESIGN.md invariant 10).
	rows, err := l.List(ctx, Filter{ID: id})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || principal != "" && rows[0].Principal != principal {
		return nil, fmt.Errorf("gateway: request %s: %w", id, ErrNotFound)
	}
	// A request read as running may have its execution entry being
	// written: wait for that, then read it again (a settled one stays so).
	if rows[0].Status == StatusRunning {
		l.settled(ctx, id)
		if rows, err = l.List(ctx, Filter{ID: id}); err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("gateway: request %s: %w", id, ErrNotFound)
		}
	}
	return rows[0], nil
}

// Wait returns the request once it is settled (neither waiting for a
// human nor running: an approved statement is waited for until the Pilot
// has done with it), or when wait has passed, whichever is first; get
// reads it (Get, as the caller shows it).
func (l *Ledger) Wait(ctx context.Context, id string, wait time.Duration, get func(context.Context) (*Request, error)) (*Request, error) {
	deadline := time.Now().Add(wait)
	for {
		v, err := get(ctx)
		if err != nil || (v.Status != StatusWaiting && v.Status != StatusRunning) || wait <= 0 || !time.Now().Before(deadline) {
			return v, err
		}
		ch := l.changed(id)
		t := time.NewTimer(min(time.Until(deadline), time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, nil
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// changed returns a channel closed at the next change of request id.
func (l *Ledger) changed(id string) <-chan struct{} {
	l.waitMu.Lock()
	defer l.waitMu.Unlock()
	if l.waiters == nil {
		l.waiters = map[string]chan struct{}{}
	}
	ch, ok := l.waiters[id]
	if !ok {
		ch = make(chan struct{})
		l.waiters[id] = ch
	}
	return ch
}

// Notify wakes everyone waiting on request id.
func (l *Ledger) Notify(id string) {
	l.waitMu.Lock()
	defer l.waitMu.Unlock()
	if ch, ok := l.waiters[id]; ok {
		close(ch)
		delete(l.waiters, id)
	}
}

// Count returns how many requests are in status (of principal, unless
// ""), and when the oldest of them was created.
func (l *Ledger) Count(ctx context.Context, status Status, principal string) (int, time.Time, error) {
	n, oldest, err := l.rq.Count(ctx, store.RequestStatus(status), principal)
	return n, time.Unix(0, oldest), err
}

// SetPreview stores a waiting request's preview (JSON) and its digest:
// only where it has none, unless refresh. It reports whether it stored it.
func (l *Ledger) SetPreview(ctx context.Context, id, preview, sha256 string, refresh bool) (bool, error) {
	return l.rq.SetPreview(ctx, id, store.RequestStatus(StatusWaiting), preview, sha256, refresh)
}

// Move moves a request from one status to another if, and only if, it is
// still in the first (the store's conditional update is the lock), and
// reports whether it moved. at zero leaves its update time as it was.
func (l *Ledger) Move(ctx context.Context, id string, from, to Status, at time.Time) (bool, error) {
	if err := l.transit(from, to); err != nil {
		return false, err
	}
	var ns int64
	if !at.IsZero() {
		ns = at.UnixNano()
	}
	return l.rq.Move(ctx, id, store.RequestStatus(from), store.RequestStatus(to), ns)
}

// Decision is a human's act on a request: the status it moves the request
// to, and what the row keeps of the act.
type Decision struct {
	Status            Status
	Path              string
	DecidedBy         string
	Act, ActSignature string
	// Reasons, when not nil, replace the request's.
	Reasons []string
	At      time.Time
}

// Decided records a human's act: the request moves from from to
// d.Status if, and only if, it is still in from. It reports whether it
// moved.
func (l *Ledger) Decided(ctx context.Context, id string, from Status, d Decision) (bool, error) {
	if err := l.transit(from, d.Status); err != nil {
		return false, err
	}
	sd := store.Decision{Status: store.RequestStatus(d.Status), Path: d.Path, DecidedBy: d.DecidedBy, Act: d.Act,
		ActSignature: d.ActSignature, UpdatedNS: d.At.UnixNano()}
	if d.Reasons != nil {
		reasons, _ := json.Marshal(d.Reasons)
		sd.Reasons = string(reasons)
	}
	return l.rq.Decide(ctx, id, store.RequestStatus(from), sd)
}

// Undecide takes back a claim whose act could not be recorded: the
// request moves from from back to to, forgetting who decided.
func (l *Ledger) Undecide(ctx context.Context, id string, from, to Status) error {
	if err := l.transit(from, to); err != nil {
		return err
	}
	return l.rq.Undecide(ctx, id, store.RequestStatus(from), store.RequestStatus(to))
}
