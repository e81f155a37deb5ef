package cover

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestEvaluatorMatchesPostgres is a differential test: every expression
// is evaluated by PostgreSQL itself and by the gates' evaluator on rows
// read back with SampleRows (NULLs included), and the verdicts must be
// the same, so the gates judge fences and checks as the Pilot's guards
// will.
func TestEvaluatorMatchesPostgres(t *testing.T) {
	t.Parallel()
	srv, err := pgtmp.Start(t.Context(), pgtmp.Config{StartTimeout: 3 * time.Minute})
	if errors.Is(err, pgtmp.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("pgtmp: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	dsn, err := srv.CreateDatabase(context.Background(), "eval")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, draftSchema+`
INSERT INTO public.orders VALUES
  (1, 10, 'pending', 1500, now() - interval '2 days', now()),
  (2, 11, 'failed', 0, now() - interval '1 hour', now()),
  (3, 12, 'Pending', 250000, now() - interval '40 days', now() - interval '3 days'),
  (4, 13, 'retrying', -5, now() + interval '1 hour', now());
INSERT INTO public.refunds VALUES
  (1, 1, 100, 'requested', true, 'duplicate charge'),
  (2, 2, 0, 'closed', false, NULL),
  (3, 3, 999, 'requested', false, '');`); err != nil {
		t.Fatal(err)
	}
	cat, err := pilot.LoadCatalog(ctx, conn, []string{"public"})
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := conn.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"orders": {
			"status = 'pending'", "status = 'pending' and created_at < now() - interval '1 day'",
			"status in ('failed', 'retrying')", "status not in ('failed', 'retrying')", "total_cents between 0 and 2000",
			"total_cents not between 0 and 2000", "id = '3'", "total_cents / 100 >= 15", "total_cents % 7 = 3",
			"status like 'pend%'", "status ilike 'pend%'", "status not like '%ing'", "upper(status) = 'PENDING'",
			"lower(status) = 'pending' or total_cents < 0", "length(status) > 6", "abs(total_cents) = 5",
			"created_at > current_timestamp", "updated_at < now() - interval '2 days 4 hours'",
			"-total_cents < 0", "coalesce(nullif(status, 'failed'), 'x') = 'x'", "status is distinct from 'failed'",
			"(total_cents > 0) is true", "(total_cents > 0) is not false", "created_at < '2020-01-01T00:00:00Z'",
			"customer_id * 2 + 1 = 21", "status || '!' = 'failed!'", "created_at::date <= current_date",
		},
		"refunds": {
			"customer_consent_logged", "not customer_consent_logged", "customer_consent_logged = true",
			"reason is null", "reason is not null", "reason <> ''", "reason = 'duplicate charge'",
			"coalesce(reason, '') = ''", "reason like '%charge'", "(reason <> '') is not true",
			"reason in ('a', null)", "reason not in ('a', null)", "amount_cents between 1 and 999 and reason is not null",
			"not (reason = 'x') or amount_cents = 0",
		},
	}
	for table, exprs := range cases {
		tb, _ := cat.Resolve("public", table)
		rows, err := SampleRows(ctx, conn, tb, 0)
		if err != nil || len(rows) == 0 {
			t.Fatalf("%s: %d rows, %v", table, len(rows), err)
		}
		ev := (&Env{Catalog: cat, Now: now}).evaluator(tb)
		for _, expr := range exprs {
			x, reasons := sqlcheck.CompileExpr(expr, tb, cat)
			if len(reasons) > 0 {
				t.Errorf("%s: %v", expr, reasons)
				continue
			}
			pgRows, err := conn.Query(ctx, "SELECT id, ("+expr+") FROM public."+table)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			want := map[int64]*bool{}
			for pgRows.Next() {
				var id int64
				var v *bool
				if err := pgRows.Scan(&id, &v); err != nil {
					t.Fatal(err)
				}
				want[id] = v
			}
			pgRows.Close()
			for _, r := range rows {
				got, err := ev.Truth(x.Node, r)
				if err != nil {
					t.Errorf("%s on row %v: %v", expr, r["id"], err)
					continue
				}
				w := want[r["id"].(int64)]
				switch {
				case w == nil && got != nil, w != nil && got != *w:
					t.Errorf("%s on row %v: evaluator %v, PostgreSQL %v", expr, r["id"], got, ptrString(w))
				}
			}
		}
	}
}

func ptrString(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
