// Package store is the control store: the one database that holds the
// control plane's state (switches, quotas, the queue, the logbook).
//
// The default store is SQLite, embedded, through github.com/mattn/go-sqlite3
// (the SQLite C library, built with cgo, which the parser needs anyway). It
// replaced the pure-Go modernc.org/sqlite when the logbook's statement-path
// benchmark measured it cheaper in CPU per statement, by a few to 20
// percent (docs/performance.md). A later change adds PostgreSQL for several nodes; the
// schema is kept to portable SQL where that costs nothing, but the
// migrations in this package are written for SQLite.
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
// # Migrations
//
// The schema is the ordered list Migrations in migrations.go. Open applies
// every migration not yet applied, each in its own transaction together with
// its row in schema_migrations. An applied migration is recorded with a
// checksum of its SQL; Open refuses a database whose applied migrations are
// not a prefix of the list this binary knows (edited, reordered, or from a
// newer binary), because running on a schema it does not understand is how a
// control plane fails open.
package store
