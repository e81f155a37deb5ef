package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Advisory lock keys (pg_advisory_lock's bigint space is the database's,
// shared with anything else that uses it there: the store wants a database
// of its own). Derived from fixed text so that they are recognizable in
// pg_locks: 0x686d ("hm") then a purpose.
const (
	// LockMigrate is held (session level) by a node applying migrations.
	LockMigrate int64 = 0x686d_0000_0000_0001
	// LockLogbookAppend is held (transaction level) by every logbook
	// transaction that appends entries or checkpoints: it serializes the
	// writers of every node on one chain.
	LockLogbookAppend int64 = 0x686d_0000_0000_0002
	// LockLogbookSettle is held (transaction level) by the logbook's
	// subject-index transactions, so that two nodes' writers index one
	// range one after the other instead of deadlocking on the same rows.
	LockLogbookSettle int64 = 0x686d_0000_0000_0003
	// LockTx is held (transaction level) by Store.Tx on PostgreSQL, so
	// that its transactions run one at a time, as on SQLite.
	LockTx int64 = 0x686d_0000_0000_0004
)

// openPostgres opens the PostgreSQL control store at the connection URL
// rawURL, through pgx's database/sql driver, so that every caller keeps
// one transaction type (*sql.Tx) across drivers: a logbook record's With
// runs in the very transaction that appends it, on either store.
//
// It opens three pools on the same database, each with its own session
// settings: the write pool (synchronous_commit=on: Commit returns once the
// commit is flushed, and, with synchronous replicas, acknowledged by them),
// the operational pool (synchronous_commit=off, OpsDB's contract) and the
// read pool (default_transaction_read_only=on). It refuses a server with
// fsync off unless WithUnsafeNoFsync, and migrates under LockMigrate.
func openPostgres(ctx context.Context, rawURL string, o options) (*Store, error) {
	switch {
	case o.readConns < 1:
		return nil, fmt.Errorf("store: open: read conns %d must be at least 1", o.readConns)
	case o.busyTimeout < 0:
		return nil, fmt.Errorf("store: open: busy timeout %v is negative", o.busyTimeout)
	case o.writeConns < 1:
		return nil, fmt.Errorf("store: open: write conns %d must be at least 1", o.writeConns)
	}
	if err := CheckMigrations(o.migrations); err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	base, err := pgx.ParseConfig(rawURL)
	if err != nil {
		// pgx's message may quote the URL, password and all.
		return nil, errors.New("store: open: the PostgreSQL URL does not parse")
	}
	pool := func(n int, params map[string]string) *sql.DB {
		cfg := base.Copy()
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		if _, ok := cfg.RuntimeParams["application_name"]; !ok {
			cfg.RuntimeParams["application_name"] = "harbormaster"
		}
		for k, v := range params {
			cfg.RuntimeParams[k] = v
		}
		db := stdlib.OpenDB(*cfg)
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxIdleTime(5 * time.Minute)
		return db
	}
	// lock_timeout is the busy timeout's counterpart: how long a statement
	// waits for a lock (the logbook's append lock held by another node,
	// say) before it fails.
	lockTimeout := strconv.FormatInt(o.busyTimeout.Milliseconds(), 10)
	w := pool(o.writeConns, map[string]string{"synchronous_commit": "on", "default_transaction_read_only": "off", "lock_timeout": lockTimeout})
	s := &Store{driver: Postgres, path: redactURL(rawURL), w: w, ops: w, r: w, readConns: o.readConns}
	fail := func(err error) (*Store, error) {
		_ = s.Close()
		return nil, fmt.Errorf("store: open: %w", err)
	}
	if err := s.checkPostgres(ctx, o.allowNoFsync); err != nil {
		return fail(err)
	}
	if err := s.migratePostgres(ctx, o.migrations); err != nil {
		return fail(err)
	}
	s.ops = pool(max(o.writeConns/2, 1), map[string]string{"synchronous_commit": "off", "default_transaction_read_only": "off", "lock_timeout": lockTimeout})
	s.r = pool(o.readConns, map[string]string{"default_transaction_read_only": "on"})
	for _, db := range []*sql.DB{s.ops, s.r} {
		if err := db.PingContext(ctx); err != nil {
			return fail(err)
		}
	}
	return s, nil
}

// checkPostgres confirms what durability rests on: the session's
// synchronous_commit is on (or stricter) and the server fsyncs.
func (s *Store) checkPostgres(ctx context.Context, allowNoFsync bool) error {
	var syncCommit, fsync string
	if err := s.w.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit'), current_setting('fsync')").Scan(&syncCommit, &fsync); err != nil {
		return err
	}
	switch syncCommit {
	case "on", "remote_apply", "remote_write":
	default:
		return fmt.Errorf("%w: synchronous_commit is %q, want on", ErrNotDurable, syncCommit)
	}
	if fsync != "on" && !allowNoFsync {
		return fmt.Errorf("%w: the server runs with fsync=%s", ErrNotDurable, fsync)
	}
	return nil
}

// migratePostgres applies pending migrations holding LockMigrate on one
// connection, so that nodes starting at once take turns: the first applies
// them, the others then find nothing pending (and check the history).
func (s *Store) migratePostgres(ctx context.Context, ms []Migration) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", LockMigrate); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	_, merr := s.migrate(ctx, conn, ms)
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", LockMigrate); err != nil {
		// A connection that may still hold the lock must not go back to
		// the pool.
		_ = conn.Raw(func(any) error { return errBadConn })
		return errors.Join(merr, fmt.Errorf("migrate: unlock: %w", err))
	}
	return merr
}

var errBadConn = errors.New("store: connection dropped")

// redactURL is rawURL without its password, for Path and messages.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "postgres://(unparsable)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Rebind rewrites a statement written with ? placeholders into
// PostgreSQL's $1, $2, ... It leaves ? inside quoted strings, quoted
// identifiers and comments alone, and ?| ?& (jsonb operators) are not used
// by the store's statements.
func Rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) && q[j] != c {
				j++
			}
			b.WriteString(q[i:min(j+1, len(q))])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			b.WriteString(q[i : i+j])
			i += j - 1
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
