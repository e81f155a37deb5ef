package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// TestRevokedDelegationReuploadConflicts: the same signed YAML uploaded
// again after its revocation answers 409 delegation_revoked, not 201.
func TestRevokedDelegationReuploadConflicts(t *testing.T) {
	t.Parallel()
	f := newAPIFixture(t)
	keys := f.sys.Opts.Keys
	y, sig := f.sys.SignedExample(t, gatewaytest.Orders)
	upload := func() (int, []byte) {
		return f.do(t, http.MethodPost, "/v1/delegations", "", map[string]string{"yaml": string(y), "signature": string(sig)})
	}
	st, body := upload()
	if st != http.StatusCreated {
		t.Fatalf("upload: %d %s", st, body)
	}
	var id string
	for _, d := range f.sys.Gateway.Registry().Delegations(gatewaytest.Agent) {
		if d.Bound.Tier() == "A" {
			id = d.ID
		}
	}
	rev, err := acts.Canonical(acts.Revocation{Version: 1, Kind: acts.KindRevocation, DelegationID: id, Target: gatewaytest.Target,
		Reason: "incident", Time: time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := keys.Grantor.Sign(signing.NamespaceRevocation, rev)
	if err != nil {
		t.Fatal(err)
	}
	if st, body := f.do(t, http.MethodPost, "/v1/delegations/"+id+"/revoke", "", map[string]string{"act": string(rev), "signature": string(rs)}); st != http.StatusOK {
		t.Fatalf("revoke: %d %s", st, body)
	}
	st, body = upload()
	e := apiError(t, st, body, http.StatusConflict, "delegation_revoked")
	if msg, _ := e["message"].(string); !strings.Contains(msg, id) {
		t.Fatalf("message %q does not name the delegation", msg)
	}
}
