package llm

import (
	"context"
	"fmt"
	"time"
)

// Question is one structured question for CoVer (decompose, label,
// synthesize): the answer is a JSON object under Schema, which the caller
// parses strictly. Unlike a juror Call it carries no nonce: the material
// is the operator's own sentence and catalog, and the caller treats any
// answer that does not parse as a failure.
type Question struct {
	System string
	User   string
	// SchemaName and Schema request structured output where the provider
	// is configured for it (ProviderConfig.StructuredOutput).
	SchemaName string
	Schema     map[string]any
	// MaxTokens bounds the answer. Required: 1 to 65536.
	MaxTokens int
	// Temperature, when set, is sent (CoVer sends 0).
	Temperature *float64
}

// Reply is the answer to a Question: Text when Failure is empty. A value,
// never an error.
type Reply struct {
	Text     string
	Failure  string
	Provider string
	Model    string
	Latency  time.Duration
}

// Asker asks structured questions of one provider and model.
type Asker interface {
	Provider() string
	Model() string
	// Ask makes one call. It never returns an error and never panics:
	// failures are in Reply.Failure, and callers fail closed on them.
	Ask(ctx context.Context, p Question) Reply
}

// NewAsker is New for structured questions.
func NewAsker(cfg ProviderConfig, getenv func(string) string) (Asker, error) {
	j, err := newJuror(cfg, getenv, nil)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Ask makes one structured call; every path that is not an answer text is
// a Failure.
func (j *juror) Ask(ctx context.Context, p Question) (rep Reply) {
	start := j.cfg.Clock()
	rep = Reply{Provider: j.cfg.Name, Model: j.cfg.Model}
	defer func() {
		if x := recover(); x != nil {
			rep.Text = ""
			rep.Failure = fmt.Sprintf("%s: panic: %v", FailureInternal, x)
		}
		rep.Latency = j.cfg.Clock().Sub(start)
	}()
	if p.MaxTokens < 1 || p.MaxTokens > maxCallTokens {
		rep.Failure = fmt.Sprintf("%s: MaxTokens must be between 1 and %d", FailureInvalidCall, maxCallTokens)
		return rep
	}
	if err := ctx.Err(); err != nil {
		rep.Failure = FailureCanceled + ": " + err.Error()
		return rep
	}
	callCtx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	req := request{system: p.System, user: p.User, maxTokens: p.MaxTokens, temperature: p.Temperature}
	if *j.cfg.StructuredOutput && p.Schema != nil {
		req.schemaName, req.schema = p.SchemaName, p.Schema
	}
	r, err := j.send(callCtx, req)
	if err != nil {
		rep.Failure = j.classify(ctx, callCtx, err)
		return rep
	}
	if r.failure != "" {
		rep.Failure = r.failure
		return rep
	}
	if r.text == "" {
		rep.Failure = FailureEmpty
		return rep
	}
	rep.Text = r.text
	return rep
}
