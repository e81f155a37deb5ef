package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// newOpenAISender speaks OpenAI chat completions (POST BaseURL/chat/completions)
// through the official SDK. The service is built from explicit options only:
// openai.NewClient would also read OPENAI_* from the environment.
func newOpenAISender(cfg ProviderConfig, key string, hc *http.Client) sendFunc {
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithBaseURL(cfg.BaseURL),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithRequestTimeout(cfg.Timeout),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	svc := openai.NewChatCompletionService(opts...)
	model := cfg.Model

	return func(ctx context.Context, c request) (reply, error) {
		params := openai.ChatCompletionNewParams{
			Model: shared.ChatModel(model),
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage(c.system),
				openai.UserMessage(c.user),
			},
			// max_completion_tokens, not the deprecated max_tokens that
			// OpenAI's reasoning models reject; vLLM accepts it, and a server
			// that ignores it is still bounded by the timeout.
			MaxCompletionTokens: openai.Int(int64(c.maxTokens)),
		}
		if c.temperature != nil {
			params.Temperature = openai.Float(*c.temperature)
		}
		if c.schema != nil {
			params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
				OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
					JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
						Name:   c.schemaName,
						Strict: openai.Bool(true),
						Schema: c.schema,
					},
				},
			}
		}
		res, err := svc.New(ctx, params)
		if err != nil {
			var apiErr *openai.Error
			if errors.As(err, &apiErr) {
				return reply{}, &statusError{code: apiErr.StatusCode, errType: truncateUTF8(apiErr.Type, 64)}
			}
			return reply{}, err
		}
		return openAIReply(res), nil
	}
}

// openAIReply checks the envelope: one choice, no refusal, no tool call, not
// cut off by the token limit.
func openAIReply(res *openai.ChatCompletion) reply {
	if res == nil || len(res.Choices) != 1 {
		n := 0
		if res != nil {
			n = len(res.Choices)
		}
		return reply{failure: fmt.Sprintf("%s: %d choices, want 1", FailureMalformed, n)}
	}
	ch := res.Choices[0]
	msg := ch.Message
	r := reply{text: msg.Content, raw: msg.Content}
	switch {
	case msg.Refusal != "":
		r.raw = msg.Refusal
		r.failure = FailureRefusal
	case ch.FinishReason == "content_filter":
		r.failure = FailureRefusal + ": content_filter"
	case ch.FinishReason == "length":
		r.failure = FailureTruncated + ": finish_reason length"
	case len(msg.ToolCalls) > 0 || msg.FunctionCall.Name != "":
		r.failure = FailureMalformed + ": tool call instead of an answer"
	case ch.FinishReason != "stop" && ch.FinishReason != "":
		r.failure = fmt.Sprintf("%s: finish_reason %q", FailureMalformed, truncateUTF8(ch.FinishReason, 64))
	}
	return r
}
