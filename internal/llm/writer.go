package llm

import (
	"context"
	"fmt"
	"strings"
)

// Writer makes free-text calls: the Leadsman's advisory notes. Unlike a
// Juror's answer, a Writer's text is never parsed into anything: it is
// stored and shown to humans as untrusted text, and no decision reads it.
type Writer interface {
	// Provider is the configured provider name.
	Provider() string
	// Model is the configured model.
	Model() string
	// Write makes one call. It never returns an error and never panics:
	// failures are Failed texts.
	Write(ctx context.Context, p Prompt) Text
}

// Prompt is one free-text question.
type Prompt struct {
	// System is the instructions (trusted: from the caller's code).
	System string
	// User is the material, untrusted text in delimited blocks.
	User string
	// MaxTokens bounds the answer. Defaults to DefaultWriterMaxTokens.
	MaxTokens int
}

// DefaultWriterMaxTokens is Prompt.MaxTokens when unset.
const DefaultWriterMaxTokens = 400

// MaxTextBytes bounds Text.Text.
const MaxTextBytes = 4 << 10

// Text is the result of one Write: the model's text, or why there is none.
type Text struct {
	// Outcome is Answered when Text holds the model's text.
	Outcome Outcome
	// Text is the answer as received, valid UTF-8, at most MaxTextBytes.
	// Untrusted.
	Text string
	// Failure says why the call failed, beginning with a Failure* constant.
	Failure  string
	Provider string
	Model    string
}

// NewWriter validates cfg and returns a Writer for it. Structured output
// is never requested (there is no schema for prose); StructuredOutput is
// ignored.
func NewWriter(cfg ProviderConfig, getenv func(string) string) (Writer, error) {
	off := false
	cfg.StructuredOutput = &off
	j, err := newJuror(cfg, getenv, nil)
	if err != nil {
		return nil, err
	}
	return (*writer)(j), nil
}

type writer juror

func (w *writer) Provider() string { return w.cfg.Name }
func (w *writer) Model() string    { return w.cfg.Model }

func (w *writer) Write(ctx context.Context, p Prompt) (t Text) {
	t = Text{Outcome: Failed, Provider: w.cfg.Name, Model: w.cfg.Model}
	defer func() {
		if r := recover(); r != nil {
			t.Outcome, t.Text = Failed, ""
			t.Failure = fmt.Sprintf("%s: panic: %v", FailureInternal, r)
		}
	}()
	if p.MaxTokens == 0 {
		p.MaxTokens = DefaultWriterMaxTokens
	}
	if p.MaxTokens < 0 || p.MaxTokens > maxCallTokens {
		t.Failure = fmt.Sprintf("%s: MaxTokens must be between 1 and %d", FailureInvalidCall, maxCallTokens)
		return t
	}
	if err := ctx.Err(); err != nil {
		t.Failure = FailureCanceled + ": " + err.Error()
		return t
	}
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	r, err := w.send(callCtx, request{system: p.System, user: p.User, maxTokens: p.MaxTokens})
	switch {
	case err != nil:
		t.Failure = (*juror)(w).classify(ctx, callCtx, err)
	case r.failure != "":
		t.Failure = r.failure
	case strings.TrimSpace(r.text) == "":
		t.Failure = FailureEmpty
	default:
		t.Outcome, t.Text = Answered, truncateUTF8(strings.TrimSpace(r.text), MaxTextBytes)
	}
	return t
}
