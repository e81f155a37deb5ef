package gateway_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/ledger"
)

// TestRetentionService: the node's retention service removes, once they
// are older than the retention, the logbook entries and the rows of the
// requests the statement path settled; the log still verifies (the prune
// is an entry of its own, at a signed checkpoint), an agent reads its old
// requests as gone, and the path goes on.
func TestRetentionService(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	const retain = 90 * 24 * time.Hour
	f := newFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		o.Gateway.Services.Retention = ledger.Retention{Retain: retain}
	})
	ctx := t.Context()
	gw, lb := f.sys.Gateway, f.sys.Logbook
	var ids []string
	for _, sql := range []string{
		"SELECT id, status FROM orders WHERE id < 10 ORDER BY id",
		"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3",
		"SELEC id FROM orders",
	} {
		resp, err := gw.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
		var sqlErr *gateway.SQLError
		switch {
		case errors.As(err, &sqlErr):
			ids = append(ids, sqlErr.RequestID)
		case err != nil:
			t.Fatalf("%q: %v", sql, err)
		default:
			ids = append(ids, resp.RequestID)
		}
	}
	gw.Drain()
	if _, err := lb.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lb.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	var tick func() error
	for _, s := range gw.Services() {
		if s.Name == "retention" {
			tick = func() error { return s.Tick(ctx) }
		}
	}
	if tick == nil {
		t.Fatal("no retention service with a retention set")
	}

	// Not yet old enough: nothing goes.
	if err := tick(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := gw.Request(ctx, id, gatewaytest.Agent); err != nil {
			t.Fatalf("%s before the retention: %v", id, err)
		}
	}

	// The write's receipt, aged as the clock is: the Pilot removes it too
	// (it would keep one younger than a day whatever it is asked).
	if n := gatewaytest.Receipts(t, f.dsn); n != 1 {
		t.Fatalf("%d receipts, want the write's", n)
	}
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE harbormaster.receipts SET executed_at = now() - interval '92 days'"); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(retain + 24*time.Hour))
	if err := tick(); err != nil {
		t.Fatal(err)
	}
	if n := gatewaytest.Receipts(t, f.dsn); n != 0 {
		t.Fatalf("%d receipts past the retention", n)
	}
	for _, id := range ids {
		if _, err := gw.Request(ctx, id, gatewaytest.Agent); !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("%s past the retention: %v, want not found", id, err)
		}
	}
	rep, err := lb.Verify(ctx, f.sys.CheckpointVerifier)
	if err != nil || !rep.OK || rep.PrunedThrough == 0 || rep.TailTooLong {
		t.Fatalf("verify after retention: %s %v", rep, err)
	}

	// The path goes on (the clock back to today: the example delegations
	// would have expired), and the log still verifies.
	offset.Store(0)
	resp, err := gw.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, "SELECT id, status FROM orders WHERE id = 4")
	if err != nil || resp.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("after retention: %+v %v", resp, err)
	}
	gw.Drain()
	if rep, err := lb.Verify(ctx, f.sys.CheckpointVerifier); err != nil || !rep.OK {
		t.Fatalf("verify after a statement: %s %v", rep, err)
	}
}
