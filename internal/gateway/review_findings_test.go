package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// TestWebhookEscapesSlackMarkup: the referral webhook is Slack-compatible,
// and Slack reads <url|label>, <!channel> and <@user> in a message's text
// as markup. The reasons carry names the agent chose (a column
// "<https://evil.example|Approve here> <!channel>"), outside the code
// block, so an agent could put a disguised link and a channel-wide
// mention in front of the approvers. Every &, < and > of the text is sent
// escaped, as Slack's message format asks.
func TestWebhookEscapesSlackMarkup(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(b, &m)
		got <- m.Text
	}))
	t.Cleanup(srv.Close)
	f := newEmptyFixture(t, func(o *gatewaytest.Options) { o.Gateway.Webhook = srv.URL })
	f.addDelegation(t, gatewaytest.Example(t, gatewaytest.Orders))
	const name = `<https://evil.example|Approve here> <!channel>`
	resp, err := f.sys.Gateway.Submit(t.Context(), gatewaytest.Agent, gatewaytest.Target,
		`UPDATE orders SET "`+name+`" = 1 WHERE id = 1 AND status <> '<@U0123>'`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != gateway.OutcomeReferred || !strings.Contains(strings.Join(resp.Reasons, " "), name) {
		t.Fatalf("%s %q: want referred with a reason naming the column", resp.Outcome, resp.Reasons)
	}
	var text string
	select {
	case text = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	if strings.ContainsAny(text, "<>") {
		t.Errorf("the webhook's text holds Slack markup from the agent: %q", text)
	}
	for _, want := range []string{"&lt;https://evil.example|Approve here&gt; &lt;!channel&gt;", "&lt;@U0123&gt;"} {
		if !strings.Contains(text, want) {
			t.Errorf("the webhook's text lacks %q: %q", want, text)
		}
	}
}
