package gateway_test

import (
	"errors"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Tier B acts carry their signing time: a stale act, or an old act replayed
// after a newer one, is refused, so a captured "enable" cannot undo a later
// "disable".
func TestTierBActsCannotBeReplayed(t *testing.T) {
	t.Parallel()
	f := newTierB(t, llmtest.AlwaysConforms(), tierBOptions{})
	keys := f.sys.Opts.Keys
	enable := func(at time.Time, on bool) error {
		act, sig := gatewaytest.Act(t, keys.Grantor, signing.NamespaceEnable, acts.Enable{Time: acts.Stamp(at), Version: 1,
			Kind: acts.KindEnable, DelegationID: f.d.ID, Rule: residualRule, Surveyor: f.panel.Identity(), Bundle: f.panel.Bundle().Version, On: on})
		return f.sys.Gateway.EnableSurveyor(t.Context(), act, sig)
	}
	// An "enable" captured earlier (signed 5 minutes ago)...
	old := time.Now().Add(-5 * time.Minute)
	// ...then a fresh "disable" is applied.
	if err := enable(time.Now(), false); err != nil {
		t.Fatal(err)
	}
	if err := enable(old, true); !errors.Is(err, gateway.ErrActRefused) {
		t.Fatalf("replayed older enable act: %v, want refused", err)
	}
	f.mustRefer(t, "UPDATE customers SET name = 'John Smith' WHERE id = 3", "not enabled")
	if err := enable(time.Now().Add(-20*time.Minute), true); !errors.Is(err, gateway.ErrActRefused) {
		t.Fatalf("stale enable act: %v, want refused", err)
	}
	act, sig := gatewaytest.Act(t, keys.Approver, signing.NamespaceReview, acts.Auditable{Time: acts.Stamp(time.Now().Add(-time.Hour)),
		Version: 1, Kind: acts.KindAuditable, DelegationID: f.d.ID, Rule: residualRule, Note: "old"})
	if err := f.sys.Gateway.MarkAuditable(t.Context(), act, sig); !errors.Is(err, gateway.ErrActRefused) {
		t.Fatalf("stale auditable act: %v, want refused", err)
	}
	// A reinstatement when nothing is suspended is refused.
	act, sig = gatewaytest.Act(t, keys.Grantor, signing.NamespaceEnable, acts.Reinstate{Time: acts.Stamp(time.Now()),
		Version: 1, Kind: acts.KindReinstate, DelegationID: f.d.ID, Note: "nothing to lift"})
	if err := f.sys.Gateway.Reinstate(t.Context(), act, sig); !errors.Is(err, gateway.ErrActRefused) {
		t.Fatalf("reinstating an unsuspended delegation: %v, want refused", err)
	}
}
