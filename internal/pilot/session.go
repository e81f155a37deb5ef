package pilot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// A Session is a target transaction the Pilot holds for one client
// transaction of the wire front (BEGIN ... COMMIT): several marques'
// statements run in it, each verified, guarded and given its receipt
// exactly as Execute runs one alone, and they commit or roll back
// together. Nothing commits until Commit: a statement's receipt commits
// with it, so after a crash the receipts say which of them ran (all or
// none), and reconciliation settles them as it settles one.
//
// A Session holds one of the pool's connections from Begin to Commit or
// Rollback; the caller bounds how many are open and for how long. It runs
// only compiled and approved-free paths: no rehearsal expectations.
type Session struct {
	p *Pilot
	t *Txn

	mu sync.Mutex
	// aborted: a statement failed on the target, which aborted the
	// transaction; only Rollback or RollbackTo runs.
	aborted bool
	// broken: the transaction's state on the target is unknown (a failure
	// on this side mid-statement, a count past max_rows that no guard
	// stopped): only Rollback runs.
	broken bool
	done   bool
}

// TxOptions are what a client asked of its transaction.
type TxOptions struct {
	// Isolation is "read committed" (the default when empty), "repeatable
	// read" or "serializable".
	Isolation string
}

// ErrSessionAborted is a statement sent to a Session whose transaction
// an earlier statement aborted.
var ErrSessionAborted = errors.New("pilot: the transaction is aborted; only ROLLBACK or ROLLBACK TO SAVEPOINT runs")

// ErrSessionBroken is a Session whose transaction's state on the target
// is unknown: it can only be rolled back.
var ErrSessionBroken = errors.New("pilot: the transaction was lost on the target; only ROLLBACK runs")

// Begin opens a target transaction for a Session, with the pinned
// settings and a transaction id (recorded with each decision in it, so a
// reconciler leaves its statements alone while it is in progress).
func (p *Pilot) Begin(ctx context.Context, o TxOptions) (TxSession, error) {
	var begin string
	switch strings.ToLower(o.Isolation) {
	case "", "read committed":
		begin = `BEGIN ISOLATION LEVEL READ COMMITTED`
	case "repeatable read":
		begin = `BEGIN ISOLATION LEVEL REPEATABLE READ`
	case "serializable":
		begin = `BEGIN ISOLATION LEVEL SERIALIZABLE`
	default:
		return nil, fmt.Errorf("pilot: begin: isolation level %q is not one of read committed, repeatable read, serializable", o.Isolation)
	}
	t, err := p.beginWith(ctx, true, begin)
	if err != nil {
		return nil, err
	}
	return &Session{p: p, t: t}, nil
}

// ID is the target transaction's id (pg_current_xact_id).
func (s *Session) ID() string { return s.t.id }

// Execute verifies and runs one marque's statement inside the Session's
// transaction, writing its receipt, without committing. A refusal on the
// target (a guard, the target's own error) leaves the transaction
// aborted, as any error inside a PostgreSQL transaction does.
func (s *Session) Execute(ctx context.Context, req Request) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.done:
		return nil, errors.New("pilot: the transaction has ended")
	case s.broken:
		return nil, ErrSessionBroken
	case s.aborted:
		return nil, ErrSessionAborted
	case req.ExpectBefore != "" || req.ExpectAfter != "" || req.ExpectRows != nil:
		return nil, errors.New("pilot: a statement with a rehearsal's expectations runs on its own, not in a session")
	}
	p := s.p
	claims, pb, res := p.authorize(req)
	if res != nil {
		return res, nil
	}
	p.shapes.literal.Add(1)
	g, res := p.guard(req.SQL, pb, claims.Path, false)
	if res != nil {
		return res, nil
	}
	if err := p.ensureViews(ctx, g.Views); err != nil {
		return nil, err
	}
	read := g.Kind == sqlcheck.OpSelect
	b := &pgx.Batch{}
	b.Queue(stmtReceipt, claims.ID, claims.RequestID, claims.Principal, claims.Target, claims.StatementHash, claims.Path)
	if read {
		// A read turns its own subtransaction read-only, which rolling
		// back to the savepoint undoes for the statements after it.
		b.Queue(`SAVEPOINT harbormaster_read`)
		b.Queue(`SET LOCAL transaction_read_only = on`)
	}
	if p.cfg.Role != "" {
		b.Queue(`SELECT set_config('role', $1, true)`, p.cfg.Role)
	}
	b.Queue(g.text(false))
	if read {
		b.Queue(`ROLLBACK TO SAVEPOINT harbormaster_read`)
		b.Queue(`RELEASE SAVEPOINT harbormaster_read`)
	} else if p.cfg.Role != "" {
		b.Queue(`RESET ROLE`)
	}
	br := s.t.conn.SendBatch(ctx, b)
	var out stmtResult
	err := func() error {
		if _, err := br.Exec(); err != nil {
			if isUniqueViolation(err) {
				return errReplay
			}
			return err
		}
		settings := 0
		if read {
			settings += 2
		}
		if p.cfg.Role != "" {
			settings++
		}
		for range settings {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if out, err = p.statement(rows, g, false); err != nil {
			return err
		}
		after := 0
		if read {
			after = 2
		} else if p.cfg.Role != "" {
			after = 1
		}
		for range after {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, errReplay):
		s.aborted = true
		return refused(RefusedReplay, "marque %s was already executed", claims.ID), nil
	case err != nil && isServerError(err):
		s.aborted = true
		p.forgetViews(err)
		return statementRefusal(err)
	case err != nil:
		s.broken = true
		return nil, fmt.Errorf("pilot: execute in transaction: %w", err)
	}
	if !read && out.n > g.MaxRows {
		// The guard stops a write at its cap; a count past it means the
		// statement's effects are in the transaction and must not stay.
		s.broken = true
		r := refused(RefusedMaxRows, MessageMaxRows)
		r.Detail = fmt.Sprintf("it would affect %d rows; max_rows is %d", out.n, g.MaxRows)
		return r, nil
	}
	if !read {
		if _, err := s.t.conn.Exec(ctx, stmtReceiptN, claims.ID, out.n); err != nil {
			if isServerError(err) {
				s.aborted = true
			} else {
				s.broken = true
			}
			return nil, fmt.Errorf("pilot: receipt: %w", err)
		}
	}
	res = &Result{Outcome: Executed, ExecutedSQL: g.SQL, MarqueID: claims.ID, TxID: s.t.id, RowsAffected: out.n}
	if g.Returning || read {
		res.Columns, res.Rows, res.Truncated = out.cols, out.rows, out.truncated
	}
	return res, nil
}

var errReplay = errors.New("pilot: marque replayed")

// SavepointError is the target's answer to a client's SAVEPOINT, RELEASE
// or ROLLBACK TO: its SQLSTATE and message, which concern only the
// client's own savepoints.
type SavepointError struct {
	Code    string
	Message string
}

func (e *SavepointError) Error() string { return e.Message }

// Savepoint runs SAVEPOINT, RELEASE SAVEPOINT or ROLLBACK TO SAVEPOINT
// (verb "savepoint", "release" or "rollback to") of the client's own
// name, which Harbormaster quotes itself. ROLLBACK TO undoes the
// statements run since the savepoint (their receipts with them) and ends
// an aborted state.
func (s *Session) Savepoint(ctx context.Context, verb, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.done:
		return errors.New("pilot: the transaction has ended")
	case s.broken:
		return ErrSessionBroken
	case s.aborted && verb != "rollback to":
		return ErrSessionAborted
	}
	var sql string
	switch verb {
	case "savepoint":
		sql = "SAVEPOINT "
	case "release":
		sql = "RELEASE SAVEPOINT "
	case "rollback to":
		sql = "ROLLBACK TO SAVEPOINT "
	default:
		return fmt.Errorf("pilot: savepoint: unknown verb %q", verb)
	}
	if strings.HasPrefix(strings.ToLower(name), "harbormaster") {
		return &SavepointError{Code: "42939", Message: fmt.Sprintf("savepoint names beginning with harbormaster are reserved: %q", name)}
	}
	_, err := s.t.conn.Exec(ctx, sql+sqlcheck.QuoteIdent(name))
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		if verb == "rollback to" {
			s.aborted = false
		}
		return nil
	case errors.As(err, &pgErr):
		// Any error aborts the transaction, a failed ROLLBACK TO too.
		s.aborted = true
		return &SavepointError{Code: pgErr.Code, Message: pgErr.Message}
	default:
		s.broken = true
		return fmt.Errorf("pilot: savepoint: %w", err)
	}
}

// Commit commits the transaction; an aborted one rolls back instead, and
// says so. An error wrapping ErrCommitUnknown means nobody knows whether
// it committed: the receipts tell.
func (s *Session) Commit(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errors.New("pilot: the transaction has ended")
	}
	s.done = true
	defer s.t.Close()
	if s.aborted || s.broken {
		return ErrRolledBack
	}
	b := &pgx.Batch{}
	if s.p.cfg.Role != "" {
		b.Queue(`RESET ROLE`)
	}
	b.Queue(`COMMIT`)
	var tag pgconn.CommandTag
	var err error
	br := s.t.conn.SendBatch(context.WithoutCancel(ctx), b)
	for i := 0; i < b.Len(); i++ {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return checkCommit(tag, err)
}

// ErrRolledBack is Commit of an aborted transaction: it rolled back.
var ErrRolledBack = errors.New("pilot: commit: the transaction was aborted, so it rolled back")

// IsRolledBack reports whether Commit's error means the transaction rolled
// back (nothing of it committed), as opposed to an unknown outcome.
func IsRolledBack(err error) bool {
	return err != nil && !errors.Is(err, ErrCommitUnknown)
}

// Rollback rolls the transaction back and releases its connection. It is
// safe to call more than once, and after Commit.
func (s *Session) Rollback() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	s.t.Close()
}
