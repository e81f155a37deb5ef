// Package llmtest runs scripted provider servers for tests: httptest servers
// that speak the real OpenAI chat-completions API (POST /v1/chat/completions)
// and the real Anthropic messages API (POST /v1/messages) as the official Go
// SDKs call them, and answer according to a Behaviour.
//
// A Behaviour sees a provider-neutral Request (system text, user text, the
// nonce found in the prompt, the schema sent, the decoded body) and returns a
// provider-neutral Response (answer text, refusal, truncation, HTTP status,
// latency, hang), which each server renders in its own wire format.
package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is what a scripted server received, decoded.
type Request struct {
	// Path is the request path, e.g. "/v1/chat/completions".
	Path string
	// Header is the request's headers (Authorization, anthropic-version...).
	Header http.Header
	// Model is the "model" field.
	Model string
	// System is the system text: OpenAI system/developer messages, or
	// Anthropic's "system" field, joined with newlines.
	System string
	// User is the text of the user messages, joined with newlines.
	User string
	// Nonce is the nonce stated in the prompt ("nonce: <value>", System
	// first, then User), else the schema's nonce const, else "".
	Nonce string
	// Schema is the JSON schema sent for structured output (OpenAI
	// response_format.json_schema.schema, Anthropic output_config.format.schema),
	// nil if none was sent.
	Schema map[string]any
	// MaxTokens is max_completion_tokens, max_tokens, or 0.
	MaxTokens int
	// Body is the whole decoded JSON body.
	Body map[string]any
}

// Response is what a Behaviour wants the server to answer.
type Response struct {
	// Text is the answer text (the message content).
	Text string
	// Status, when not 0 or 200, makes the server answer with that HTTP status
	// and the provider's error envelope.
	Status int
	// Refusal, when non-empty, is a refusal (OpenAI message.refusal; Anthropic
	// stop_reason "refusal" with this explanation).
	Refusal string
	// Truncated marks the answer as cut by the token limit (OpenAI
	// finish_reason "length"; Anthropic stop_reason "max_tokens").
	Truncated bool
	// Delay is waited before answering (cut short if the client goes away).
	Delay time.Duration
	// Hang never answers: the handler waits until the client gives up or
	// the server closes.
	Hang bool
	// RawBody, when non-empty, is sent verbatim as the response body with
	// Status (default 200) and Content-Type application/json, instead of
	// the rendered envelope.
	RawBody string
	// Reset drops the connection without an answer: a TCP reset (RST)
	// where the platform allows it, as a crashed or overloaded peer does.
	Reset bool
	// Cut sends the rendered answer's headers (its full Content-Length)
	// and only the first half of its body, then closes the connection.
	Cut bool
}

// Behaviour decides a scripted server's answer to one request.
type Behaviour func(req Request) Response

// Server is a scripted provider server.
type Server struct {
	// URL is the base URL to put in llm.ProviderConfig.BaseURL: it ends in
	// /v1 for OpenAI (the SDK appends chat/completions) and is the server
	// root for Anthropic (the SDK appends v1/messages).
	URL string

	srv    *httptest.Server
	b      Behaviour
	stop   chan struct{}
	render renderer

	mu    sync.Mutex
	count int
	last  Request
	all   []Request
}

// renderer is the provider-specific half of a server.
type renderer interface {
	path() string
	decode(body map[string]any, req *Request) error
	check(r *http.Request) (status int, msg string) // header checks; 0 if fine
	writeError(w http.ResponseWriter, status int, msg string)
	writeAnswer(w http.ResponseWriter, req Request, resp Response)
}

// NewOpenAI starts a scripted OpenAI-compatible server, closed when the test
// ends.
func NewOpenAI(t testing.TB, b Behaviour) *Server {
	return start(t, b, openAIRenderer{}, "/v1")
}

// NewAnthropic starts a scripted Anthropic server, closed when the test ends.
func NewAnthropic(t testing.TB, b Behaviour) *Server {
	return start(t, b, anthropicRenderer{}, "")
}

func start(t testing.TB, b Behaviour, r renderer, suffix string) *Server {
	t.Helper()
	if b == nil {
		t.Fatal("llmtest: nil Behaviour")
	}
	s := &Server{b: b, stop: make(chan struct{}), render: r}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + suffix
	t.Cleanup(func() {
		close(s.stop) // release hanging handlers first: Close waits for them
		s.srv.Close()
	})
	return s
}

// Requests returns how many well-formed API requests the server received.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// LastRequest returns the last well-formed API request, or the zero Request.
func (s *Server) LastRequest() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// AllRequests returns every well-formed API request, in the order received.
func (s *Server) AllRequests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.all...)
}

// maxRequestBytes bounds a request body; juror prompts are small.
const maxRequestBytes = 4 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != s.render.path() {
		s.render.writeError(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
		return
	}
	if status, msg := s.render.check(r); status != 0 {
		s.render.writeError(w, status, msg)
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes))
	if err != nil {
		s.render.writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil || body == nil {
		s.render.writeError(w, http.StatusBadRequest, "body is not a JSON object")
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	req.Model, _ = body["model"].(string)
	if err := s.render.decode(body, &req); err != nil {
		s.render.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	req.Nonce = findNonce(req.System, req.User, req.Schema)

	s.mu.Lock()
	s.count++
	s.last = req
	s.all = append(s.all, req)
	s.mu.Unlock()

	resp := s.b(req)
	if resp.Hang {
		s.wait(r.Context(), -1)
		return
	}
	if resp.Delay > 0 && !s.wait(r.Context(), resp.Delay) {
		return
	}
	switch {
	case resp.Reset:
		reset(w)
	case resp.Cut:
		rec := httptest.NewRecorder()
		s.render.writeAnswer(rec, req, resp)
		cut(w, rec)
	case resp.RawBody != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(statusOr200(resp.Status))
		_, _ = io.WriteString(w, resp.RawBody)
	case resp.Status != 0 && resp.Status != http.StatusOK:
		s.render.writeError(w, resp.Status, "scripted failure")
	default:
		s.render.writeAnswer(w, req, resp)
	}
}

// reset closes the connection under the handler, with SO_LINGER 0 so the
// kernel sends RST rather than FIN.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not hijackable: abort the response
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// cut writes rec's status line and headers, its full Content-Length, and
// the first half of its body, then closes the connection.
func cut(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	body := rec.Body.Bytes()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", rec.Code, http.StatusText(rec.Code))
	h := rec.Header().Clone()
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_ = h.Write(buf)
	_, _ = buf.WriteString("\r\n")
	_, _ = buf.Write(body[:len(body)/2])
	_ = buf.Flush()
}

// wait blocks for d (forever if d < 0) or until the client or the server
// goes away; it reports whether the full d elapsed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return true
	case <-ctx.Done():
	case <-s.stop:
	}
	return false
}

func statusOr200(s int) int {
	if s == 0 {
		return http.StatusOK
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// messageText flattens a message "content": a string, or an array of parts
// whose text parts are joined.
func messageText(content any) (string, error) {
	switch c := content.(type) {
	case nil:
		return "", nil
	case string:
		return c, nil
	case []any:
		var sb strings.Builder
		for _, p := range c {
			part, ok := p.(map[string]any)
			if !ok {
				return "", fmt.Errorf("content part is not an object")
			}
			if part["type"] == "text" {
				text, _ := part["text"].(string)
				sb.WriteString(text)
			}
		}
		return sb.String(), nil
	}
	return "", fmt.Errorf("content is neither a string nor an array")
}

func intField(v any) int {
	if n, ok := v.(json.Number); ok {
		i, err := n.Int64()
		if err == nil {
			return int(i)
		}
	}
	return 0
}

func joinNonEmpty(parts []string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}
