package node_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/config"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
	"github.com/harbormaster-dev/harbormaster/internal/node"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// TestLeadsmanFromConfig: a serve config with a leadsman section starts
// the Leadsman, which notes a referral through the configured provider;
// the agent's answer came first, referred, as without it.
func TestLeadsmanFromConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	gatewaytest.LoadShop(t, dsn)
	srv := llmtest.NewAnthropic(t, llmtest.Text("It deletes order 1, which no rule covers."))
	dir := t.TempDir()
	keys := gatewaytest.NewKeys(t)
	cpPEM, _, err := config.NewControlPlaneKey()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"cp.pem":          cpPEM,
		"allowed_signers": keys.SignersFile,
		"harbormaster.yaml": fmt.Appendf(nil, `name: leadsman-test
listen: 127.0.0.1:0
store: store.db
control_plane_key: cp.pem
signers: allowed_signers
targets:
  - name: shop
    dsn: %q
agents:
  - principal: agent:demo
    token_sha256: %s
leadsman:
  identity: leadsman:notes
  poll: 20ms
  provider:
    name: scripted
    kind: anthropic
    base_url: %s
    model: claude-test
`, dsn, config.HashToken(gatewaytest.AgentToken), srv.URL),
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
	sys, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	resp, err := sys.Gateway().Submit(ctx, gatewaytest.Agent, gatewaytest.Target, "DELETE FROM orders WHERE id = 1")
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v: want referred", resp, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := sys.Notes().Note(ctx, resp.RequestID)
		if err == nil && n.Status == "written" {
			if n.Text != "It deletes order 1, which no rule covers." || n.Leadsman != "leadsman:notes" || n.Model != "claude-test" || n.Advisory != leadsman.Label {
				t.Fatalf("note %+v", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no note in 30s: %+v, %v", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if srv.Requests() != 1 {
		t.Fatalf("%d model calls for one note", srv.Requests())
	}
}
