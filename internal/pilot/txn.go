package pilot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgtype"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Txn is a target transaction the Pilot has opened with its settings
// pinned (DESIGN.md section 6 step 2), for one statement on the literal
// path, a rehearsal or an approved statement. It never leaves the Pilot:
// a caller in another process could not hold it, so crash reconciliation
// rests on the marque's receipt (VoidReceipt), not on a transaction id the
// caller recorded. A Txn holds a pooled connection; it runs at most one
// statement, and Close rolls back and releases one that was not used.
type Txn struct {
	conn *pgxpool.Conn
	id   string

	mu     sync.Mutex
	taken  bool
	closed bool
}

// ID is the transaction id (pg_current_xact_id), or "" for a transaction
// opened without one (rehearsals, previews).
func (t *Txn) ID() string { return t.id }

// begin opens a READ COMMITTED transaction with the pinned settings in one
// round trip, assigning it a transaction id when withID.
func (p *Pilot) begin(ctx context.Context, withID bool) (*Txn, error) {
	return p.beginAt(ctx, withID, false)
}

// beginAt is begin, at REPEATABLE READ when repeatable: the surveyed path
// compares the rows a write reaches with its rehearsal and then runs it,
// and both must see one snapshot, so that a row another transaction
// changes in between fails the write (a serialization failure) instead of
// being written from a value the panel was never shown.
func (p *Pilot) beginAt(ctx context.Context, withID, repeatable bool) (*Txn, error) {
	if repeatable {
		return p.beginWith(ctx, withID, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	}
	return p.beginWith(ctx, withID, `BEGIN ISOLATION LEVEL READ COMMITTED`)
}

// beginWith is begin with its BEGIN statement (one of the Pilot's own).
func (p *Pilot) beginWith(ctx context.Context, withID bool, begin string) (*Txn, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pilot: begin: %w: %w", ErrUnreachable, err)
	}
	t := &Txn{conn: conn}
	sel, args := p.pinSQL(withID)
	b := &pgx.Batch{}
	b.Queue(begin)
	b.Queue(sel, args...)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		dst := make([]any, pinColumns)
		if withID {
			dst = append(dst, &t.id)
		}
		err = br.QueryRow().Scan(dst...)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("pilot: begin: %w", err)
	}
	return t, nil
}

// The Pilot's own fixed statements are prepared once on every connection
// (named, through the extended protocol) so the target does not parse and
// plan them for every marque. The agent's statement never is: each one runs
// as an unnamed statement.
const (
	stmtPin      = "harbormaster_pin"
	stmtPinID    = "harbormaster_pin_id"
	stmtPinRead  = "harbormaster_pin_read"
	stmtReceipt  = "harbormaster_receipt"
	stmtReceiptN = "harbormaster_receipt_rows"
	stmtVoid     = "harbormaster_void"
	stmtSession  = "harbormaster_session"
	stmtGuards   = "harbormaster_guards"
)

// pinSelect sets the pinned settings ($1 search path, $2 statement and $3
// lock timeouts): for the transaction (set_config(..., true) is SET LOCAL),
// or for the session. Those that decide what a value's text is (TimeZone,
// DateStyle, IntervalStyle, bytea_output, extra_float_digits) are the
// ones the wire front announces, whatever the target's or the role's
// defaults: a fence or a statement that converts a time to text or a date
// means the same on every target, and over the wire the same as the
// client was told.
func pinSelect(local bool) string {
	return fmt.Sprintf(`SELECT set_config('search_path', $1, %[1]t), set_config('statement_timeout', $2, %[1]t),
		set_config('lock_timeout', $3, %[1]t), set_config('standard_conforming_strings', 'on', %[1]t),
		set_config('TimeZone', 'UTC', %[1]t), set_config('DateStyle', 'ISO, MDY', %[1]t),
		set_config('IntervalStyle', 'postgres', %[1]t), set_config('bytea_output', 'hex', %[1]t),
		set_config('extra_float_digits', '1', %[1]t)`, local)
}

// pinColumns is how many columns pinSelect returns.
const pinColumns = 9

var pinSelectBody = pinSelect(true)

var fixedStatements = []struct{ name, sql string }{
	{stmtPin, pinSelectBody},
	{stmtPinID, pinSelectBody + `, pg_current_xact_id()::text`},
	// A read on the one-round-trip path: its receipt (if it writes one) is
	// written first, then the transaction turns read-only for the agent's
	// statement. The other settings are the session's pinned ones
	// (stmtSession), as for a folded write: setting them again for every
	// read cost the target a search path's invalidation, a time zone's
	// and a date style's parsing, and a nine-column row.
	{stmtPinRead, `SELECT set_config('transaction_read_only', 'on', true)`},
	{stmtReceipt, `INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path)
		VALUES ($1, $2, $3, $4, $5, $6)`},
	{stmtReceiptN, `UPDATE harbormaster.receipts SET rows_affected = $2 WHERE marque_id = $1`},
	// Reconciliation burns a marque that never committed (VoidReceipt).
	{stmtVoid, `INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path, void)
		VALUES ($1, $2, $3, $4, '', 'void', true)`},
	// The same settings for the session, so a template is prepared (and
	// its names resolved) under them, and an implicit transaction is READ
	// COMMITTED whatever the server's default.
	{stmtSession, pinSelect(false) + `, set_config('default_transaction_isolation', 'read committed', false)`},
	// Never run: preparing it finds the guard functions guarded statements
	// call, so a target initialized by an older release fails here.
	{stmtGuards, `SELECT harbormaster.row_cap(0, harbormaster.row_cap_start()), harbormaster.row_cap_exceeded(0),
		harbormaster.max_rows(0, 0), harbormaster.fence_violation('') WHERE false`},
}

// afterConnect prepares the fixed statements on a new connection and pins
// the session's settings. A target without Harbormaster's schema (or with
// that of an older release) fails here, before any marque.
func afterConnect(pins []any) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		registerJSON(conn.TypeMap())
		for _, s := range fixedStatements {
			if _, err := conn.Prepare(ctx, s.name, s.sql); err != nil {
				return fmt.Errorf("pilot: prepare %s (has `harbormaster target init` run on this target, with this release?): %w", s.name, err)
			}
		}
		if _, err := conn.Exec(ctx, stmtSession, pins...); err != nil {
			return fmt.Errorf("pilot: session settings: %w", err)
		}
		return nil
	}
}

// registerJSON makes json and jsonb (and their arrays) decode with their
// numbers as json.Number, never through float64: a number past float64
// (1e400, 12345678901234567890) keeps its digits, and never fails the
// answer of a statement that has run.
func registerJSON(m *pgtype.Map) {
	unmarshal := func(data []byte, v any) error {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		return d.Decode(v)
	}
	j := &pgtype.Type{Name: "json", OID: pgtype.JSONOID, Codec: &pgtype.JSONCodec{Marshal: json.Marshal, Unmarshal: unmarshal}}
	jb := &pgtype.Type{Name: "jsonb", OID: pgtype.JSONBOID, Codec: &pgtype.JSONBCodec{Marshal: json.Marshal, Unmarshal: unmarshal}}
	m.RegisterType(j)
	m.RegisterType(jb)
	m.RegisterType(&pgtype.Type{Name: "_json", OID: pgtype.JSONArrayOID, Codec: &pgtype.ArrayCodec{ElementType: j}})
	m.RegisterType(&pgtype.Type{Name: "_jsonb", OID: pgtype.JSONBArrayOID, Codec: &pgtype.ArrayCodec{ElementType: jb}})
}

// pinSQL names the prepared select of the pinned settings (set_config(...,
// true) is SET LOCAL), with its arguments.
func (p *Pilot) pinSQL(withID bool) (string, []any) {
	if withID {
		return stmtPinID, p.pins
	}
	return stmtPin, p.pins
}

// pinArgs are pinSQL's arguments for cfg, computed once.
func pinArgs(cfg Config) []any {
	path := make([]string, len(cfg.SearchPath))
	for i, s := range cfg.SearchPath {
		path[i] = sqlcheck.QuoteIdent(s)
	}
	return []any{strings.Join(path, ", "), fmt.Sprintf("%dms", cfg.StatementTimeout.Milliseconds()),
		fmt.Sprintf("%dms", cfg.LockTimeout.Milliseconds())}
}

// take claims the transaction for its one statement.
func (t *Txn) take() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.taken || t.closed {
		return false
	}
	t.taken = true
	return true
}

// Close rolls back whatever has not committed and releases the connection.
// It is safe to call more than once. A connection whose state is unknown
// (busy, broken, or still in a transaction after the rollback) is
// discarded by the pool, never reused.
func (t *Txn) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	pc := t.conn.Conn().PgConn()
	if !pc.IsClosed() && !pc.IsBusy() && pc.TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = t.conn.Exec(ctx, `ROLLBACK`)
		cancel()
	}
	t.conn.Release()
}

// ErrUnreachable wraps a failure to reach the target (or a remote Pilot)
// before anything was sent: nothing ran.
var ErrUnreachable = errors.New("the target could not be reached")

// ErrCommitUnknown wraps a failure of COMMIT itself: the transaction may
// or may not have committed. Only the receipt in the target can tell (the
// gateway leaves such a request for reconciliation).
var ErrCommitUnknown = errors.New("the outcome of COMMIT is unknown")

// fatal reports an error that ended the session (whatever lc_messages is).
func fatal(e *pgconn.PgError) bool {
	sev := e.SeverityUnlocalized
	if sev == "" {
		sev = e.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}

// checkCommit interprets the result of COMMIT.
func checkCommit(tag pgconn.CommandTag, err error) error {
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && !fatal(pgErr) {
			// The server refused COMMIT (a deferred constraint, say): it
			// did not commit. A FATAL (the backend was terminated) can
			// come after the commit record is written, so it proves
			// nothing.
			return fmt.Errorf("pilot: commit: %w", err)
		}
		return fmt.Errorf("pilot: commit: %w: %w", ErrCommitUnknown, err)
	}
	if tag.String() != "COMMIT" {
		// COMMIT of a failed transaction answers ROLLBACK.
		return fmt.Errorf("pilot: commit: the transaction rolled back (%s)", tag.String())
	}
	return nil
}
