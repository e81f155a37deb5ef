package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// newAnthropicSender speaks the Anthropic messages API (POST
// BaseURL/v1/messages) through the official SDK. Structured output uses
// output_config.format (json_schema), which the SDK supports directly, so
// the answer arrives as one text block like OpenAI's.
func newAnthropicSender(cfg ProviderConfig, key string, hc *http.Client) sendFunc {
	opts := []option.RequestOption{
		// No ANTHROPIC_* variables, profiles or federation from the
		// environment: the key comes from getenv(APIKeyEnv) only.
		option.WithoutEnvironmentDefaults(),
		option.WithHTTPClient(hc),
		option.WithBaseURL(cfg.BaseURL),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithRequestTimeout(cfg.Timeout),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	client := anthropic.NewClient(opts...)
	model := cfg.Model

	return func(ctx context.Context, c request) (reply, error) {
		params := anthropic.MessageNewParams{
			Model:     anthropic.Model(model),
			MaxTokens: int64(c.maxTokens),
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(c.user))},
		}
		if c.system != "" {
			params.System = []anthropic.TextBlockParam{{Text: c.system}}
		}
		var reqOpts []option.RequestOption
		if c.temperature != nil {
			// This SDK's params have no temperature field; the API takes it.
			reqOpts = append(reqOpts, option.WithJSONSet("temperature", *c.temperature))
		}
		if c.schema != nil {
			params.OutputConfig = anthropic.OutputConfigParam{
				Format: anthropic.JSONOutputFormatParam{Schema: c.schema},
			}
		}
		res, err := client.Messages.New(ctx, params, reqOpts...)
		if err != nil {
			var apiErr *anthropic.Error
			if errors.As(err, &apiErr) {
				return reply{}, &statusError{code: apiErr.StatusCode, errType: truncateUTF8(string(apiErr.Type()), 64)}
			}
			return reply{}, err
		}
		return anthropicReply(res), nil
	}
}

// anthropicReply checks the envelope: a normal stop, and exactly one text
// block besides any thinking blocks.
func anthropicReply(res *anthropic.Message) reply {
	if res == nil {
		return reply{failure: FailureMalformed + ": no message"}
	}
	var texts []string
	other := ""
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "thinking", "redacted_thinking":
		default:
			if other == "" {
				other = b.Type
			}
		}
	}
	joined := strings.Join(texts, "")
	r := reply{raw: joined}
	if len(texts) == 1 {
		r.text = texts[0]
	}
	switch {
	case res.StopReason == anthropic.StopReasonRefusal:
		r.failure = FailureRefusal
		if res.StopDetails.Explanation != "" {
			r.raw = res.StopDetails.Explanation
		}
	case res.StopReason == anthropic.StopReasonMaxTokens:
		r.failure = FailureTruncated + ": stop_reason max_tokens"
	case res.StopReason == anthropic.StopReasonModelContextWindowExceeded:
		r.failure = FailureTruncated + ": stop_reason model_context_window_exceeded"
	case res.StopReason != anthropic.StopReasonEndTurn && res.StopReason != anthropic.StopReasonStopSequence:
		r.failure = fmt.Sprintf("%s: stop_reason %q", FailureMalformed, truncateUTF8(string(res.StopReason), 64))
	case other != "":
		r.failure = fmt.Sprintf("%s: %q block instead of an answer", FailureMalformed, truncateUTF8(other, 64))
	case len(texts) == 0:
		r.failure = FailureEmpty
	case len(texts) > 1:
		r.failure = fmt.Sprintf("%s: %d text blocks, want 1", FailureMalformed, len(texts))
	}
	return r
}
