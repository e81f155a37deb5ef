// Package store is the control store: the one database that holds the
// control plane's state (switches, quotas, the queue, the logbook).
//
// It has two drivers, chosen by Open's location: a path is SQLite
// (embedded, one node, the default); a postgres:// or postgresql:// URL is
// PostgreSQL (several control-plane nodes on one store). Both are reached
// through database/sql, so *sql.Tx is the one transaction type: a logbook
// record's With runs in the transaction that appends it on either driver.
// Domain code holds no SQL: it reaches its tables through the repositories
// here (Requests, Delegations, SurveyorRule, Switches, Audits, ...), whose
// statements are written once in SQL both drivers accept, with ?
// placeholders that Store.SQL rewrites to $n for PostgreSQL, and picked per
// driver where the dialects differ. The logbook keeps its own statements
// (internal/logbook), chosen the same way.
//
// The SQLite driver is, embedded, through github.com/mattn/go-sqlite3
// (the SQLite C library, built with cgo, which the parser needs anyway). It
// replaced the pure-Go modernc.org/sqlite when the logbook's statement-path
// benchmark measured it cheaper in CPU per statement, by a few to 20
// percent (docs/performance.md).
//
// # Durability
//
// Every connection runs with journal_mode=WAL, synchronous=FULL,
// foreign_keys=ON and a busy_timeout. WAL with synchronous=FULL fsyncs the
// write-ahead log on every commit, so a transaction that Commit reported as
// committed survives a crash or power loss. That is what the logbook's
// "durable before the marque leaves" invariant rests on; do not weaken it.
//
// # One writer
//
// SQLite admits one writer at a time. Several writing connections in one
// process would only contend for that lock and surface SQLITE_BUSY, so the
// store holds two handles:
//
//   - DB: the write handle, a pool of exactly one connection. Every write
//     goes through it, and transactions on it begin IMMEDIATE, so the write
//     lock is taken at BEGIN (another process waits under busy_timeout
//     instead of failing mid-transaction). Writers queue in database/sql.
//   - ReadDB: a pool of read-only connections (query_only=ON, ReadConns of
//     them). In WAL mode readers never block the writer and never see
//     uncommitted data.
//
// Because DB has one connection, a goroutine must not hold *sql.Rows (or a
// transaction) open on DB while issuing another statement on DB: the second
// statement waits for the connection the first one holds, forever. Read
// through ReadDB, or finish reading before writing.
//
// # PostgreSQL
//
// The PostgreSQL driver uses pgx through its database/sql adapter
// (github.com/jackc/pgx/v5/stdlib) rather than pgxpool, so that the
// repositories, the logbook and the With/After hooks take the same *sql.Tx
// on both drivers. A Store opens three pools: DB (synchronous_commit=on,
// lock_timeout the busy timeout), OpsDB (synchronous_commit=off: OpsDB's
// contract below) and ReadDB (default_transaction_read_only=on; ReadTx is
// REPEATABLE READ, one snapshot). Open refuses a server with fsync=off
// (ErrNotDurable) unless WithUnsafeNoFsync, for throwaway test servers.
//
// Several nodes write at once, so what SQLite's one writer gave for free is
// taken with advisory locks (keys in postgres.go): LockMigrate (session
// level) around migrations; LockLogbookAppend (transaction level) in every
// logbook append before it reads the chain head, so the chain never forks;
// LockLogbookSettle around the subject-index transactions; LockTx in every
// Store.Tx, so that its transactions still run one at a time. Everything
// else (request claims, audits) is a single conditional statement and
// needs no lock. The store wants a database of its own: advisory lock keys
// are per database.
//
// # Migrations
//
// Each driver has its ordered list, Migrations (SQLite, migrations.go)
// and PostgresMigrations, with the same versions and names; a schema
// change appends to both. Open applies
// every migration not yet applied, each in its own transaction together with
// its row in schema_migrations. An applied migration is recorded with a
// checksum of its SQL; Open refuses a database whose applied migrations are
// not a prefix of the list this binary knows (edited, reordered, or from a
// newer binary), because running on a schema it does not understand is how a
// control plane fails open.
package store
