package llm

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Verdict is one of the two values a juror may answer.
type Verdict string

// The two verdicts. There is no third: a juror cannot deny, and anything that
// is not exactly one of these is a Failed answer.
const (
	Conforms Verdict = "CONFORMS"
	Refer    Verdict = "REFER"
)

// Call is one juror question.
type Call struct {
	// System is the framing's instructions (trusted: from the prompt bundle).
	System string
	// User is the material, with untrusted text in delimited blocks (built by
	// the caller). The caller states the nonce ("nonce: <value>") in System or
	// User so the model can echo it.
	User string
	// Nonce is the per-request random constant the answer must echo. Make it
	// with NewNonce; it must be 8 to 128 characters of [A-Za-z0-9_-].
	Nonce string
	// MaxTokens bounds the answer. Defaults to 64.
	MaxTokens int
}

// DefaultMaxTokens is Call.MaxTokens when unset.
const DefaultMaxTokens = 64

// Outcome says whether the model gave exactly one valid verdict.
type Outcome string

// The two outcomes.
const (
	Answered Outcome = "answered"
	Failed   Outcome = "failed"
)

// Answer is the result of one juror call. It is a value, never an error.
type Answer struct {
	// Outcome is Failed when the model did not give exactly one valid verdict.
	Outcome Outcome
	// Verdict is meaningful only when Outcome is Answered. Callers treat every
	// Failed answer as refer.
	Verdict Verdict
	// Failure says why the call failed; it begins with one of the Failure*
	// constants, optionally followed by ": " and detail. Empty when Answered.
	Failure string
	// Provider is the configured provider name (ProviderConfig.Name).
	Provider string
	// Model is the configured model.
	Model string
	// Latency is the wall time of the call, measured with ProviderConfig.Clock.
	Latency time.Duration
	// Raw is the answer text (or refusal text) as received, truncated to 2 KiB
	// at a UTF-8 boundary. Untrusted.
	Raw string
}

// Failure kinds: Answer.Failure begins with one of these.
const (
	FailureInvalidCall = "invalid call" // the Call itself is unusable (bad nonce, negative MaxTokens)
	FailureHTTP        = "http error"   // the provider answered with an HTTP error status
	FailureTransport   = "transport"    // connection, proxy, TLS, body too large, undecodable envelope
	FailureTimeout     = "timeout"      // no answer within ProviderConfig.Timeout
	FailureCanceled    = "canceled"     // the caller's context ended first
	FailureRefusal     = "refusal"      // the model refused (OpenAI message.refusal, Anthropic stop_reason "refusal")
	FailureTruncated   = "truncated"    // the answer hit the token limit
	FailureEmpty       = "empty"        // no answer text
	FailureMalformed   = "malformed"    // text that is not exactly the verdict object
	FailureWrongNonce  = "wrong nonce"  // the verdict object echoed a different nonce
	FailureInternal    = "internal"     // a bug (a recovered panic): still a refer
)

// MaxRawBytes bounds Answer.Raw.
const MaxRawBytes = 2 << 10

// Juror makes juror calls against one provider and model.
type Juror interface {
	// Provider is the configured provider name, used for panel diversity.
	Provider() string
	// Model is the configured model.
	Model() string
	// Judge makes one call. It never returns an error and never panics:
	// failures are Failed answers, and callers treat them as refer.
	Judge(ctx context.Context, c Call) Answer
}

// Provider kinds.
const (
	KindOpenAI    = "openai"    // OpenAI and OpenAI-compatible servers (vLLM, llama.cpp server, Ollama)
	KindAnthropic = "anthropic" // Anthropic messages API
)

// Default base URLs by kind.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
)

// DefaultTimeout is ProviderConfig.Timeout when unset.
const DefaultTimeout = 20 * time.Second

// Limits on configuration values.
const (
	maxTimeout    = 10 * time.Minute
	maxRetries    = 10
	maxNameLen    = 64
	maxCallTokens = 1 << 16
)

// ProviderConfig configures one juror provider.
type ProviderConfig struct {
	// Name identifies the provider in answers, logs and panel diversity
	// counting. Required; 1 to 64 characters of [A-Za-z0-9._-].
	Name string
	// Kind is KindOpenAI or KindAnthropic. Required.
	Kind string
	// BaseURL is the API base. Defaults to DefaultOpenAIBaseURL or
	// DefaultAnthropicBaseURL by Kind. For OpenAI-compatible servers it
	// includes the /v1 prefix (the client posts to BaseURL + "/chat/completions");
	// for Anthropic it does not (the client posts to BaseURL + "/v1/messages").
	// http or https, no user info, query or fragment.
	BaseURL string
	// Model is the model name sent to the provider. Required.
	Model string
	// APIKeyEnv names the environment variable holding the API key, read once
	// through New's getenv. Empty means no key (local servers); when set, the
	// variable must be non-empty.
	APIKeyEnv string
	// Timeout bounds one Judge call, retries included. Defaults to 20s; at
	// most 10m.
	Timeout time.Duration
	// Proxy is the HTTP proxy URL for egress (http, https or socks5).
	// Defaults to none. Explicit only: environment proxies are never used.
	Proxy string
	// StructuredOutput requests the verdict JSON schema from the provider
	// (OpenAI response_format json_schema strict; Anthropic output_config
	// format json_schema). Defaults to true; some servers need it off. Strict
	// local parsing applies either way.
	StructuredOutput *bool
	// MaxRetries is the SDK's retry count. Defaults to 0: a failure is a
	// refer, not a retry. At most 10.
	MaxRetries int
	// Clock measures Answer.Latency. Defaults to time.Now.
	Clock func() time.Time
}

// WithDefaults returns c with unset fields filled.
func (c ProviderConfig) WithDefaults() ProviderConfig {
	if c.BaseURL == "" {
		switch c.Kind {
		case KindOpenAI:
			c.BaseURL = DefaultOpenAIBaseURL
		case KindAnthropic:
			c.BaseURL = DefaultAnthropicBaseURL
		}
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.StructuredOutput == nil {
		on := true
		c.StructuredOutput = &on
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	return c
}

// ConfigError is returned by New for an invalid ProviderConfig. Field names
// the offending ProviderConfig field.
type ConfigError struct {
	Provider string
	Field    string
	Reason   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("llm: provider %q: %s: %s", e.Provider, e.Field, e.Reason)
}

func (c ProviderConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Provider: c.Name, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if c.Name == "" {
		return bad("Name", "required")
	}
	if len(c.Name) > maxNameLen || !isToken(c.Name, ".-_") {
		return bad("Name", "must be 1 to %d characters of [A-Za-z0-9._-]", maxNameLen)
	}
	if c.Kind != KindOpenAI && c.Kind != KindAnthropic {
		return bad("Kind", "must be %q or %q, got %q", KindOpenAI, KindAnthropic, c.Kind)
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil:
		return bad("BaseURL", "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("BaseURL", "scheme must be http or https")
	case u.Host == "":
		return bad("BaseURL", "no host")
	case u.User != nil:
		return bad("BaseURL", "must not carry user info (use APIKeyEnv)")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return bad("BaseURL", "must not carry a query or fragment")
	}
	if c.Model == "" {
		return bad("Model", "required")
	}
	if !utf8.ValidString(c.Model) || strings.ContainsFunc(c.Model, isControl) {
		return bad("Model", "must be printable UTF-8")
	}
	if c.APIKeyEnv != "" && !isToken(c.APIKeyEnv, "_") {
		return bad("APIKeyEnv", "must be an environment variable name")
	}
	if c.Timeout < 0 || c.Timeout > maxTimeout {
		return bad("Timeout", "must be between 0 (default %s) and %s", DefaultTimeout, maxTimeout)
	}
	if c.Proxy != "" {
		p, err := url.Parse(c.Proxy)
		switch {
		case err != nil:
			return bad("Proxy", "not a URL: %v", err)
		case p.Scheme != "http" && p.Scheme != "https" && p.Scheme != "socks5":
			return bad("Proxy", "scheme must be http, https or socks5")
		case p.Host == "":
			return bad("Proxy", "no host")
		}
	}
	if c.MaxRetries < 0 || c.MaxRetries > maxRetries {
		return bad("MaxRetries", "must be between 0 and %d", maxRetries)
	}
	return nil
}

// New validates cfg (after WithDefaults) and returns a Juror for it. getenv
// is the only source of the API key; it may be nil when APIKeyEnv is empty.
// Errors are *ConfigError naming the field.
func New(cfg ProviderConfig, getenv func(string) string) (Juror, error) {
	j, err := newJuror(cfg, getenv, nil)
	if err != nil {
		return nil, err // not a nil *juror in a non-nil Juror
	}
	return j, nil
}

// newJuror is New with a dialer (nil: the default), so in-package tests can
// see where connections go.
func newJuror(cfg ProviderConfig, getenv func(string) string, dial dialFunc) (*juror, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var key string
	if cfg.APIKeyEnv != "" {
		if getenv == nil {
			return nil, &ConfigError{Provider: cfg.Name, Field: "APIKeyEnv", Reason: "set, but no getenv given"}
		}
		key = getenv(cfg.APIKeyEnv)
		if key == "" {
			return nil, &ConfigError{Provider: cfg.Name, Field: "APIKeyEnv", Reason: fmt.Sprintf("environment variable %s is empty or unset", cfg.APIKeyEnv)}
		}
		if strings.ContainsFunc(key, isControl) {
			return nil, &ConfigError{Provider: cfg.Name, Field: "APIKeyEnv", Reason: fmt.Sprintf("environment variable %s holds control characters", cfg.APIKeyEnv)}
		}
	}
	hc, tr := newHTTPClient(cfg, dial)
	j := &juror{cfg: cfg, transport: tr}
	switch cfg.Kind {
	case KindOpenAI:
		j.send = newOpenAISender(cfg, key, hc)
	case KindAnthropic:
		j.send = newAnthropicSender(cfg, key, hc)
	}
	return j, nil
}

// NewNonce returns a fresh random nonce: 22 characters of [A-Za-z0-9_-]
// (128 bits).
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Nonce limits; NewNonce's output is within them.
const (
	minNonceLen = 8
	maxNonceLen = 128
)

func validNonce(n string) bool {
	return len(n) >= minNonceLen && len(n) <= maxNonceLen && isToken(n, "_-")
}

// isToken reports whether s is non-empty ASCII letters, digits and extra.
func isToken(s, extra string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') || ('0' <= b && b <= '9') || strings.IndexByte(extra, b) >= 0 {
			continue
		}
		return false
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// truncateUTF8 cuts s to at most n bytes without splitting a rune, and
// replaces invalid UTF-8 so the result is safe to log.
func truncateUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n {
		s = s[:n]
		for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
			r, size := utf8.DecodeLastRuneInString(s)
			if r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	return s
}
