package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/mcpserver"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// A referral past the agent's waiting cap is a tool error (isError) that
// says it was refused, not queued, with the request that records it.
func TestReferralFloodIsAToolError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *gateway.Config) { c.MaxWaiting, c.ReferralRate = 1, quota.Rate{Count: -1} })
	cs := f.connect(t, f.token)
	first := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "DELETE FROM orders WHERE id = 1"})
	if first.isError || first.structured.Outcome != gateway.OutcomeReferred {
		t.Fatalf("first referral: %+v", first)
	}
	second := call[gateway.Response](t, cs, mcpserver.ToolRunSQL, map[string]any{"target": "shop", "sql": "DELETE FROM orders WHERE id = 2"})
	if !second.isError || !strings.Contains(second.text, gateway.FloodTooManyWait) || !strings.Contains(second.text, "req_") ||
		!strings.Contains(second.text, "not queued") {
		t.Fatalf("second: isError %v %q, want a tool error naming %s and its request", second.isError, second.text, gateway.FloodTooManyWait)
	}
}
