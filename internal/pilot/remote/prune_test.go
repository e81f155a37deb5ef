package remote_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPruneReceipts: the Pilot, in process and through its server,
// deletes the receipts executed before the time it is given, and never
// one younger than pilot.ReceiptFloor, whatever time it is given (a
// control plane cannot make a marque usable twice).
func TestPruneReceipts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	ages := map[string]time.Duration{"mq_old1": 100 * 24 * time.Hour, "mq_old2": 40 * 24 * time.Hour,
		"mq_hour": time.Hour, "mq_now": 0}
	for id, age := range ages {
		if _, err := conn.Exec(ctx, `INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path, executed_at)
			VALUES ($1, $1, 'agent', 'shop', '', 'compiled', now() - $2::interval)`, id, fmt.Sprintf("%d seconds", int(age.Seconds()))); err != nil {
			t.Fatal(err)
		}
	}
	// Another target's receipt in the same database is not this Pilot's.
	if _, err := conn.Exec(ctx, `INSERT INTO harbormaster.receipts (marque_id, request_id, principal, target, statement_sha256, path, executed_at)
		VALUES ('mq_other', 'mq_other', 'agent', 'other', '', 'compiled', now() - interval '100 days')`); err != nil {
		t.Fatal(err)
	}
	left := func() map[string]bool {
		rows, err := conn.Query(ctx, "SELECT marque_id FROM harbormaster.receipts")
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, id := range ids {
			out[id] = true
		}
		return out
	}
	now := time.Now()
	for _, step := range []struct {
		who    string
		prune  func(context.Context, time.Time) (int64, error)
		before time.Time
		n      int64
		gone   []string
	}{
		{"remote", f.client.PruneReceipts, now.Add(-60 * 24 * time.Hour), 1, []string{"mq_old1"}},
		{"in process", f.pilot.PruneReceipts, now.Add(time.Hour), 1, []string{"mq_old1", "mq_old2"}},
		{"remote, asked for everything", f.client.PruneReceipts, now.Add(24 * time.Hour), 0, []string{"mq_old1", "mq_old2"}},
	} {
		n, err := step.prune(ctx, step.before)
		if err != nil || n != step.n {
			t.Fatalf("%s: pruned %d, %v; want %d", step.who, n, err, step.n)
		}
		got := left()
		if !got["mq_other"] {
			t.Fatalf("%s: pruned another target's receipt", step.who)
		}
		for id := range ages {
			gone := !got[id]
			want := false
			for _, g := range step.gone {
				want = want || g == id
			}
			if gone != want {
				t.Fatalf("%s: %s gone %v, want %v", step.who, id, gone, want)
			}
		}
	}
}
