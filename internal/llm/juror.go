package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// reply is what a provider sent back, before strict parsing.
type reply struct {
	text    string // the answer text to parse
	raw     string // what Answer.Raw records (text, or the refusal)
	failure string // non-empty: the reply is itself a failure (refusal, truncated, tool call...)
}

// statusError is an HTTP error status from a provider's API.
type statusError struct {
	code    int
	errType string // the provider's error type, if it gave one
}

func (e *statusError) Error() string {
	if e.errType != "" {
		return fmt.Sprintf("status %d (%q)", e.code, e.errType)
	}
	return fmt.Sprintf("status %d", e.code)
}

// request is one provider call, for either kind of question.
type request struct {
	system, user string
	maxTokens    int
	schemaName   string
	schema       map[string]any // nil: no structured output
	temperature  *float64       // nil: the provider's default
}

// sendFunc makes one provider call. It returns a statusError for an HTTP
// error status and the SDK's error for anything else.
type sendFunc func(ctx context.Context, r request) (reply, error)

// juror is the Juror for both provider kinds; send is the provider part.
type juror struct {
	cfg       ProviderConfig
	transport *http.Transport
	send      sendFunc
}

func (j *juror) Provider() string { return j.cfg.Name }
func (j *juror) Model() string    { return j.cfg.Model }

// Judge makes one call. Every path that is not exactly one valid verdict is
// a Failed answer; a panic below is recovered into one.
func (j *juror) Judge(ctx context.Context, c Call) (a Answer) {
	start := j.cfg.Clock()
	a = Answer{Outcome: Failed, Provider: j.cfg.Name, Model: j.cfg.Model}
	defer func() {
		if p := recover(); p != nil {
			a.Outcome, a.Verdict = Failed, ""
			a.Failure = fmt.Sprintf("%s: panic: %v", FailureInternal, p)
		}
		a.Latency = j.cfg.Clock().Sub(start)
	}()

	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	switch {
	case !validNonce(c.Nonce):
		a.Failure = FailureInvalidCall + ": nonce must be 8 to 128 characters of [A-Za-z0-9_-]"
		return a
	case c.MaxTokens < 0 || c.MaxTokens > maxCallTokens:
		a.Failure = fmt.Sprintf("%s: MaxTokens must be between 1 and %d", FailureInvalidCall, maxCallTokens)
		return a
	}
	if err := ctx.Err(); err != nil {
		a.Failure = FailureCanceled + ": " + err.Error()
		return a
	}

	callCtx, cancel := context.WithTimeout(ctx, j.cfg.Timeout)
	defer cancel()
	req := request{system: c.System, user: c.User, maxTokens: c.MaxTokens}
	if *j.cfg.StructuredOutput {
		req.schemaName, req.schema = "verdict", VerdictSchema(c.Nonce)
	}
	r, err := j.send(callCtx, req)
	a.Raw = truncateUTF8(r.raw, MaxRawBytes)
	if err != nil {
		a.Failure = j.classify(ctx, callCtx, err)
		return a
	}
	if r.failure != "" {
		a.Failure = r.failure
		return a
	}
	v, failure := ParseAnswer(r.text, c.Nonce)
	if failure != "" {
		a.Failure = failure
		return a
	}
	a.Outcome, a.Verdict = Answered, v
	return a
}

// classify turns a send error into a Failure.
func (j *juror) classify(ctx, callCtx context.Context, err error) string {
	var se *statusError
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		return FailureCanceled + ": " + ctx.Err().Error()
	case errors.Is(callCtx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%s: no answer within %s", FailureTimeout, j.cfg.Timeout)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("%s: %s", FailureTimeout, truncateUTF8(err.Error(), 256))
	case errors.As(err, &se):
		return FailureHTTP + ": " + se.Error()
	}
	return FailureTransport + ": " + truncateUTF8(err.Error(), 256)
}
