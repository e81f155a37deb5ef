package pilot_test

import (
	"context"
	"fmt"
	"testing"
)

// evidence is what a referred statement costs the target when a human
// looks at it: the preview since issue 22 (a read-only SELECT). The same
// benchmark ran against the rehearsal it replaced (the statement itself
// in a transaction that rolled back) by swapping this one call; the
// figures are in docs/performance.md.
func evidence(ctx context.Context, f *fixture, sql string) error {
	_, _, err := f.pilot.Preview(ctx, sql)
	return err
}

// BenchmarkPreview measures the evidence for one referred statement, a new
// literal every time, for the statement kinds a queue holds: a single-row
// UPDATE and DELETE by key, a single-row INSERT, and an UPDATE reaching
// 240 rows.
//
//	go test -run '^$' -bench Preview -benchtime 2000x ./internal/pilot/
func BenchmarkPreview(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		sql  func(i int) string
	}{
		{"update-1-row", func(i int) string {
			return fmt.Sprintf("UPDATE customers SET name = 'Name %d' WHERE id = %d", i, 1+i%20)
		}},
		{"delete-1-row", func(i int) string {
			return fmt.Sprintf("DELETE FROM orders WHERE id = %d AND total_cents <> %d", 1+i%240, -i)
		}},
		{"insert-1-row", func(i int) string {
			return fmt.Sprintf("INSERT INTO orders (id, customer_id, status, total_cents, created_at) VALUES (%d, %d, 'pending', %d, now())", 100000+i, 1+i%20, i)
		}},
		{"update-240-rows", func(i int) string {
			return fmt.Sprintf("UPDATE orders SET total_cents = total_cents + %d", i)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := evidence(ctx, f, c.sql(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
