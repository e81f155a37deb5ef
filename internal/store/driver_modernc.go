//go:build sqlite_modernc

package store

import (
	"net/url"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DriverName is the database/sql driver the store opens its file with,
// for tests and tools that open the file directly.
const DriverName = "sqlite"

// dsn builds a modernc.org/sqlite data source name. The pragmas run on every
// new connection of the pool.
func dsn(path string, busy time.Duration, wal, readOnly bool, sync string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+sync+")")
	if wal {
		q.Add("_pragma", "journal_mode(WAL)")
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}
