package referrals

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/lookalike"
)

// Referred is called once a request is waiting and its answer is ready:
// it tells the webhook, which may not hold up, fail or shape the agent's
// answer. Nothing of the statement runs: its preview waits for a human
// (Preview).
func (s *Service) Referred(req *ledger.Request) {
	if s.cfg.Webhook != "" {
		go s.postWebhook(req)
	}
}

// webhookStatement and webhookReasons are the bytes of the statement and
// of the reasons a webhook message carries; past them it says how many
// more bytes the console shows.
const (
	webhookStatement = 1000
	webhookReasons   = 500
)

// postWebhook sends a Slack-compatible message about a new referral. It
// runs on its own goroutine with a timeout; failures are logged only.
func (s *Service) postWebhook(req *ledger.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"text": webhookText(req), "request_id": req.ID, "principal": req.Principal, "target": req.Target})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Webhook, bytes.NewReader(body))
	if err != nil {
		s.cfg.Logger.Warn("webhook", "err", err)
		return
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := s.cfg.HTTPClient.Do(hreq)
	if err != nil {
		s.cfg.Logger.Warn("webhook failed", "request", req.ID, "err", err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		s.cfg.Logger.Warn("webhook failed", "request", req.ID, "status", resp.StatusCode)
	}
}

// webhookText is the message's text. Statement text and reasons are
// untrusted: sent in a JSON string, the statement in a code block, never
// as markup of ours. The reasons hold names the agent chose, so &, < and
// > are escaped as Slack asks: unescaped, Slack reads <url|label> as a
// disguised link and <!channel> as a mention. Each look-alike character
// (a bidi control that reorders the statement, a Cyrillic а in
// exаmple.com, a blank U+2800) is written as its code point and name, and
// listed; a statement cut short says so, outside the code block the agent
// writes in, so no statement can fake the cut or hide past it.
func webhookText(req *ledger.Request) string {
	stmt, more := cut(req.Canonical, webhookStatement)
	reasons := strings.Join(req.Reasons, "; ")
	reasons, moreReasons := cut(reasons, webhookReasons)
	var b strings.Builder
	fmt.Fprintf(&b, "Harbormaster: request %s from %s on %s is waiting for a human.\nReasons: %s", req.ID, req.Principal, req.Target,
		slackEscape(lookalike.Mark(reasons)))
	if moreReasons > 0 {
		fmt.Fprintf(&b, " … (truncated, %d more bytes: open the console)", moreReasons)
	}
	if l := lookalike.Summary(5, stmt, reasons); len(l) > 0 {
		fmt.Fprintf(&b, "\nLook-alike characters, marked ⟦…⟧: %s", slackEscape(strings.Join(l, "; ")))
	}
	fmt.Fprintf(&b, "\n```%s```", slackEscape(strings.ReplaceAll(lookalike.Mark(stmt), "```", "'''")))
	if more > 0 {
		fmt.Fprintf(&b, "\n… (truncated, %d more bytes: open the console)", more)
	}
	return b.String()
}

// slackEscape escapes the three characters Slack's message text reads as
// control characters.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// cut returns at most the first n bytes of s, cut where a character
// starts, and how many bytes of s it leaves out.
func cut(s string, n int) (string, int) {
	if len(s) <= n {
		return s, 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], len(s) - n
}
