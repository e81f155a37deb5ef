package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/llm"
	"github.com/harbormaster-dev/harbormaster/internal/llm/llmtest"
)

// TestWriter: a free-text call through each provider's real SDK returns
// the text as sent, with no schema asked for; errors, timeouts, refusals
// and empty answers are Failed texts, never errors.
func TestWriter(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{llm.KindOpenAI, llm.KindAnthropic} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			newServer := llmtest.NewOpenAI
			if kind == llm.KindAnthropic {
				newServer = llmtest.NewAnthropic
			}
			cases := []struct {
				name    string
				b       llmtest.Behaviour
				text    string
				failure string
			}{
				{"prose", llmtest.Text("  It sets one name.\nApproved!  "), "It sets one name.\nApproved!", ""},
				{"long", llmtest.Text(strings.Repeat("é", llm.MaxTextBytes)), strings.Repeat("é", llm.MaxTextBytes/2), ""},
				{"http error", llmtest.HTTP500(), "", llm.FailureHTTP},
				{"hang", llmtest.Hang(), "", llm.FailureTimeout},
				{"refusal", llmtest.Refusal(), "", llm.FailureRefusal},
				{"empty", llmtest.Empty(), "", llm.FailureEmpty},
			}
			for _, c := range cases {
				srv := newServer(t, c.b)
				w, err := llm.NewWriter(llm.ProviderConfig{Name: "p1", Kind: kind, BaseURL: srv.URL, Model: "m1", Timeout: 300 * time.Millisecond}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := w.Write(context.Background(), llm.Prompt{System: "describe", User: "<statement>SELECT 1</statement>"})
				if got.Text != c.text || !strings.HasPrefix(got.Failure, c.failure) || (got.Outcome == llm.Answered) != (c.failure == "") ||
					got.Provider != "p1" || got.Model != "m1" {
					t.Errorf("%s: %+v, want text %.40q, failure %q", c.name, got, c.text, c.failure)
				}
				if c.name == "prose" {
					req := srv.LastRequest()
					if req.Schema != nil || req.System != "describe" || !strings.Contains(req.User, "SELECT 1") || req.MaxTokens != llm.DefaultWriterMaxTokens {
						t.Errorf("request %+v: want no schema, the prompt, %d tokens", req, llm.DefaultWriterMaxTokens)
					}
				}
			}
		})
	}
}
