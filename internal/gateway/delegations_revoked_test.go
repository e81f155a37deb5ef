package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// TestRevokedDelegationStaysRevoked: once revoked, the same signed
// delegation cannot be added back, however it is re-sent (the same file,
// the same bound re-formatted, after a restart): the error wraps
// ErrDelegationRevoked, nothing is logged or stored, and the delegation
// stays revoked. Before the revocation, adding it again is a no-op.
func TestRevokedDelegationStaysRevoked(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, nil)
	ctx := context.Background()
	keys := f.sys.Opts.Keys
	y := gatewaytest.Example(t, gatewaytest.Orders)
	sig := gatewaytest.Sign(t, keys.Grantor, gatewaytest.Canonical(t, y, f.sys.Pilot.Catalog()))
	d, _, err := f.sys.Gateway.AddDelegation(ctx, y, sig, "orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if again, _, err := f.sys.Gateway.AddDelegation(ctx, y, sig, "orders.yaml"); err != nil || again != d {
		t.Fatalf("adding it again before any revocation: %v, %v; want the stored one", again, err)
	}
	act, rsig := revocation(t, keys.Grantor, signing.NamespaceRevocation, d, gatewaytest.Target)
	if _, err := f.sys.Gateway.Revoke(ctx, act, rsig); err != nil {
		t.Fatal(err)
	}
	const sel = "SELECT id, status FROM orders WHERE id = 3"

	tests := []struct {
		name    string
		yaml    []byte
		restart bool
	}{
		{name: "the same file", yaml: y},
		{name: "the same bound, re-formatted", yaml: rewrite(t, y, "table: public.orders", "table: ORDERS")},
		{name: "the same file, after a restart", yaml: y, restart: true},
	}
	for _, tt := range tests { // in order: one system, restarted once
		t.Run(tt.name, func(t *testing.T) {
			if tt.restart {
				f.restart(t)
			}
			got, _, err := f.sys.Gateway.AddDelegation(ctx, tt.yaml, sig, "api")
			var de *gateway.DelegationError
			if !errors.Is(err, gateway.ErrDelegationRevoked) || errors.As(err, &de) || got != nil {
				t.Fatalf("re-adding a revoked delegation: %v (a delegation returned: %v); want ErrDelegationRevoked and none", err, got != nil)
			}
			if !strings.Contains(err.Error(), d.ID) {
				t.Errorf("error %q does not name the delegation", err)
			}
			stored := f.sys.Gateway.Registry().Delegation(d.ID)
			if stored == nil || stored.Revoked == nil || len(f.sys.Gateway.Registry().Delegations("")) != 1 {
				t.Fatalf("after the re-add: %+v, %d delegations", stored, len(f.sys.Gateway.Registry().Delegations("")))
			}
			if n := f.count(t, "delegation"); n != 1 {
				t.Fatalf("%d delegation entries, want the first one only", n)
			}
			if r := f.submit(t, gatewaytest.Agent, sel); r.Outcome != gateway.OutcomeReferred || r.DelegationID != "" {
				t.Fatalf("a statement after the re-add: %+v, want referred", r)
			}
		})
	}
}
