package store

import (
	"database/sql"
	"net/url"
	"strconv"
	"time"

	"github.com/mattn/go-sqlite3"
)

// DriverName is the database/sql driver the store opens its file with,
// for tests and tools that open the file directly: SQLite (the
// github.com/mattn/go-sqlite3 driver) with temporary storage in memory.
const DriverName = "harbormaster_sqlite3"

func init() {
	sql.Register(DriverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// Statement journals and sorts in memory: on a file, a multi-row
		// insert in a transaction wrote its statement journal to a
		// deleted temporary file, page by page, a write syscall each
		// (issue 25).
		_, err := c.Exec("PRAGMA temp_store=MEMORY", nil)
		return err
	}})
}

// dsn builds a github.com/mattn/go-sqlite3 data source name. The driver
// runs the pragmas on every new connection of the pool, and the write
// handles begin IMMEDIATE: they take the write lock at BEGIN, so a
// transaction never fails halfway upgrading a read lock while another
// process writes.
func dsn(path string, busy time.Duration, wal, readOnly bool, sync string) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", sync)
	if wal {
		q.Set("_journal_mode", "WAL")
	}
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}
