package referrals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/logbook/logbooktest"
	"github.com/harbormaster-dev/harbormaster/internal/quota"
)

// newLedger is a request ledger on a real SQLite store and logbook.
func newLedger(t *testing.T) *ledger.Ledger {
	t.Helper()
	st, lb := logbooktest.Running(t, "referrals-test", "")
	l, err := ledger.New(context.Background(), ledger.Config{}, st, lb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Drain)
	return l
}

var errUnknown = errors.New("unknown target")

func noTargets(string) (Previewer, error) { return nil, errUnknown }

// refer records a waiting request of principal on shop.
func refer(t *testing.T, l *ledger.Ledger, id, principal, canonical string, reasons ...string) {
	t.Helper()
	referOn(t, l, "shop", id, principal, canonical, reasons...)
}

func referOn(t *testing.T, l *ledger.Ledger, target, id, principal, canonical string, reasons ...string) {
	t.Helper()
	req := &ledger.Request{ID: id, Principal: principal, Target: target, SQL: canonical, Canonical: canonical,
		Outcome: ledger.OutcomeReferred, Reasons: reasons, Created: time.Now()}
	if err := l.Decide(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
}

// TestAdmit: past the waiting cap, and past the referral rate, a
// principal's referral is refused with the code that says which; another
// principal is not affected, and either rule off admits everything.
func TestAdmit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("waiting cap", func(t *testing.T) {
		t.Parallel()
		l := newLedger(t)
		s, err := New(Config{ReferralRate: quota.Rate{Count: -1}, MaxWaiting: 2, Target: noTargets}, l)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if f, err := s.Admit(ctx, "agent"); f != nil || err != nil {
				t.Fatalf("referral %d: %v %v", i, f, err)
			}
			refer(t, l, fmt.Sprintf("req_%d", i), "agent", "DELETE FROM orders")
		}
		f, err := s.Admit(ctx, "agent")
		if err != nil || f == nil || f.Code != FloodTooManyWait || !strings.Contains(f.Message, "agent has 2 requests waiting") {
			t.Fatalf("third referral: %+v %v, want %s", f, err, FloodTooManyWait)
		}
		if f, err := s.Admit(ctx, "other"); f != nil || err != nil {
			t.Fatalf("another principal: %v %v", f, err)
		}
	})
	t.Run("referral rate", func(t *testing.T) {
		t.Parallel()
		now := time.Unix(1_800_000_000, 0)
		s, err := New(Config{ReferralRate: quota.Rate{Count: 2, Per: time.Hour}, MaxWaiting: -1, Target: noTargets,
			Clock: func() time.Time { return now }}, newLedger(t))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := s.Admit(ctx, "agent"); f != nil || err != nil {
			t.Fatalf("first: %v %v", f, err)
		}
		// A referral the Pilot made counts, without being refused.
		if !s.Take("agent") || s.Take("agent") {
			t.Fatal("Take: the bucket of 2 did not run dry after 2 referrals")
		}
		f, err := s.Admit(ctx, "agent")
		if err != nil || f == nil || f.Code != FloodReferralRate || !strings.Contains(f.Message, "(2 per 1h0m0s)") {
			t.Fatalf("past the rate: %+v %v, want %s", f, err, FloodReferralRate)
		}
		if f, err := s.Admit(ctx, "other"); f != nil || err != nil {
			t.Fatalf("another principal: %v %v", f, err)
		}
		now = now.Add(30 * time.Minute) // one token back
		if f, err := s.Admit(ctx, "agent"); f != nil || err != nil {
			t.Fatalf("after half the period: %v %v", f, err)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		l := newLedger(t)
		s, err := New(Config{ReferralRate: quota.Rate{Count: -1}, MaxWaiting: -1, Target: noTargets}, l)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			refer(t, l, fmt.Sprintf("req_%d", i), "agent", "DELETE FROM orders")
			if f, err := s.Admit(ctx, "agent"); f != nil || err != nil {
				t.Fatalf("referral %d: %v %v", i, f, err)
			}
		}
	})
}

// TestPreviewRunsNothingUnasked: Preview reaches no target for a request
// that is not waiting, and none for one with no checked statement (it says
// why); an unknown target's error is returned as the caller made it.
func TestPreviewRunsNothingUnasked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t)
	asked := 0
	s, err := New(Config{Target: func(target string) (Previewer, error) {
		asked++
		if target == "shop" {
			// Never called: no statement of shop gets as far.
			return nil, nil
		}
		return nil, errUnknown
	}}, l)
	if err != nil {
		t.Fatal(err)
	}
	run := &ledger.Request{ID: "req_run", Principal: "agent", Target: "shop", SQL: "SELECT 1", Canonical: "SELECT 1",
		Path: "compiled", MarqueID: "mq_1", Created: time.Now()}
	if err := l.Decide(ctx, run, nil); err != nil {
		t.Fatal(err)
	}
	if r, why, err := s.Preview(ctx, "req_run", true); err != nil || why != "" || r.ID != "req_run" || asked != 0 {
		t.Fatalf("a running request: %v %q %v, asked %d", r, why, err, asked)
	}
	refer(t, l, "req_stacked", "agent", "", "2 statements were sent: send exactly one [multiple_statements]")
	if _, why, err := s.Preview(ctx, "req_stacked", false); err != nil || !strings.Contains(why, "stacked") || asked != 1 {
		t.Fatalf("a stacked statement: %q %v, asked %d", why, err, asked)
	}
	referOn(t, l, "gone", "req_w", "agent", "DELETE FROM orders WHERE id = 1")
	if _, _, err := s.Preview(ctx, "req_w", false); err != errUnknown {
		t.Fatalf("an unknown target: %v, want the caller's error as it is", err)
	}
	if _, _, err := s.Preview(ctx, "req_none", false); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("no such request: %v", err)
	}
}

// TestReferredDoesNotWait: the webhook is posted on its own goroutine:
// Referred returns while the receiver has not answered, and the message
// carries the request's id, principal and target beside its text.
func TestReferredDoesNotWait(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]string, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]string
		_ = json.Unmarshal(b, &m)
		got <- m
		<-release
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	s, err := New(Config{Webhook: srv.URL, Target: noTargets}, newLedger(t))
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	go func() {
		s.Referred(&ledger.Request{ID: "req_1", Principal: "agent", Target: "shop", Canonical: "DELETE FROM orders", Reasons: []string{"no rule"}})
		close(returned)
	}()
	var m map[string]string
	select {
	case m = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook within 10s")
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Referred waits for the webhook's receiver")
	}
	if m["request_id"] != "req_1" || m["principal"] != "agent" || m["target"] != "shop" ||
		!strings.HasPrefix(m["text"], "Harbormaster: request req_1 from agent on shop is waiting for a human.\nReasons: no rule\n```DELETE FROM orders```") {
		t.Fatalf("the message: %q", m)
	}
}

// TestWebhookText: the text escapes Slack's markup, marks and lists
// look-alikes, and says where it cuts the statement and the reasons,
// outside the code block, with the bytes it leaves out.
func TestWebhookText(t *testing.T) {
	t.Parallel()
	stmt := "UPDATE t SET a = '<!channel> ex\u0430mple\u202e ```' || '" + strings.Repeat("é", 600) + "'"
	reason := "<https://evil.example|Approve here> " + strings.Repeat("r", 600)
	text := webhookText(&ledger.Request{ID: "req_1", Principal: "agent", Target: "shop", Canonical: stmt, Reasons: []string{reason}})
	if strings.ContainsAny(text, "<>\u202e") {
		t.Errorf("raw markup or bidi control: %q", text)
	}
	for _, want := range []string{
		"Reasons: &lt;https://evil.example|Approve here&gt; rrr",
		" … (truncated, " + fmt.Sprint(len(reason)-webhookReasons) + " more bytes: open the console)\n",
		"&lt;!channel&gt; ex⟦U+0430 CYRILLIC SMALL LETTER A⟧mple⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧ '''",
		"Look-alike characters, marked ⟦…⟧: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q: %q", want, text)
		}
	}
	shown, more := cut(stmt, webhookStatement)
	if more == 0 || len(shown)+more != len(stmt) || !strings.HasSuffix(text, fmt.Sprintf("```\n… (truncated, %d more bytes: open the console)", more)) {
		t.Errorf("the cut: %d bytes left out; text ends %q", more, text[max(0, len(text)-120):])
	}
	if got := strings.Count(text, "```"); got != 2 {
		t.Errorf("%d code fences, want the 2 of the statement's block", got)
	}
}

// TestCut: a cut falls where a character starts, and counts the rest.
func TestCut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s        string
		n        int
		want     string
		wantMore int
	}{
		{"abc", 3, "abc", 0},
		{"abcd", 3, "abc", 1},
		{"aé", 2, "a", 2}, // é is 2 bytes: not cut inside
		{"éé", 3, "é", 2},
		{"€", 1, "", 3},
	} {
		got, more := cut(c.s, c.n)
		if got != c.want || more != c.wantMore {
			t.Errorf("cut(%q, %d) = %q, %d; want %q, %d", c.s, c.n, got, more, c.want, c.wantMore)
		}
	}
}
