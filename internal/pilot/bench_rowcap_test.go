package pilot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// BenchmarkRowCap measures what the row cap (rowcap.go) costs PostgreSQL
// and the connection: the same UPDATE of one row by primary key and of
// 200 rows, a new literal every time, without and with the cap's
// RETURNING column, alternating. It reports both forms' time per
// statement and the difference per row written (ns/op is the two
// together).
//
//	go test -run '^$' -bench RowCap -benchtime 2000x ./internal/pilot/
func BenchmarkRowCap(b *testing.B) {
	ctx := context.Background()
	conn := benchTarget(b)
	defer conn.Close(ctx)
	for _, n := range []int{1, 200} {
		where := func(i int) string { return fmt.Sprintf("id = %d", 1+i%240) }
		if n > 1 {
			where = func(i int) string { return fmt.Sprintf("id <= %d AND total_cents <> %d", n, -1-i) }
		}
		// The two forms alternate, so both meet the same machine.
		b.Run(fmt.Sprintf("update-%d", n), func(b *testing.B) {
			var spent [2]time.Duration
			for i := 0; i < b.N; i++ {
				for form, returning := range []string{"", " RETURNING " + pilot.CapReturning(int64(n))} {
					sql := "UPDATE orders SET updated_at = now() WHERE " + where(i) + returning
					t0 := time.Now()
					tag, err := conn.Exec(ctx, sql, pgx.QueryExecModeExec)
					spent[form] += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					if tag.RowsAffected() != int64(n) {
						b.Fatalf("%s: %d rows", sql, tag.RowsAffected())
					}
				}
			}
			plain, capped := float64(spent[0].Nanoseconds())/float64(b.N), float64(spent[1].Nanoseconds())/float64(b.N)
			b.ReportMetric(plain, "plain-ns/stmt")
			b.ReportMetric(capped, "capped-ns/stmt")
			b.ReportMetric((capped-plain)/float64(n), "cap-ns/row")
		})
	}
}
