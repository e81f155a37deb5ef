package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
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

// TestWebhookMarksLookalikesAndSaysWhereItCuts: the webhook cut the
// statement at 1,000 bytes without saying so, so an agent could put
// what matters past the cut, and it passed bidi controls and look-alike
// letters to the approvers' chat as they are (a U+202E reorders what
// they read; "exаmple.com" with a Cyrillic а reads as example.com). The
// message now marks each look-alike as its code point, lists them, and
// says at the cut how many bytes it leaves out, outside the code block
// the agent writes in.
func TestWebhookMarksLookalikesAndSaysWhereItCuts(t *testing.T) {
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
	sql := "UPDATE orders SET status = 'ex\u0430mple.com\u202e <b>\u2800\u3000\u00a0" + strings.Repeat("x", 3000) +
		"\u202e' WHERE status <> 'y'"
	resp, err := f.sys.Gateway.Submit(t.Context(), gatewaytest.Agent, gatewaytest.Target, sql)
	if err != nil || resp.Outcome != gateway.OutcomeReferred {
		t.Fatalf("%+v, %v: want referred", resp, err)
	}
	var text string
	select {
	case text = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	v, err := f.sys.Gateway.Request(t.Context(), resp.RequestID, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.CanonicalSQL) < 3000 {
		t.Fatalf("the canonical statement is %d bytes, want over 3000", len(v.CanonicalSQL))
	}
	if strings.ContainsAny(text, "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u2800\u3000\u00a0") {
		t.Errorf("the webhook's text holds a raw bidi control or blank: %q", text)
	}
	// The list of look-alikes shows the Cyrillic а itself; the statement
	// does not.
	if strings.Contains(between(t, text, "```", "```"), "\u0430") {
		t.Errorf("the webhook's statement holds a raw Cyrillic а: %q", text)
	}
	for _, want := range []string{
		"ex⟦U+0430 CYRILLIC SMALL LETTER A⟧mple.com⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧ &lt;b&gt;⟦U+2800 BRAILLE PATTERN BLANK⟧⟦U+3000 IDEOGRAPHIC SPACE⟧⟦U+00A0 NO-BREAK SPACE⟧xxx",
		`Cyrillic "а" (U+0430 CYRILLIC SMALL LETTER A) looks like Latin "a"`,
		"U+202E RIGHT-TO-LEFT OVERRIDE reorders the text around it",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the webhook's text lacks %q: %q", want, text)
		}
	}
	// The statement shown is the first 1,000 bytes of the canonical text;
	// the note after the code block counts the rest.
	shown := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(lookalikeUnmark(between(t, text, "```", "```")))
	if shown != v.CanonicalSQL[:1000] {
		t.Errorf("the code block is not the statement's first 1,000 bytes: %q", shown)
	}
	want := fmt.Sprintf("```\n… (truncated, %d more bytes: open the console)", len(v.CanonicalSQL)-1000)
	if !strings.HasSuffix(text, want) {
		t.Errorf("the webhook's text does not end with %q: ...%q", want, text[max(0, len(text)-200):])
	}
}

// lookalikeUnmark reads a lookalike.Mark rendering back to its text.
func lookalikeUnmark(m string) string {
	re := regexp.MustCompile(`⟦U\+([0-9A-F]{4,6})[^⟧]*⟧`)
	return re.ReplaceAllStringFunc(m, func(s string) string {
		r, _ := strconv.ParseUint(re.FindStringSubmatch(s)[1], 16, 32)
		return string(rune(r))
	})
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("no %q in %q", from, s)
	}
	out, _, _ := strings.Cut(rest, to)
	return out
}
