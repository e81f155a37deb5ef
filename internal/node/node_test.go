package node_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// TestRevokedDelegationFileOnRestart: a delegation loaded from the
// delegations directory and revoked since is still in the directory at the
// next start. The server starts, and the delegation stays revoked.
func TestRevokedDelegationFileOnRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	dir := t.TempDir()
	keys := gatewaytest.NewKeys(t)
	cpPEM, _, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pilot.LoadCatalogDSN(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	y := gatewaytest.Example(t, gatewaytest.Orders)
	files := map[string][]byte{
		"cp.pem":                      cpPEM,
		"allowed_signers":             keys.SignersFile,
		"delegations/orders.yaml":     y,
		"delegations/orders.yaml.sig": gatewaytest.Sign(t, keys.Grantor, gatewaytest.Canonical(t, y, cat)),
		"harbormaster.yaml": fmt.Appendf(nil, `name: restart-test
listen: 127.0.0.1:0
store: store.db
control_plane_key: cp.pem
signers: allowed_signers
delegations: delegations
targets:
  - name: shop
    dsn: %q
agents:
  - principal: agent:demo
    token_sha256: %s
`, dsn, config.HashToken(gatewaytest.AgentToken)),
	}
	if err := os.Mkdir(filepath.Join(dir, "delegations"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "harbormaster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)

	sys, err := node.Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ds := sys.Gateway().Registry().Delegations(gatewaytest.Agent)
	if len(ds) != 1 {
		t.Fatalf("%d delegations loaded, want 1", len(ds))
	}
	id := ds[0].ID
	act, err := acts.Canonical(acts.Revocation{Version: 1, Kind: acts.KindRevocation, DelegationID: id, Target: gatewaytest.Target,
		Reason: "test", Time: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := keys.Grantor.Sign(signing.NamespaceRevocation, act)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Gateway().Revoke(ctx, act, sig); err != nil {
		t.Fatal(err)
	}
	sys.Close()

	sys, err = node.Start(context.WithoutCancel(ctx), cfg, log)
	if err != nil {
		t.Fatalf("restart with the revoked delegation's file in place: %v", err)
	}
	defer sys.Close()
	d := sys.Gateway().Registry().Delegation(id)
	if d == nil || d.Revoked == nil || d.Active(time.Now()) {
		t.Fatalf("after the restart: %+v, want revoked", d)
	}
	if _, _, err := sys.Gateway().AddDelegation(ctx, y, files["delegations/orders.yaml.sig"], "api"); !errors.Is(err, gateway.ErrDelegationRevoked) {
		t.Fatalf("re-adding it: %v, want ErrDelegationRevoked", err)
	}
}
