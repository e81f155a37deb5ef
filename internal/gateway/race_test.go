// Reproduction (drop into internal/gateway as a _test.go file; uses helpers from queue_test.go).
package gateway_test

import (
	"sync"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// TestApproveDenyRace: an approval and a denial of the same request, at
// once: exactly one closing act may be logged.
func TestApproveDenyRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	gw, keys := f.sys.Gateway, f.sys.Opts.Keys
	for range 30 {
		v := f.referred(t, "DELETE FROM orders WHERE id = 100000")
		act, err := gw.ProposeApproval(ctx, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		asig := signAct(t, keys.Approver, signing.NamespaceApproval, act)
		den, _ := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: v.ID, Target: gatewaytest.Target,
			StatementSHA256: marque.StatementHash(v.CanonicalSQL), Reason: "no"})
		dsig := signAct(t, keys.Approver, signing.NamespaceDenial, den)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = gw.Approve(ctx, v.ID, act, asig) })
		wg.Go(func() { _, _ = gw.Deny(ctx, v.ID, den, dsig) })
		wg.Wait()
		es := entries(t, f.sys.Logbook, v.ID)
		if n := len(ofKind(es, "approval")) + len(ofKind(es, "denial")); n != 1 {
			t.Fatalf("%s: %d closing acts logged (%v), final status %s", v.ID, n, kinds(es), f.view(t, v.ID).Status)
		}
	}
}
