package logbook

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Sentinel errors.
var (
	// ErrClosed: the writer is not running any more (Run returned), so the
	// entry was not appended.
	ErrClosed = errors.New("logbook: closed")
	// ErrReadOnly: the Logbook was built without a signer or clock; it can
	// read and verify but not append.
	ErrReadOnly = errors.New("logbook: read-only (no signer)")
	// ErrUnavailable wraps a failure of the store during an append: the
	// transaction did not commit and none of its entries exist.
	ErrUnavailable = errors.New("logbook: store unavailable")
	// ErrNotFound: no entry with that seq.
	ErrNotFound = errors.New("logbook: no such entry")
	// ErrEmpty: the logbook has no entries, so there is nothing to checkpoint.
	ErrEmpty = errors.New("logbook: empty")
	// ErrNotApplied: a record's If said no; the record was not appended.
	ErrNotApplied = errors.New("logbook: the record's condition did not hold; not appended")
	// errRunTwice: Run was called a second time.
	errRunTwice = errors.New("logbook: run: already run")
)

// Config configures a Logbook. The zero value is usable: WithDefaults fills
// in every unset field.
type Config struct {
	// WriteTimeout bounds one batch's transaction: a store that stops
	// answering altogether (a hung server, a frozen network) fails the
	// batch's appends with ErrUnavailable after it, so their callers get an
	// answer, instead of waiting for as long as the store hangs. An entry
	// whose commit reached the store before the deadline may exist all the
	// same: its caller was told it failed, which for a decision means the
	// marque never left (reconciliation settles it by its receipt).
	// Defaults to 10s.
	WriteTimeout time.Duration
	// Origin names this log in its checkpoints: the first line of every
	// signed checkpoint body. It must be unique to the deployment, so that a
	// checkpoint of one logbook is never mistaken for another's. No newline.
	// Defaults to "github.com/harbormaster-dev/harbormaster/logbook".
	Origin string
	// CheckpointEvery is how many entries may be appended after the last
	// checkpoint before the writer signs a new one: it signs in the same
	// transaction as the batch that reaches a multiple of CheckpointEvery
	// (and as the log's first batch). Defaults to 1000.
	CheckpointEvery int64
	// CheckpointInterval is how often (wall time) the running writer signs
	// a checkpoint if entries were appended since the last one, so no entry
	// waits longer than about this for a signature. Defaults to 10 seconds.
	CheckpointInterval time.Duration
	// MaxBatch is the most entries committed in one transaction. Defaults
	// to 1000.
	MaxBatch int
	// QueueLength is how many appends may wait for the writer. Defaults to
	// 8192.
	QueueLength int
	// MaxPayloadBytes bounds one entry's canonical payload. Defaults to
	// 1 MiB.
	MaxPayloadBytes int
	// LazyWait is the longest the writer holds lazy records (Record.Lazy)
	// waiting for an entry that is not lazy to commit with. Defaults to
	// 5 milliseconds.
	LazyWait time.Duration
	// CommitWindow is the longest the writer holds a batch open for more
	// entries while several appenders are active, so that concurrent
	// statements share one commit and its fsync. It waits only when its
	// recent batches held more than one entry that is not lazy, and only
	// until the batch holds as many as they did; with one appender it
	// never waits. Defaults to 1 millisecond; a negative value turns the
	// window off.
	CommitWindow time.Duration
	// IndexBatch is how many committed entries may wait for their subject
	// index rows (and their Record.After work) before the writer writes
	// them, in a transaction of its own that needs no fsync. Readers do
	// not wait for it: a lookup by subject also reads the entries past the
	// index. Defaults to 256; with a Journal, whose entries reach the
	// store's tables at the same time, 4096.
	IndexBatch int
	// IndexDelay is the longest an entry waits for its subject index rows
	// and After work when fewer than IndexBatch wait. Defaults to 20
	// milliseconds; with a Journal, 200.
	IndexDelay time.Duration
	// Journal, on a SQLite store, is the path of the file where entries
	// are made durable first (journal.go): a group of records without If
	// or With commits with one write and one fdatasync there, and reaches
	// the store's tables behind it, within IndexDelay. "" (the default)
	// commits every entry in the store. New replays it, and the process
	// holds an exclusive lock on it until Run returns.
	Journal string
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Origin == "" {
		c.Origin = "github.com/harbormaster-dev/harbormaster/logbook"
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 1000
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 10 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 1000
	}
	if c.QueueLength == 0 {
		c.QueueLength = 8192
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = 1 << 20
	}
	if c.LazyWait == 0 {
		c.LazyWait = 5 * time.Millisecond
	}
	if c.CommitWindow == 0 {
		c.CommitWindow = time.Millisecond
	}
	if c.IndexBatch == 0 {
		c.IndexBatch = 256
		if c.Journal != "" {
			c.IndexBatch = 4096
		}
	}
	if c.IndexDelay == 0 {
		c.IndexDelay = 20 * time.Millisecond
		if c.Journal != "" {
			c.IndexDelay = 200 * time.Millisecond
		}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Origin == "" || strings.ContainsAny(c.Origin, "\n\r"):
		return fmt.Errorf("logbook: config: Origin %q must be one non-empty line", c.Origin)
	case c.CheckpointEvery < 1:
		return fmt.Errorf("logbook: config: CheckpointEvery %d must be at least 1", c.CheckpointEvery)
	case c.LazyWait < 0:
		return fmt.Errorf("logbook: config: LazyWait %v must not be negative", c.LazyWait)
	case c.CheckpointInterval <= 0:
		return fmt.Errorf("logbook: config: CheckpointInterval %v must be positive", c.CheckpointInterval)
	case c.MaxBatch < 1:
		return fmt.Errorf("logbook: config: MaxBatch %d must be at least 1", c.MaxBatch)
	case c.QueueLength < 1:
		return fmt.Errorf("logbook: config: QueueLength %d must be at least 1", c.QueueLength)
	case c.MaxPayloadBytes < 4:
		return fmt.Errorf("logbook: config: MaxPayloadBytes %d must be at least 4", c.MaxPayloadBytes)
	case c.IndexBatch < 1:
		return fmt.Errorf("logbook: config: IndexBatch %d must be at least 1", c.IndexBatch)
	case c.IndexDelay <= 0:
		return fmt.Errorf("logbook: config: IndexDelay %v must be positive", c.IndexDelay)
	}
	return nil
}

// Logbook is the append-only, hash-chained, checkpoint-signed record. Reads
// and Verify work at any time; Append needs Run. It is safe for concurrent
// use.
type Logbook struct {
	st     *store.Store
	signer note.Signer
	clock  func() time.Time
	log    *slog.Logger
	cfg    Config

	// Verify's fast path: ranges of at least verifySegment entries, on up to
	// verifyWorkers read connections at once. Fields, so tests can force it.
	verifySegment int64
	verifyWorkers int

	reqs    chan *request
	started atomic.Bool
	stopped chan struct{} // closed once Run has answered every request it took

	stats stats
	// failing is set while the writer's last batch of entries failed to
	// commit, until one commits (Recording).
	failing atomic.Bool
	// est is Run's estimate of the active appenders (the commit window's
	// target). A field, so tests can seed it before Run.
	est concurrency

	// mu is the commit lock: Run holds it for each step it takes, and an
	// appender that leads its own commit (lead) for that commit. It guards
	// run and est.
	mu  sync.Mutex
	run runState

	// journal is Config.Journal, open (nil without one); jPending counts
	// its entries not yet in the store (Visible waits for them).
	journal  *journal
	jPending atomic.Int64
}

// stats count the writer's work, for benchmarks and tests.
type stats struct {
	commits   atomic.Int64 // transactions that committed entries
	entries   atomic.Int64 // entries committed
	deferred  atomic.Int64 // transactions that wrote the subject index and After work
	led       atomic.Int64 // batches an appender committed itself (lead)
	journaled atomic.Int64 // batches committed in the journal
}

// New returns a Logbook over st (whose schema must include the logbook
// migrations; store.Open applies them). signer signs checkpoints with the
// control-plane key (see NewCheckpointSigner); clock stamps entries. With a
// nil signer or clock the Logbook is read-only: reads and Verify work,
// Append and Run return ErrReadOnly. A nil logger discards.
func New(st *store.Store, signer note.Signer, clock func() time.Time, logger *slog.Logger, cfg Config) (*Logbook, error) {
	if st == nil {
		return nil, errors.New("logbook: new: nil store")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if signer == nil || clock == nil {
		signer, clock = nil, nil
	}
	l := &Logbook{
		st: st, signer: signer, clock: clock, log: logger, cfg: cfg,
		verifySegment: 50_000,
		verifyWorkers: min(runtime.GOMAXPROCS(0), 8),
		reqs:          make(chan *request, cfg.QueueLength),
		stopped:       make(chan struct{}),
	}
	if cfg.Journal != "" && signer != nil && st.Driver() == store.SQLite {
		j, err := openJournal(cfg.Journal)
		if err != nil {
			return nil, fmt.Errorf("logbook: %w", err)
		}
		n, err := l.replay(context.Background(), j)
		if err != nil {
			j.close()
			return nil, fmt.Errorf("logbook: %w", err)
		}
		if n > 0 {
			logger.Info("logbook: entries replayed from the journal", "entries", n, "head", j.headSeq)
		}
		l.journal = j
	}
	return l, nil
}

// Visible returns once every entry an Append has returned, and its View,
// is in the store's tables, where readers look: it waits for the
// journal's entries to reach them (a Settle) when there are any. The
// Logbook's own readers call it; so do readers of state a View writes.
func (l *Logbook) Visible(ctx context.Context) error {
	if l.jPending.Load() == 0 {
		return nil
	}
	err := l.Settle(ctx)
	if errors.Is(err, ErrClosed) && l.jPending.Load() > 0 {
		// Run stopped with entries it could not bring into the store: they
		// are durable in the journal, and the next start replays them.
		return fmt.Errorf("%w: entries wait in the journal for the next start", ErrUnavailable)
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// Config returns the configuration in force (with defaults).
func (l *Logbook) Config() Config { return l.cfg }

const (
	reqQueued    int32 = iota
	reqTaken           // the writer owns it and will answer
	reqAbandoned       // the appender gave up first; the writer skips it
)

// reqKind says what a request asks of the writer.
type reqKind uint8

const (
	reqEntry      reqKind = iota // append rec
	reqCheckpoint                // Checkpoint
	reqSettle                    // Settle
)

type request struct {
	rec   prepared
	kind  reqKind
	state atomic.Int32
	done  chan result // buffered: the writer never blocks on it
}

type result struct {
	entry Entry
	cp    Checkpoint
	err   error
}

// Append records rec and returns the entry once it is durable: its
// transaction has committed (WAL, synchronous=FULL). Concurrent appends are
// committed together by the writer (group commit), so Append waits for Run.
// The entry's subject index rows and rec.After are written later (see
// Settle); lookups by subject see the entry as soon as Append returns.
//
// If Append returns an error, the entry does not exist and never will:
// callers refuse to act on that ("if the logbook cannot be written, nothing
// executes"). Errors: ErrInvalidRecord (the record), ErrUnavailable (the
// store), ErrClosed (Run has returned), ErrReadOnly, or ctx's error when ctx
// ended before the writer took the entry.
func (l *Logbook) Append(ctx context.Context, rec Record) (Entry, error) {
	if l.signer == nil {
		return Entry{}, fmt.Errorf("logbook: append: %w", ErrReadOnly)
	}
	p, err := prepare(rec, l.cfg.MaxPayloadBytes)
	if err != nil {
		return Entry{}, fmt.Errorf("logbook: append: %w", err)
	}
	res := l.submit(ctx, &request{rec: p, done: make(chan result, 1)})
	if res.err != nil {
		return Entry{}, fmt.Errorf("logbook: append: %w", res.err)
	}
	return res.entry, nil
}

// Recording reports whether the logbook is known to be taking entries: it
// can append, its writer runs, and the writer's last batch (if any)
// committed. It is a hint, not a promise: the next append may still fail.
func (l *Logbook) Recording() bool {
	if l.signer == nil || !l.started.Load() || l.failing.Load() {
		return false
	}
	select {
	case <-l.stopped:
		return false
	default:
		return true
	}
}

// Checkpoint signs and stores a checkpoint of the current head now, through
// the writer, unless the newest checkpoint already covers the head, in which
// case it returns that one. ErrEmpty if there are no entries.
func (l *Logbook) Checkpoint(ctx context.Context) (Checkpoint, error) {
	if l.signer == nil {
		return Checkpoint{}, fmt.Errorf("logbook: checkpoint: %w", ErrReadOnly)
	}
	res := l.submit(ctx, &request{kind: reqCheckpoint, done: make(chan result, 1)})
	if res.err != nil {
		return Checkpoint{}, fmt.Errorf("logbook: checkpoint: %w", res.err)
	}
	return res.cp, nil
}

// Settle returns once the deferred work of every entry appended before it
// was called has committed: their subject index rows and their records'
// After callbacks. Call it before reading state that an After callback
// writes. It does not make anything more durable: entries are durable when
// Append returns, and After work is not fsynced (see Record.After).
// Errors: ErrUnavailable (the store), ErrClosed, ErrReadOnly, ctx's error.
func (l *Logbook) Settle(ctx context.Context) error {
	if l.signer == nil {
		return fmt.Errorf("logbook: settle: %w", ErrReadOnly)
	}
	if res := l.submit(ctx, &request{kind: reqSettle, done: make(chan result, 1)}); res.err != nil {
		return fmt.Errorf("logbook: settle: %w", res.err)
	}
	return nil
}

func (l *Logbook) submit(ctx context.Context, r *request) result {
	select {
	case <-l.stopped:
		return result{err: ErrClosed}
	default:
	}
	if l.lead(r) {
		return <-r.done
	}
	select {
	case l.reqs <- r:
	case <-l.stopped:
		return result{err: ErrClosed}
	case <-ctx.Done():
		return result{err: ctx.Err()}
	}
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return result{err: ctx.Err()}
		}
		// The writer took it and its transaction is under way; its outcome,
		// not ctx, decides whether the entry exists. It is bounded by the
		// store's busy timeout.
		return <-r.done
	case <-l.stopped:
		// Run answers everything it took before closing stopped.
		select {
		case res := <-r.done:
			return res
		default:
			return result{err: ErrClosed}
		}
	}
}

// Run is the writer: it commits appends in batches, writes the subject
// index and After work behind them, and signs checkpoints (every
// CheckpointEvery entries, every CheckpointInterval, and a last one when it
// stops). It runs until ctx ends, then finishes the batch it is
// committing and the deferred work of every committed entry, answers every
// waiting Append with ErrClosed and returns nil. Run may be called once;
// the caller owns the goroutine and waits for it. It returns an error only
// if it cannot start.
//
// While recent batches held one appender's entry each, an Append that
// finds the writer idle commits its entry itself (lead), with whatever
// lazy records Run holds, in its own goroutine: no hand-off to Run and
// back. Run and a leading appender take turns under l.mu.
func (l *Logbook) Run(ctx context.Context) error {
	if l.signer == nil {
		return fmt.Errorf("logbook: run: %w", ErrReadOnly)
	}
	if !l.started.CompareAndSwap(false, true) {
		return errRunTwice
	}
	defer l.stop()
	w, err := l.newWriter(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fmt.Errorf("logbook: run: %w", err)
	}
	defer w.close()
	defer l.journal.close()
	// A batch the writer has taken commits or fails on its own merits, not
	// because Run's ctx ended halfway.
	wctx := context.WithoutCancel(ctx)
	// Entries a crash left unindexed (or another process wrote).
	if err := w.settle(wctx); err != nil {
		l.log.Warn("logbook: subject index catch-up failed", "err", err)
	}

	ticker := time.NewTicker(l.cfg.CheckpointInterval)
	defer ticker.Stop()
	newTimer := func() *time.Timer {
		t := time.NewTimer(time.Hour)
		t.Stop()
		return t
	}
	// lazy: lazy records wait in batch (up to LazyWait) for an eager one.
	// window: an eager batch waits (up to CommitWindow) for the appenders
	// recent batches had. later: deferred work waits up to IndexDelay.
	b := &l.run
	l.mu.Lock()
	*b = runState{w: w, wctx: wctx, lazy: newTimer(), window: newTimer(), later: newTimer(),
		batch: make([]*request, 0, l.cfg.MaxBatch)}
	l.mu.Unlock()
	defer b.lazy.Stop()
	defer b.window.Stop()
	defer b.later.Stop()
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			l.flush(false, false)
			fctx, cancel := context.WithTimeout(wctx, 5*time.Second)
			if err := w.settle(fctx); err != nil {
				l.log.Warn("logbook: subject index and After work at stop failed", "err", err)
			}
			if _, err := w.write(fctx, nil, cpIfNew); err != nil {
				l.log.Warn("logbook: final checkpoint failed", "err", err)
			}
			cancel()
			b.w = nil // no appender leads from here on
			l.mu.Unlock()
			return nil
		case r := <-l.reqs:
			l.mu.Lock()
			held := len(b.batch)
			l.take(r)
		fill:
			for len(b.batch) < l.cfg.MaxBatch {
				select {
				case r := <-l.reqs:
					l.take(r)
				default:
					break fill
				}
			}
			switch {
			case len(b.batch) >= l.cfg.MaxBatch || b.urgent || (b.eager > 0 && l.cfg.LazyWait == 0):
				l.flush(false, false)
			case b.eager > 0 && l.cfg.CommitWindow > 0 && b.eager < l.est.target():
				// Other appenders are active: give them the window to join.
				if !b.windowOn {
					b.windowOn = true
					b.window.Reset(l.cfg.CommitWindow)
				}
			case b.eager > 0:
				l.flush(false, false)
			case held == 0:
				b.lazy.Reset(l.cfg.LazyWait)
			}
			l.mu.Unlock()
		case <-b.window.C:
			l.mu.Lock()
			b.windowOn = false
			l.flush(true, false)
			l.mu.Unlock()
		case <-b.lazy.C:
			l.mu.Lock()
			l.flush(false, false)
			l.mu.Unlock()
		case <-b.later.C:
			l.mu.Lock()
			b.laterOn = false
			if len(b.batch) > 0 && b.eager > 0 {
				l.flush(false, false) // about to commit anyway; its deferred work joins
			}
			l.settleNow()
			l.mu.Unlock()
		case <-ticker.C:
			l.mu.Lock()
			l.flush(false, false)
			if _, err := w.write(ctx, nil, cpIfNew); err != nil {
				l.log.Warn("logbook: timed checkpoint failed", "err", err)
			}
			l.mu.Unlock()
		}
	}
}

// runState is the writer's state: Run's, and a leading appender's while it
// holds l.mu. Only the holder of l.mu touches it.
type runState struct {
	w        *writer // nil before Run has started and once it stops
	wctx     context.Context
	batch    []*request
	eager    int  // entries in batch that are not lazy, and checkpoints
	urgent   bool // a Checkpoint or Settle in batch: no window
	windowOn bool
	laterOn  bool
	// lazy, window and later are Run's timers (see Run); a leader stops
	// and resets them as Run would.
	lazy, window, later *time.Timer
}

// take adds r to the batch. l.mu is held.
func (l *Logbook) take(r *request) {
	b := &l.run
	b.batch = append(b.batch, r)
	switch {
	case r.kind != reqEntry:
		b.eager++
		b.urgent = true
	case !r.rec.lazy:
		b.eager++
	}
}

// flush commits the batch, answers its appends and sees to the deferred
// work: written now when due (or a Settle asks), else within IndexDelay.
// A leader (lead) leaves writing it to Run, so an appender never runs
// other records' After callbacks in its own goroutine. l.mu is held.
func (l *Logbook) flush(timedOut, leader bool) {
	b := &l.run
	b.lazy.Stop()
	b.window.Stop()
	b.windowOn = false
	if len(b.batch) == 0 {
		return
	}
	w := b.w
	settles := w.commit(b.wctx, b.batch)
	l.est.observe(b.eager, timedOut)
	clear(b.batch)
	b.batch, b.eager, b.urgent = b.batch[:0], 0, false
	switch {
	case leader && w.pending() >= l.cfg.IndexBatch:
		b.laterOn = true
		b.later.Reset(0)
	case len(settles) > 0 || w.pending() >= l.cfg.IndexBatch:
		l.settleNow()
		for _, r := range settles {
			r.done <- result{err: w.settleErr}
		}
	case w.pending() > 0 && !b.laterOn:
		b.laterOn = true
		b.later.Reset(l.cfg.IndexDelay)
	}
}

// settleNow writes the deferred work. l.mu is held.
func (l *Logbook) settleNow() {
	b := &l.run
	b.laterOn = false
	b.later.Stop()
	if err := b.w.settle(b.wctx); err != nil {
		l.log.Error("logbook: subject index and After work not committed; retrying", "err", err)
		b.laterOn = true
		b.later.Reset(max(l.cfg.IndexDelay, time.Second))
	}
}

// lead commits r, an entry that is not lazy, in the caller's goroutine
// when no batch is committing or held open and recent batches had one
// appender each: the group commit's leader is the appender itself, with
// the lazy records Run holds. It reports whether it did; r is answered
// on r.done either way it ends.
func (l *Logbook) lead(r *request) bool {
	if r.kind != reqEntry || r.rec.lazy || !l.mu.TryLock() {
		return false
	}
	defer l.mu.Unlock()
	b := &l.run
	if b.w == nil || b.windowOn || len(b.batch) >= l.cfg.MaxBatch || l.est.target() > 1 {
		return false
	}
	l.take(r)
	l.stats.led.Add(1)
	l.flush(false, true)
	return true
}

// concurrency estimates how many appenders are active from the eager
// entries of the last batches: an appender that waits for its entry has at
// most one in a batch. The commit window waits for that many.
type concurrency struct {
	recent [4]int
	next   int
}

func (c *concurrency) target() int { return max(c.recent[0], c.recent[1], c.recent[2], c.recent[3]) }

// observe records a committed batch's eager entries. A window that ran out
// means fewer appenders than estimated: forget the history.
func (c *concurrency) observe(eager int, timedOut bool) {
	if timedOut {
		c.recent = [4]int{}
	}
	c.recent[c.next] = eager
	c.next = (c.next + 1) % len(c.recent)
}

// stop answers every request still queued, then marks the writer stopped.
func (l *Logbook) stop() {
	for {
		select {
		case r := <-l.reqs:
			if r.state.CompareAndSwap(reqQueued, reqTaken) {
				r.done <- result{err: ErrClosed}
			}
		default:
			close(l.stopped)
			return
		}
	}
}

// writer is Run's state. Only Run's goroutine touches it.
type writer struct {
	l          *Logbook
	db         *sql.DB
	pg         bool      // the store is PostgreSQL: other nodes may append too
	lock       *sql.Stmt // PostgreSQL: takes store.LockLogbookAppend
	head       *sql.Stmt
	insCP      *sql.Stmt
	savepoint  *sql.Stmt // around each After callback
	release    *sql.Stmt
	insEntry   []*sql.Stmt // [i] inserts 2^i rows
	insSubject []*sql.Stmt
	h          hasher
	args       []any
	j          *journal             // Config.Journal, or nil
	views      map[string]*sql.Stmt // View statements, by their SQL

	// Committed entries whose subject rows and After work are not written
	// yet, in seq order; their subject rows as (key, value, seq) triples,
	// in the same order; the last settle's outcome.
	deferred    []deferredEntry
	deferredSub []any
	settleErr   error
}

// deferredEntry is the work a committed entry leaves for settle: its
// subject rows are deferredSub[sub:end].
type deferredEntry struct {
	seq      int64
	sub, end int
	after    func(ctx context.Context, tx *sql.Tx) error
}

// Multi-row INSERTs of up to 2^(k-1) rows, well under SQLite's 32766 bound
// parameters: 64 entries (448 values), 128 subjects (384 values).
const (
	entryInsertSizes   = 7
	subjectInsertSizes = 8
)

// headQuery reads the chain head (NULLs when there are no entries) and the
// newest checkpoint's size in one statement.
const headQuery = `SELECT h.seq, h.hash, (SELECT COALESCE(MAX(size), 0) FROM logbook_checkpoints)
	FROM (SELECT 1) LEFT JOIN (SELECT seq, hash FROM logbook_entries ORDER BY seq DESC LIMIT 1) h`

// headQueryPostgres is headQuery in PostgreSQL's dialect (a join needs its
// ON, a subquery its alias).
const headQueryPostgres = `SELECT h.seq, h.hash, (SELECT COALESCE(MAX(size), 0) FROM logbook_checkpoints)
	FROM (SELECT 1) one LEFT JOIN (SELECT seq, hash FROM logbook_entries ORDER BY seq DESC LIMIT 1) h ON true`

func (l *Logbook) newWriter(ctx context.Context) (*writer, error) {
	w := &writer{l: l, db: l.st.DB(), pg: l.st.Driver() == store.Postgres, j: l.journal, views: map[string]*sql.Stmt{}}
	stmts := []struct {
		dst *(*sql.Stmt)
		sql string
	}{
		{&w.head, headQuery},
		{&w.insCP, "INSERT INTO logbook_checkpoints (size, hash, time_ns, note) VALUES (?, ?, ?, ?)"},
		{&w.savepoint, "SAVEPOINT logbook_after"},
		{&w.release, "RELEASE logbook_after"},
	}
	if w.pg {
		// Several nodes append to one chain: each append transaction
		// takes the store-wide append lock before it reads the head.
		stmts[0].sql = headQueryPostgres
		stmts = append(stmts, struct {
			dst *(*sql.Stmt)
			sql string
		}{&w.lock, "SELECT pg_advisory_xact_lock(?)"})
	}
	for _, s := range stmts {
		stmt, err := w.db.PrepareContext(ctx, l.st.SQL(s.sql))
		if err != nil {
			w.close()
			return nil, err
		}
		*s.dst = stmt
	}
	var err error
	if w.insEntry, err = w.prepareInserts(ctx, "INSERT INTO logbook_entries (seq, time_ns, kind, subjects, payload, prev_hash, hash) VALUES ", "", 7, entryInsertSizes); err != nil {
		w.close()
		return nil, err
	}
	// DO NOTHING: the index is derived; a row that is there already
	// (written by another process's writer) is the same row.
	if w.insSubject, err = w.prepareInserts(ctx, "INSERT INTO logbook_subjects (key, value, seq) VALUES ", " ON CONFLICT DO NOTHING", 3, subjectInsertSizes); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *writer) close() {
	for _, s := range []*sql.Stmt{w.head, w.insCP, w.savepoint, w.release, w.lock} {
		if s != nil {
			s.Close()
		}
	}
	for _, s := range append(w.insEntry, w.insSubject...) {
		s.Close()
	}
	for _, s := range w.views {
		s.Close()
	}
}

// insert runs a multi-row INSERT for the rows in args (ncols values each):
// as many rows per statement as the largest prepared size that fits, so a
// batch takes a handful of statements.
func (w *writer) insert(ctx context.Context, tx *sql.Tx, stmts []*sql.Stmt, ncols int, args []any) error {
	for len(args) > 0 {
		rows := len(args) / ncols
		i := len(stmts) - 1
		for 1<<i > rows {
			i--
		}
		n := 1 << i
		if _, err := tx.StmtContext(ctx, stmts[i]).ExecContext(ctx, args[:n*ncols]...); err != nil {
			return err
		}
		args = args[n*ncols:]
	}
	return nil
}

// prepareInserts prepares "head (row), (row), ..." for 1, 2, 4, ... 2^(k-1)
// rows. They are prepared up front: the write handle has one connection, and
// a transaction on it holds that connection.
func (w *writer) prepareInserts(ctx context.Context, head, tail string, ncols, k int) ([]*sql.Stmt, error) {
	row := "(?" + strings.Repeat(", ?", ncols-1) + ")"
	var stmts []*sql.Stmt
	for i := range k {
		q := head + row + strings.Repeat(", "+row, 1<<i-1) + tail
		stmt, err := w.db.PrepareContext(ctx, w.l.st.SQL(q))
		if err != nil {
			for _, s := range stmts {
				s.Close()
			}
			return nil, err
		}
		stmts = append(stmts, stmt)
	}
	return stmts, nil
}

// commit writes one batch and answers its requests, except Settle
// requests, which it returns: they are answered after the deferred work.
func (w *writer) commit(ctx context.Context, batch []*request) (settles []*request) {
	live := make([]*request, 0, len(batch))
	mode := cpDue
	for _, r := range batch {
		if !r.state.CompareAndSwap(reqQueued, reqTaken) {
			continue
		}
		switch r.kind {
		case reqSettle:
			settles = append(settles, r)
			continue
		case reqCheckpoint:
			mode = cpForce
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return settles
	}
	wctx, cancel := context.WithTimeout(ctx, w.l.cfg.WriteTimeout)
	out, err := w.write(wctx, live, mode)
	cancel()
	if err != nil && !errors.Is(err, ErrEmpty) {
		w.l.log.Error("logbook: batch not committed", "entries", len(live), "err", err)
		w.l.failing.Store(true)
	} else {
		w.l.failing.Store(false)
	}
	for i, r := range live {
		switch {
		case r.kind == reqCheckpoint:
			r.done <- result{cp: out.cp, err: err}
		case err != nil && !errors.Is(err, ErrEmpty):
			r.done <- result{err: err}
		case out.skipped != nil && out.skipped[i]:
			r.done <- result{err: ErrNotApplied}
		default:
			r.done <- result{entry: out.entries[i]}
		}
	}
	return settles
}

type written struct {
	entries []Entry // by index in reqs; zero for checkpoint requests
	// skipped marks, by index in reqs, records whose If said no (nil when
	// none had an If).
	skipped []bool
	cp      Checkpoint
}

// cpMode says when write signs a checkpoint.
type cpMode int

const (
	cpDue   cpMode = iota // CheckpointEvery entries since the last one
	cpIfNew               // any entry since the last one (timer, shutdown)
	cpForce               // as cpIfNew, else return the newest (Checkpoint)
)

// write appends the entries of reqs (checkpoint requests carry none) in one
// transaction, with a checkpoint as mode says. It re-reads the chain head
// inside the transaction, which holds SQLite's write lock, so a second writer
// on the same file (another process) cannot fork the chain. Once it has
// committed, the entries' subject rows and After work wait in w.deferred.
func (w *writer) write(ctx context.Context, reqs []*request, mode cpMode) (written, error) {
	out := written{entries: make([]Entry, len(reqs))}
	if w.j != nil && w.j.broken != nil {
		// Fail closed until a restart replays what the journal holds.
		return out, fmt.Errorf("%w: journal: %w", ErrUnavailable, w.j.broken)
	}
	if w.j != nil && mode == cpDue && w.journalable(reqs) {
		return w.writeJournal(ctx, reqs, out)
	}
	if err := w.prepareViews(ctx, reqs); err != nil {
		return out, err
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return out, fmt.Errorf("%w: begin: %w", ErrUnavailable, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()

	if w.pg {
		// The head is read after the lock, so it is the last committed
		// append of any node: the chain cannot fork, and a checkpoint
		// signs what this transaction extends. Released at commit.
		if _, err := tx.StmtContext(ctx, w.lock).ExecContext(ctx, store.LockLogbookAppend); err != nil {
			return out, fmt.Errorf("%w: lock: %w", ErrUnavailable, err)
		}
	}
	// The journal's entries first: the store's chain is always a prefix
	// of the chain, and the head read next is the chain's.
	if w.j != nil && len(w.j.pending) > 0 {
		if err := w.insertJournaled(ctx, tx); err != nil {
			return out, err
		}
	}
	var headSeq int64
	var headHash [32]byte
	var seqCol sql.NullInt64
	var headRaw []byte
	var cpSize int64
	switch err := tx.StmtContext(ctx, w.head).QueryRowContext(ctx).Scan(&seqCol, &headRaw, &cpSize); {
	case err != nil:
		return out, fmt.Errorf("%w: read head: %w", ErrUnavailable, err)
	case !seqCol.Valid:
	case len(headRaw) != 32:
		// Never chain onto a damaged head: Verify will say what happened.
		return out, fmt.Errorf("%w: head entry %d has a malformed hash", ErrUnavailable, seqCol.Int64)
	default:
		headSeq = seqCol.Int64
		copy(headHash[:], headRaw)
	}

	// Conditional records first: one whose If says no is left out, before
	// any entry of the batch is chained.
	for i, r := range reqs {
		if r.kind != reqEntry || r.rec.cond == nil {
			continue
		}
		ok, err := r.rec.cond(ctx, tx)
		if err != nil {
			return out, fmt.Errorf("%w: a record's condition failed: %w", ErrUnavailable, err)
		}
		if !ok {
			if out.skipped == nil {
				out.skipped = make([]bool, len(reqs))
			}
			out.skipped[i] = true
		}
	}
	skip := func(i int) bool { return out.skipped != nil && out.skipped[i] }

	now := w.l.clock().UTC()
	ns := now.UnixNano()
	var hexBuf [64]byte
	entryArgs := w.args[:0]
	n := 0
	for _, r := range reqs {
		for rec := &r.rec; rec != nil; rec = rec.then {
			n++
		}
	}
	hashes := make([]byte, 0, 64*n) // every entry's prev and hash, for the INSERT
	firstSeq := headSeq + 1
	for i, r := range reqs {
		if r.kind != reqEntry || skip(i) {
			continue
		}
		for rec := &r.rec; rec != nil; rec = rec.then {
			seq := headSeq + 1
			sum := w.h.sum(seq, ns, []byte(rec.kind), rec.subjJSON, rec.payload, &headHash)
			at := len(hashes)
			hashes = append(append(hashes, headHash[:]...), sum[:]...)
			prevRaw, hashRaw := hashes[at:at+32:at+32], hashes[at+32:at+64:at+64]
			hex.Encode(hexBuf[:], headHash[:])
			prev := string(hexBuf[:])
			hex.Encode(hexBuf[:], sum[:])
			hash := string(hexBuf[:])
			entryArgs = append(entryArgs, seq, ns, rec.kind, string(rec.subjJSON), string(rec.payload), prevRaw, hashRaw)
			if rec == &r.rec {
				out.entries[i] = Entry{
					Seq: seq, Time: now, Kind: rec.kind, Subjects: rec.subjects,
					Payload: rec.payload, PrevHash: prev, Hash: hash,
				}
			}
			headSeq, headHash = seq, sum
		}
	}
	err = w.insert(ctx, tx, w.insEntry, 7, entryArgs)
	clear(entryArgs) // keep the buffer, not the batch's payloads
	w.args = entryArgs[:0]
	if err != nil {
		return out, fmt.Errorf("%w: insert entries: %w", ErrUnavailable, err)
	}
	for i, r := range reqs {
		if r.kind != reqEntry || skip(i) {
			continue
		}
		for rec := &r.rec; rec != nil; rec = rec.then {
			if rec.with != nil {
				if err := rec.with(ctx, tx); err != nil {
					return out, fmt.Errorf("%w: a record's own statements failed: %w", ErrUnavailable, err)
				}
			}
			if v := rec.view; v != nil {
				if _, err := tx.StmtContext(ctx, w.views[v.SQL]).ExecContext(ctx, v.Args...); err != nil {
					return out, fmt.Errorf("%w: a record's view failed: %w", ErrUnavailable, err)
				}
			}
		}
	}

	switch {
	case headSeq == 0:
		if mode == cpForce {
			return out, ErrEmpty
		}
		return out, nil
	case headSeq > cpSize && (mode != cpDue || cpSize == 0 || headSeq/w.l.cfg.CheckpointEvery > cpSize/w.l.cfg.CheckpointEvery):
		// Due at the log's first batch, so an intact log never holds
		// entries with no checkpoint (even when its writer is killed
		// before the first interval), and at the batch that reaches each
		// multiple of CheckpointEvery, so no tail is longer.
		cp, err := signCheckpoint(w.l.signer, w.l.cfg.Origin, headSeq, headHash, now)
		if err != nil {
			return out, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if _, err := tx.StmtContext(ctx, w.insCP).ExecContext(ctx, cp.Size, cp.Hash, ns, cp.Note); err != nil {
			return out, fmt.Errorf("%w: insert checkpoint %d: %w", ErrUnavailable, cp.Size, err)
		}
		out.cp = cp
	case mode == cpForce:
		// The newest checkpoint already covers the head.
		cp, err := latestCheckpoint(ctx, tx)
		if err != nil {
			return out, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		out.cp = cp
	}
	if err := tx.Commit(); err != nil {
		return out, fmt.Errorf("%w: commit: %w", ErrUnavailable, err)
	}
	committed = true
	if headSeq >= firstSeq {
		w.l.stats.commits.Add(1)
		w.l.stats.entries.Add(headSeq - firstSeq + 1)
	}
	if w.j != nil {
		// Committed with an fsync: the store holds the whole chain.
		w.j.headSeq, w.j.headHash, w.j.cpSize = headSeq, headHash, max(cpSize, out.cp.Size)
		w.materialized()
	}
	w.defer_(reqs, out.skipped, firstSeq)
	return out, nil
}

// defer_ queues the subject rows and After work of reqs' entries, which
// committed from firstSeq on (skipped, by index, did not). The subject
// rows are copied out now: the caller owns the entry (and its Subjects
// map) from the moment it is answered.
func (w *writer) defer_(reqs []*request, skipped []bool, firstSeq int64) {
	for i, r := range reqs {
		if r.kind != reqEntry || skipped != nil && skipped[i] {
			continue
		}
		for rec := &r.rec; rec != nil; rec = rec.then {
			d := deferredEntry{seq: firstSeq, sub: len(w.deferredSub), after: rec.after}
			for k, v := range rec.subjects {
				w.deferredSub = append(w.deferredSub, k, v, firstSeq)
			}
			d.end = len(w.deferredSub)
			w.deferred = append(w.deferred, d)
			firstSeq++
		}
	}
}
