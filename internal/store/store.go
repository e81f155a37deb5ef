package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Memory is the path of a private in-memory database. It lives as long as the
// Store, has no WAL (and so no durability) and a single connection shared by
// DB and ReadDB. It is for tests of other packages, never for a deployment.
const Memory = ":memory:"

// Defaults for Open.
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultReadConns   = 4
	DefaultWriteConns  = 8
)

// Sentinel errors.
var (
	// ErrMigrations is returned (wrapped) when the migration list is invalid
	// or the database's applied migrations do not match it.
	ErrMigrations = errors.New("store: migrations do not match the database")
	// ErrNotDurable is returned (wrapped) when the database refused the
	// durability settings (e.g. WAL is not supported on its file system).
	ErrNotDurable = errors.New("store: durability settings not in effect")
)

// Store is the control store. It is safe for concurrent use.
type Store struct {
	driver    Driver
	path      string // the SQLite path, or the PostgreSQL URL without its password
	w         *sql.DB
	ops       *sql.DB
	r         *sql.DB
	readConns int
	applied   int      // migrations Open applied
	sqlCache  sync.Map // PostgreSQL: query with ? placeholders -> with $n
}

// Driver names the database behind a Store.
type Driver string

// The drivers.
const (
	// SQLite is the embedded store of one node (the default).
	SQLite Driver = "sqlite"
	// Postgres is the shared store of several control-plane nodes.
	Postgres Driver = "postgres"
)

type options struct {
	busyTimeout  time.Duration
	readConns    int
	writeConns   int
	migrations   []Migration
	allowNoFsync bool
}

// Option configures Open.
type Option func(*options)

// WithBusyTimeout sets how long a statement waits for a lock held by another
// connection (another process, or a reader during a checkpoint) before it
// fails with SQLITE_BUSY. Defaults to 5 seconds.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// WithReadConns sets the size of the read pool. Defaults to 4.
func WithReadConns(n int) Option {
	return func(o *options) { o.readConns = n }
}

// WithWriteConns sets how many write connections a PostgreSQL store keeps
// (SQLite always has one writer). Defaults to 8.
func WithWriteConns(n int) Option {
	return func(o *options) { o.writeConns = n }
}

// WithUnsafeNoFsync lets a PostgreSQL store open on a server running with
// fsync=off, which Open otherwise refuses (ErrNotDurable): a committed
// logbook entry would not survive the server's crash. For tests on a
// throwaway server only.
func WithUnsafeNoFsync() Option {
	return func(o *options) { o.allowNoFsync = true }
}

// WithMigrations replaces the driver's migration list (Migrations or
// PostgresMigrations), for tests of the migration machinery.
func WithMigrations(ms []Migration) Option {
	return func(o *options) { o.migrations = ms }
}

// Open opens the control store at location and applies pending migrations.
// A location that starts with postgres:// or postgresql:// is a PostgreSQL
// connection URL (see openPostgres); anything else is the path of a SQLite
// file, created if needed. The caller owns the Store and must Close it.
func Open(ctx context.Context, location string, opts ...Option) (*Store, error) {
	o := options{busyTimeout: DefaultBusyTimeout, readConns: DefaultReadConns, writeConns: DefaultWriteConns}
	for _, opt := range opts {
		opt(&o)
	}
	if IsPostgresURL(location) {
		if o.migrations == nil {
			o.migrations = PostgresMigrations
		}
		return openPostgres(ctx, location, o)
	}
	if o.migrations == nil {
		o.migrations = Migrations
	}
	return openSQLite(ctx, location, o)
}

// IsPostgresURL reports whether location names a PostgreSQL store rather
// than a SQLite file.
func IsPostgresURL(location string) bool {
	l := strings.ToLower(location)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// openSQLite opens (creating if needed) the SQLite control store at path,
// checks that WAL and synchronous=FULL are in effect, and applies pending
// migrations.
func openSQLite(ctx context.Context, path string, o options) (*Store, error) {
	switch {
	case path == "":
		return nil, errors.New("store: open: empty path")
	case strings.ContainsAny(path, "?#"):
		return nil, fmt.Errorf("store: open: path %q must not contain '?' or '#'", path)
	case o.busyTimeout < 0:
		return nil, fmt.Errorf("store: open: busy timeout %v is negative", o.busyTimeout)
	case o.readConns < 1:
		return nil, fmt.Errorf("store: open: read conns %d must be at least 1", o.readConns)
	}
	if err := CheckMigrations(o.migrations); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}

	memory := path == Memory
	w, err := sql.Open(DriverName, dsn(path, o.busyTimeout, !memory, false, "FULL"))
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{driver: SQLite, path: path, w: w, ops: w, r: w, readConns: 1}
	if err := firstConn(ctx, o.busyTimeout, func() error { return s.checkPragmas(ctx, w, !memory) }); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if _, err := s.migrate(ctx, w, o.migrations); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if memory {
		return s, nil
	}

	ops, err := sql.Open(DriverName, dsn(path, o.busyTimeout, true, false, "NORMAL"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open ops writer: %w", err)
	}
	ops.SetMaxOpenConns(1)
	ops.SetMaxIdleConns(1)
	if err := ops.PingContext(ctx); err != nil {
		ops.Close()
		w.Close()
		return nil, fmt.Errorf("store: open ops writer: %w", err)
	}
	s.ops = ops
	r, err := sql.Open(DriverName, dsn(path, o.busyTimeout, false, true, "FULL"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open readers: %w", err)
	}
	r.SetMaxOpenConns(o.readConns)
	r.SetMaxIdleConns(o.readConns)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		ops.Close()
		w.Close()
		return nil, fmt.Errorf("store: open readers: %w", err)
	}
	s.r, s.readConns = r, o.readConns
	return s, nil
}

// firstConn runs the first statement on a new file's writer, whose
// connection switches the file to WAL: SQLite answers that switch with
// SQLITE_BUSY at once, without its busy handler, while another process
// opening the same new file holds a lock (seen with four at once). It is
// tried again until busy has passed.
func firstConn(ctx context.Context, busy time.Duration, run func() error) error {
	deadline := time.Now().Add(busy)
	for {
		err := run()
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || se.Code != sqlite3.ErrBusy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// checkPragmas confirms the settings durability rests on actually took.
func (s *Store) checkPragmas(ctx context.Context, db *sql.DB, wal bool) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if wal && !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("%w: journal_mode is %q, want wal", ErrNotDurable, mode)
	}
	var syncMode, fk int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return err
	}
	if syncMode < 2 { // 2 = FULL, 3 = EXTRA
		return fmt.Errorf("%w: synchronous is %d, want 2 (FULL)", ErrNotDurable, syncMode)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return err
	}
	if fk != 1 {
		return fmt.Errorf("%w: foreign_keys is off", ErrNotDurable)
	}
	return nil
}

// Path is the path the store was opened with.
func (s *Store) Path() string { return s.path }

// LogbookJournal is where the logbook's journal of a SQLite store in a
// file lives (logbook.Config.Journal): beside it, named after it with
// "-logbook". "" for a store in memory or on PostgreSQL.
func (s *Store) LogbookJournal() string {
	if s.driver != SQLite || s.path == "" || s.path == Memory {
		return ""
	}
	return s.path + "-logbook"
}

// DB is the write handle: one connection, transactions begin IMMEDIATE. Use
// it for every statement that writes, and for reads that must see the
// caller's own uncommitted writes inside a transaction. Never hold rows open
// on it while issuing another statement on it (see the package doc).
func (s *Store) DB() *sql.DB { return s.w }

// OpsDB is a second write handle for operational state that the logbook
// can rebuild (the requests table): synchronous=NORMAL, so its commits do
// not wait for fsync. In WAL mode that is still durable across a process
// crash; a power loss may drop its last commits, which start-up
// reconciliation restores from the logbook (written through DB, with
// synchronous=FULL) and the receipts in the targets. The two handles
// serialize on SQLite's write lock.
func (s *Store) OpsDB() *sql.DB { return s.ops }

// ReadDB is the read pool: read-only connections that see the last committed
// state and never block the writer. A write through it fails.
func (s *Store) ReadDB() *sql.DB { return s.r }

// ReadConns is the size of the read pool: how many read transactions can
// run at once (1 for Memory, where they share the write connection).
func (s *Store) ReadConns() int { return s.readConns }

// Tx runs fn in a write transaction and commits it if fn returns nil. If fn
// returns an error or panics, the transaction is rolled back and fn's error is
// returned as is (the panic is re-raised). Errors of the store itself are
// wrapped with a "store:" prefix. Transactions run one at a time.
//
// On PostgreSQL the transaction takes LockTx first (transaction-scoped),
// so Tx keeps that promise across every node on the store: a
// read-modify-write in fn loses no update. Hot paths that need no such
// global order (the logbook's appends take their own lock) use DB.
func (s *Store) Tx(ctx context.Context, fn func(*sql.Tx) error) error {
	if s.driver == Postgres {
		return runTx(ctx, s.w, nil, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", LockTx); err != nil {
				return fmt.Errorf("store: lock: %w", err)
			}
			return fn(tx)
		})
	}
	return runTx(ctx, s.w, nil, fn)
}

// Driver says which database the store is.
func (s *Store) Driver() Driver { return s.driver }

// SQL returns q, written with ? placeholders, in the store's dialect:
// as is for SQLite, with $1, $2, ... for PostgreSQL. Repositories write
// portable statements once and pass them through SQL.
func (s *Store) SQL(q string) string {
	if s.driver != Postgres {
		return q
	}
	if v, ok := s.sqlCache.Load(q); ok {
		return v.(string)
	}
	r := Rebind(q)
	s.sqlCache.Store(q, r)
	return r
}

// ReadTx runs fn in a read-only transaction on the read pool: every query in
// fn sees one consistent snapshot.
func (s *Store) ReadTx(ctx context.Context, fn func(*sql.Tx) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if s.driver == Postgres {
		// READ COMMITTED takes a snapshot per statement; a read
		// transaction promises one for all of them.
		opts.Isolation = sql.LevelRepeatableRead
	}
	return runTx(ctx, s.r, opts, fn)
}

// beginner is *sql.DB or *sql.Conn.
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

func runTx(ctx context.Context, db beginner, opts *sql.TxOptions, fn func(*sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	committed = true
	return nil
}

// SchemaVersion is the highest applied migration version (0 for none).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := s.r.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("store: schema version: %w", err)
	}
	return int(v.Int64), nil
}

// Close closes every handle. Statements in flight fail.
func (s *Store) Close() error {
	var errs []error
	seen := map[*sql.DB]bool{}
	for _, db := range []*sql.DB{s.r, s.ops, s.w} {
		if db == nil || seen[db] {
			continue
		}
		seen[db] = true
		errs = append(errs, db.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// CheckMigrations reports whether ms is a valid migration list: versions 1,
// 2, 3, ... in order, each with a name and SQL. A test runs it over
// Migrations so that two changes appending the same version fail the build.
func CheckMigrations(ms []Migration) error {
	for i, m := range ms {
		if m.Version != i+1 {
			return fmt.Errorf("%w: migration %d (%q) has version %d, want %d", ErrMigrations, i, m.Name, m.Version, i+1)
		}
		if strings.TrimSpace(m.Name) == "" {
			return fmt.Errorf("%w: migration %d has no name", ErrMigrations, m.Version)
		}
		if strings.TrimSpace(m.SQL) == "" {
			return fmt.Errorf("%w: migration %d (%q) has no SQL", ErrMigrations, m.Version, m.Name)
		}
	}
	return nil
}

func checksum(m Migration) string {
	sum := sha256.Sum256([]byte(m.SQL))
	return hex.EncodeToString(sum[:])
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	checksum   TEXT NOT NULL,
	applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
)`

const createMigrationsTablePostgres = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	checksum   TEXT NOT NULL,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// execBeginner is *sql.DB or *sql.Conn.
type execBeginner interface {
	beginner
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// migrate applies the pending migrations, each in its own transaction that
// first re-reads the history, so two processes opening the same store at
// once apply each migration exactly once: on SQLite the transactions begin
// IMMEDIATE (the write lock), on PostgreSQL the caller holds an advisory
// lock on db's connection for the whole run. It returns how many it applied.
func (s *Store) migrate(ctx context.Context, db execBeginner, ms []Migration) (int, error) {
	create := createMigrationsTable
	if s.driver == Postgres {
		create = createMigrationsTablePostgres
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	// Check the history even when nothing is pending.
	if err := runTx(ctx, db, nil, func(tx *sql.Tx) error {
		_, err := appliedVersions(ctx, tx, ms)
		return err
	}); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	applied := 0
	for _, m := range ms {
		err := runTx(ctx, db, nil, func(tx *sql.Tx) error {
			n, err := appliedVersions(ctx, tx, ms)
			if err != nil || n >= m.Version {
				return err
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
			_, err = tx.ExecContext(ctx,
				s.SQL("INSERT INTO schema_migrations (version, name, checksum) VALUES (?, ?, ?)"),
				m.Version, m.Name, checksum(m))
			if err == nil {
				applied++
			}
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migrate: %w", err)
		}
	}
	s.applied = applied
	return applied, nil
}

// Applied is how many migrations Open applied (0 when the schema was
// current already).
func (s *Store) Applied() int { return s.applied }

// appliedVersions checks that the applied migrations are exactly ms[:n] and
// returns n.
func appliedVersions(ctx context.Context, tx *sql.Tx, ms []Migration) (int, error) {
	rows, err := tx.QueryContext(ctx, "SELECT version, checksum FROM schema_migrations ORDER BY version")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var v int
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			return 0, err
		}
		switch {
		case v != n+1:
			return 0, fmt.Errorf("%w: applied version %d follows %d", ErrMigrations, v, n)
		case v > len(ms):
			return 0, fmt.Errorf("%w: database has migration %d, this binary knows %d (newer binary?)", ErrMigrations, v, len(ms))
		case sum != checksum(ms[v-1]):
			return 0, fmt.Errorf("%w: migration %d (%s) was changed after it was applied", ErrMigrations, v, ms[v-1].Name)
		}
		n = v
	}
	return n, rows.Err()
}

// Ping checks that the store answers reads.
func (s *Store) Ping(ctx context.Context) error { return s.r.PingContext(ctx) }
