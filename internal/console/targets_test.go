package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/console"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestLogbookOtherTargets: on a node serving two targets, a human whose
// key opens sessions on one of them does not see, on the logbook page, the
// entries of the other, including those that name a request or a
// delegation rather than a target (a Leadsman note, a Surveyor judgment,
// an audit); the entries of their own target are shown.
func TestLogbookOtherTargets(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	g2 := f.sys.NodeWithTarget(t, "depot", pgtmptest.NewDatabase(t, shared.Server(t)))
	other, err := g2.Submit(ctx, gatewaytest.Agent, "depot", "SELECT 1 AS one")
	if err != nil {
		t.Fatal(err)
	}
	own := f.submit(t, "SELECT id FROM orders WHERE id = 1")
	for _, e := range []struct{ id, text string }{{other.RequestID, "DEPOT-ONLY-NOTE"}, {own.RequestID, "SHOP-NOTE"}} {
		if _, err := f.sys.Logbook.Append(ctx, logbook.Record{Kind: logbook.KindLeadsmanNote,
			Subjects: map[string]string{"request": e.id, "principal": "leadsman:test"}, Payload: map[string]any{"failure": e.text}}); err != nil {
			t.Fatal(err)
		}
	}
	c2, err := console.New(console.Config{Gateway: g2, Signers: f.keys.Signers, Logbook: f.sys.Logbook, Key: console.SessionKey(f.keys.ControlPlane)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	c2.Register(mux)
	srv2 := httptest.NewServer(mux)
	defer srv2.Close()
	alice := client(t)
	if code, _, _ := useLink(t, alice, strings.Replace(f.loginLink(t, f.keys.Grantor), f.srv.URL, srv2.URL, 1)); code != http.StatusOK {
		t.Fatalf("alice's login: %d", code)
	}
	for _, q := range []string{"", "?kind=" + string(logbook.KindLeadsmanNote), "?subject=" + url.QueryEscape("request="+other.RequestID)} {
		code, body := do(t, alice, "GET", srv2.URL+console.Prefix+"logbook"+q, nil)
		if code != http.StatusOK {
			t.Fatalf("logbook%s: %d", q, code)
		}
		if strings.Contains(body, "DEPOT-ONLY-NOTE") {
			t.Errorf("logbook%s shows alice (shop only) an entry of the depot target", q)
		}
		if q == "" && !strings.Contains(body, "SHOP-NOTE") {
			t.Errorf("logbook%s does not show alice the entry of her own target", q)
		}
	}
	// The dashboard's queue figures count her target's referrals only:
	// both statements above wait for a human, one on each target.
	if own.Outcome != "referred" || other.Outcome != "referred" {
		t.Fatalf("outcomes %s and %s: both should be referred", own.Outcome, other.Outcome)
	}
	_, body := do(t, alice, "GET", srv2.URL+console.Prefix+"dashboard", nil)
	if !strings.Contains(body, `Queue depth</span> <span class="figure-value">1</span>`) {
		t.Errorf("the dashboard does not count alice's one waiting referral alone:\n%s", body)
	}
}
