package bench

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// The demo's orders 51 to 240 are shipped or failed and at least ten days
// old (examples/shop_data.sql): inside Delegation's fence, outside the
// demo tour's rows.
const (
	DefaultFirstID = 51
	DefaultLastID  = 240
)

// StatementForm is the workload, literals named.
const StatementForm = "UPDATE orders SET updated_at = now() WHERE id = <row> AND total_cents <> <new literal>"

// Workload hands out the benchmark's statements: each a new text, each
// client on rows of its own.
type Workload struct {
	first, last int64
	clients     int
	base        int64 // this run's literals are base+1, base+2, ...
	seq         atomic.Int64
}

// NewWorkload splits the rows first..last between clients (row id goes to
// client (id-first) mod clients). It needs at least one row per client.
func NewWorkload(first, last int64, clients int) (*Workload, error) {
	switch {
	case clients < 1:
		return nil, fmt.Errorf("bench: workload: %d clients, want at least 1", clients)
	case first < 1 || last < first:
		return nil, fmt.Errorf("bench: workload: rows %d-%d, want 1 <= first <= last", first, last)
	case last-first+1 < int64(clients):
		return nil, fmt.Errorf("bench: workload: %d rows for %d clients, want a row per client at least", last-first+1, clients)
	}
	// A random base per run, so that a later run against the same node
	// repeats no text the node has seen: at least 10^12 (above any order's
	// total), below 9.1*10^18 (room for the run's literals under the bigint
	// limit).
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	base := 1_000_000_000_000 + int64(binary.LittleEndian.Uint64(b[:])%9_100_000_000_000_000_000)
	return &Workload{first: first, last: last, clients: clients, base: base}, nil
}

// Rows is how many rows client c owns.
func (w *Workload) Rows(c int) int {
	n := w.last - w.first + 1
	return int((n - int64(c) + int64(w.clients) - 1) / int64(w.clients))
}

// Row is client c's i-th row, cycling over the rows it owns.
func (w *Workload) Row(c, i int) int64 {
	return w.first + int64(c) + int64(w.clients)*int64(i%w.Rows(c))
}

// AnyRow is the i-th of all the rows, cycling: the one-client phase's.
func (w *Workload) AnyRow(i int) int64 {
	return w.first + int64(i)%(w.last-w.first+1)
}

// Statement is a new text updating row id: no two calls on a Workload
// return the same text.
func (w *Workload) Statement(id int64) string {
	return fmt.Sprintf("UPDATE orders SET updated_at = now() WHERE id = %d AND total_cents <> %d", id, w.base+w.seq.Add(1))
}

// ReadForm is the read workload, literals named: a single-row read by
// key, inside the delegation's read rule.
const ReadForm = "SELECT id, total_cents FROM orders WHERE id = <row> AND total_cents <> <new literal>"

// Read is a new text reading row id: no two calls on a Workload return
// the same text (nor the text of a Statement).
func (w *Workload) Read(id int64) string {
	return fmt.Sprintf("SELECT id, total_cents FROM orders WHERE id = %d AND total_cents <> %d", id, w.base+w.seq.Add(1))
}

// Delegation is the benchmark's delegation for grantee on target, in the
// shape of the demo's update rule (a fence, a check, a row cap) over the
// rows Workload uses by default. The sentence names run (any short text,
// which makes the delegation's id new) so a run's delegation, revoked at
// its end, does not stand in the way of the next run's.
func Delegation(grantee, target string, expires time.Time, run string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by harbormaster bench for one run; revoked when it ends.
sentence: Touch the update time of shipped and failed orders (benchmark run %s).
grantee: %s
target: %s
expires: %s
allow:
  - op: select
    table: public.orders
    columns: [id, total_cents]
    max_rows: 500
  - op: update
    table: public.orders
    columns: [updated_at]
    fence: status in ('shipped', 'failed') and created_at < now() - interval '1 day'
    check: status in ('shipped', 'failed')
    max_rows: 1
`, run, grantee, target, expires.UTC().Format(time.RFC3339))
	return []byte(b.String())
}
