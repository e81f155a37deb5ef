package logbook

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// The subject index and Record.After work are written behind the entries,
// by the writer, in transactions of their own ("settles"): one per
// Config.IndexBatch entries or Config.IndexDelay, whichever comes first,
// when a Settle asks, and when Run starts and stops.
//
// A settle needs no fsync: its state is derived (the index) or rebuildable
// (After), and the entries it follows are durable already. It runs with
// synchronous=NORMAL on a connection it holds for the whole time, so no
// other transaction on the write handle ever commits without an fsync; a
// later entry commit's fsync makes it durable with its own frames.
//
// logbook_index.indexed_through is the last seq whose subject rows are in,
// committed with them. A lookup by subject reads the index up to it and the
// entries past it (read.go), so it never misses a committed entry, however
// far the index lags, even across a crash or another process's writes: the
// next settle indexes every entry past it, reading from the store what its
// own memory does not hold.

// pending is how many committed entries wait for their deferred work.
func (w *writer) pending() int { return len(w.deferred) }

// settle writes the deferred work of every committed entry and indexes any
// entry past indexed_through. On failure the work stays queued for the next
// settle; w.settleErr keeps the outcome for Settle's callers.
func (w *writer) settle(ctx context.Context) (err error) {
	defer func() { w.settleErr = err }()
	// The journal's entries first: the index rows below are theirs too.
	if err := w.materialize(ctx); err != nil {
		return err
	}
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%w: settle: %w", ErrUnavailable, err)
	}
	defer conn.Close()
	if !w.pg {
		if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
			return fmt.Errorf("%w: settle: %w", ErrUnavailable, err)
		}
		defer func() {
			if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous=FULL"); rerr != nil {
				// Never hand the connection back without fsync on commit: drop it,
				// and the pool opens a new one with the store's settings.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
				err = errors.Join(err, fmt.Errorf("%w: settle: restore synchronous=FULL: %w", ErrUnavailable, rerr))
			}
		}()
	}
	n, err := w.settleTx(ctx, conn, false)
	if errors.Is(err, errAfterFailed) {
		// Again, each After in a savepoint, so the one that fails is
		// undone alone.
		n, err = w.settleTx(ctx, conn, true)
	}
	if err != nil {
		return fmt.Errorf("%w: settle: %w", ErrUnavailable, err)
	}
	if n > 0 || len(w.deferred) > 0 {
		w.l.stats.deferred.Add(1)
	}
	clear(w.deferred) // release the closures and strings
	clear(w.deferredSub)
	w.deferred, w.deferredSub = w.deferred[:0], w.deferredSub[:0]
	return nil
}

// settleTx is settle's transaction; it returns how many entries it indexed.
// It runs the After callbacks one after another (errAfterFailed if one
// fails, and nothing commits), or, careful, each in a savepoint.
func (w *writer) settleTx(ctx context.Context, conn *sql.Conn, careful bool) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if w.pg {
		// PostgreSQL: the settle's commit need not wait for the WAL flush
		// (SET LOCAL ends with the transaction), and settles of several
		// nodes take turns, so two never insert the same rows at once.
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", store.LockLogbookSettle); err != nil {
			return 0, fmt.Errorf("lock: %w", err)
		}
	}
	var through, head int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT indexed_through FROM logbook_index WHERE id = 1), 0),
		COALESCE((SELECT MAX(seq) FROM logbook_entries), 0)`).Scan(&through, &head); err != nil {
		return 0, fmt.Errorf("read index state: %w", err)
	}
	if through > head {
		// The index claims entries the log lacks (a truncated log): index
		// from the head again; Verify reports the truncation.
		through = head
	}
	args := w.args[:0]
	next := through + 1
	addGap := func(to int64) error {
		if to < next {
			return nil
		}
		var err error
		args, err = w.readSubjects(ctx, tx, next, to, args)
		return err
	}
	for _, d := range w.deferred {
		if d.seq <= through {
			continue // indexed already, by another process's writer
		}
		if err := addGap(d.seq - 1); err != nil {
			return 0, err
		}
		args = append(args, w.deferredSub[d.sub:d.end]...)
		next = d.seq + 1
	}
	if err := addGap(head); err != nil {
		return 0, err
	}
	err = w.insert(ctx, tx, w.insSubject, 3, args)
	clear(args)
	w.args = args[:0]
	if err != nil {
		return 0, fmt.Errorf("insert subjects: %w", err)
	}
	for _, d := range w.deferred {
		if d.after == nil {
			continue
		}
		if !careful {
			if err := d.after(ctx, tx); err != nil {
				return 0, fmt.Errorf("%w: seq %d: %w", errAfterFailed, d.seq, err)
			}
			continue
		}
		if err := w.runAfter(ctx, tx, d.after); err != nil {
			w.l.log.Error("logbook: a record's After statements failed; rolled back", "seq", d.seq, "err", err)
			if errors.Is(err, errTxBroken) {
				return 0, err
			}
		}
	}
	if head > through {
		if _, err := tx.ExecContext(ctx, w.l.st.SQL(`INSERT INTO logbook_index (id, indexed_through) VALUES (1, ?)
			ON CONFLICT (id) DO UPDATE SET indexed_through = excluded.indexed_through`), head); err != nil {
			return 0, fmt.Errorf("update index state: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	committed = true
	return head - through, nil
}

var (
	errTxBroken    = errors.New("transaction unusable")
	errAfterFailed = errors.New("an After callback failed")
)

// runAfter runs one After callback in a savepoint, so that its failure
// undoes its own statements only.
func (w *writer) runAfter(ctx context.Context, tx *sql.Tx, fn func(context.Context, *sql.Tx) error) error {
	return savepointed(ctx, tx, w.savepoint, w.release, func() error { return fn(ctx, tx) })
}

// savepointed runs fn in the savepoint logbook_after of tx (begin and
// release prepare it and let it go; nil: unprepared), so that fn's failure
// undoes its own statements only. It returns fn's error; errTxBroken when
// the savepoint cannot be taken, undone or let go (a failure that took the
// whole transaction with it, as SQLite's disk full can): tx is unusable.
func savepointed(ctx context.Context, tx *sql.Tx, begin, release *sql.Stmt, fn func() error) error {
	exec := func(stmt *sql.Stmt, text string) error {
		var err error
		if stmt != nil {
			_, err = tx.StmtContext(ctx, stmt).ExecContext(ctx)
		} else {
			_, err = tx.ExecContext(ctx, text)
		}
		return err
	}
	if err := exec(begin, "SAVEPOINT logbook_after"); err != nil {
		return fmt.Errorf("%w: %w", errTxBroken, err)
	}
	ferr := fn()
	if ferr != nil {
		if err := exec(nil, "ROLLBACK TO logbook_after"); err != nil {
			return fmt.Errorf("%w: %w (after %w)", errTxBroken, err, ferr)
		}
	}
	if err := exec(release, "RELEASE logbook_after"); err != nil {
		return fmt.Errorf("%w: %w", errTxBroken, err)
	}
	return ferr
}

// readSubjects appends the subject rows of entries from..to, read from the
// store: entries this writer's memory does not hold.
func (w *writer) readSubjects(ctx context.Context, tx *sql.Tx, from, to int64, args []any) ([]any, error) {
	rows, err := tx.QueryContext(ctx, w.l.st.SQL("SELECT seq, subjects FROM logbook_entries WHERE seq BETWEEN ? AND ? ORDER BY seq"), from, to)
	if err != nil {
		return args, fmt.Errorf("read subjects: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			return args, fmt.Errorf("read subjects: %w", err)
		}
		var subjects map[string]string
		if err := json.Unmarshal(raw, &subjects); err != nil {
			// A damaged entry stays out of the index; Verify reports it.
			w.l.log.Warn("logbook: entry's subjects unreadable; not indexed", "seq", seq, "err", err)
			continue
		}
		for k, v := range subjects {
			args = append(args, k, v, seq)
		}
	}
	return args, rows.Err()
}
