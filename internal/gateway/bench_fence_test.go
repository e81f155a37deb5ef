package gateway_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// benchFenced is a Tier A delegation whose reads and writes both go
// through a fence: the demo's EU customers.
const benchFenced = `sentence: Read and rename EU customers.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
    max_rows: 200
  - op: update
    table: public.customers
    columns: [name]
    fence: region = 'EU'
    max_rows: 1
`

// BenchmarkFencedReadWrite measures a fenced read and a fenced write
// (single-row, by primary key, a new literal in every statement) through
// POST /v1/statements and directly with pgx, in one run: the cost of the
// fence (a security-barrier view since issue 9) on the governed path.
//
//	go test -run '^$' -bench FencedReadWrite -benchtime 2000x ./internal/gateway/
func BenchmarkFencedReadWrite(b *testing.B) {
	srv, pool, client := benchSystem(b, benchFenced, 16)
	governed := func(sql string) error { return postStatement(client, srv.URL, sql) }
	direct := func(sql string) error {
		rows, err := pool.Query(context.Background(), sql, pgx.QueryExecModeExec)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	read := func(i int) string { return fmt.Sprintf("SELECT id, name FROM customers WHERE id = %d", 1+i%20) }
	// The direct write names the fence itself, as a careful hand would.
	write := func(i int) string {
		return fmt.Sprintf("UPDATE customers SET name = 'Name %d' WHERE id = %d", i, 1+i%20)
	}
	directWrite := func(i int) string {
		return fmt.Sprintf("UPDATE customers SET name = 'Name %d' WHERE id = %d AND region = 'EU'", i, 1+i%20)
	}
	for _, c := range []struct {
		name string
		run  func(string) error
		sql  func(int) string
	}{
		{"read/direct", direct, read},
		{"read/governed", governed, read},
		{"write/direct", direct, directWrite},
		{"write/governed", governed, write},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := c.run(c.sql(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
