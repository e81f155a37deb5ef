package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// TestApprovalGoesBackOnAConcurrentUpdate: another session updates a row
// an approved statement reaches after the statement's snapshot was taken
// (it waits on the row's lock, then PostgreSQL refuses it: could not
// serialize access). Nothing ran, and the approver was shown another row
// than the one there now: the request goes back to the queue for a fresh
// preview, as on any other drift, and is not failed for good (found by
// the fault suite: an approval through a just-restarted Pilot, racing
// the load's last writes).
func TestApprovalGoesBackOnAConcurrentUpdate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	v := f.referred(t, "DELETE FROM orders WHERE status = 'failed'")
	pv := previewOf(t, v)
	if pv.Rows < 1 {
		t.Fatalf("preview %+v, want failed orders", pv)
	}
	act, err := f.sys.Gateway.ProposeApproval(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	sig := signAct(t, f.sys.Opts.Keys.Approver, signing.NamespaceApproval, act)

	other := f.conn(t)
	if _, err := other.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "UPDATE orders SET updated_at = now() WHERE id = $1", pv.Before[0]["id"]); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		v   *gateway.RequestView
		err error
	}
	done := make(chan answer, 1)
	go func() {
		got, err := f.sys.Gateway.Approve(ctx, v.ID, act, sig)
		done <- answer{got, err}
	}()
	watch := f.conn(t)
	waitFor(t, "the approved statement waiting on the row's lock", func() bool {
		var n int
		_ = watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE%'`).Scan(&n)
		return n > 0
	})
	if _, err := other.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the approval did not return")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.v.Status != gateway.StatusWaiting || a.v.RowsAffected != 0 || !strings.Contains(strings.Join(a.v.Reasons, " "), "preview") {
		t.Fatalf("after a concurrent update: %s %q (detail %q), want back in the queue for a fresh preview", a.v.Status, a.v.Reasons, a.v.Detail)
	}
}
