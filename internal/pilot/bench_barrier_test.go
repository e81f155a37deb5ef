package pilot_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// benchTarget is a connection to a fresh database holding the shop
// example with its data and the Pilot's target init.
func benchTarget(b *testing.B) *pgx.Conn {
	ctx := context.Background()
	dsn := pgtmptest.NewDatabase(b, shared.Server(b))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"shop.sql", "shop_data.sql"} {
		sql, _ := examples.FS.ReadFile(f)
		if _, err := conn.Exec(ctx, string(sql), pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, pilot.InitSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		b.Fatal(err)
	}
	return conn
}

// BenchmarkFenceForms measures what PostgreSQL spends on a fenced
// single-row read and write by primary key, a new literal every time (so
// every statement is parsed and planned), in three forms side by side: the
// statement with the fence written into its WHERE by hand (the direct
// alternative), the plain subquery the Pilot used before issue 9 (no
// barrier), and the security-barrier view it uses now.
//
//	go test -run '^$' -bench FenceForms -benchtime 5000x ./internal/pilot/
func BenchmarkFenceForms(b *testing.B) {
	ctx := context.Background()
	conn := benchTarget(b)
	defer conn.Close(ctx)
	const view = "harbormaster.bench_fence"
	if _, err := conn.Exec(ctx, "CREATE VIEW "+view+" WITH (security_barrier = true, security_invoker = true) AS SELECT * FROM public.customers WHERE region = 'EU'"); err != nil {
		b.Fatal(err)
	}
	forms := []struct {
		name string
		sql  func(i int) string
	}{
		{"read/direct", func(i int) string {
			return fmt.Sprintf("SELECT id, name FROM customers WHERE id = %d AND region = 'EU' LIMIT 201", 1+i%20)
		}},
		{"read/subquery", func(i int) string {
			return fmt.Sprintf("SELECT id, name FROM (SELECT * FROM public.customers WHERE region = 'EU') customers WHERE id = %d LIMIT 201", 1+i%20)
		}},
		{"read/barrier-view", func(i int) string {
			return fmt.Sprintf("SELECT id, name FROM %s customers WHERE id = %d LIMIT 201", view, 1+i%20)
		}},
		{"write/direct", func(i int) string {
			return fmt.Sprintf("UPDATE customers SET name = 'Name %d' WHERE id = %d AND region = 'EU'", i, 1+i%20)
		}},
		{"write/where-fence", func(i int) string {
			return fmt.Sprintf("UPDATE customers SET name = 'Name %d' WHERE id = %d AND customers.region = 'EU'", i, 1+i%20)
		}},
		{"write/barrier-view", func(i int) string {
			return fmt.Sprintf("UPDATE %s customers SET name = 'Name %d' WHERE id = %d", view, i, 1+i%20)
		}},
	}
	for _, f := range forms {
		b.Run(f.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rows, err := conn.Query(ctx, f.sql(i), pgx.QueryExecModeExec)
				if err != nil {
					b.Fatal(err)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
