package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
)

// ClientConfig configures the stdio server, which forwards every tool call
// to a running Harbormaster's HTTP API with one agent token.
type ClientConfig struct {
	// Server is the API's base URL, e.g. http://127.0.0.1:8080. Required.
	Server string
	// Token is the agent's bearer token. Required.
	Token string
	// HTTPClient defaults to a client with a timeout above MaxWait.
	HTTPClient *http.Client
	// Clock bounds request_status's wait. Defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger. Never stdout: that is the protocol.
	Logger *slog.Logger
}

// maxResponseBytes caps an API response the stdio server reads.
const maxResponseBytes = 32 << 20

// WithDefaults fills unset fields.
func (c ClientConfig) WithDefaults() ClientConfig {
	c.Server = strings.TrimRight(strings.TrimSpace(c.Server), "/")
	c.Token = strings.TrimSpace(c.Token)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: MaxWait + 30*time.Second}
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c ClientConfig) validate() error {
	u, err := url.Parse(c.Server)
	switch {
	case c.Server == "":
		return errors.New("mcpserver: Server is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("mcpserver: Server %q is not an http(s) URL", c.Server)
	case c.Token == "":
		return errors.New("mcpserver: Token is required")
	case strings.ContainsAny(c.Token, " \t\r\n"):
		return errors.New("mcpserver: Token contains white space")
	}
	return nil
}

// ServeStdio speaks MCP on in and out until in closes or ctx ends. It first
// checks the token against the server: a refused token is ErrUnauthorized
// before any MCP traffic; an unreachable server is only logged, since the
// client may start before the server does.
func ServeStdio(ctx context.Context, cfg ClientConfig, in io.Reader, out io.Writer) error {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	api := &apiBackend{cfg: cfg}
	if _, err := api.Delegations(ctx); errors.Is(err, ErrUnauthorized) {
		return err
	} else if err != nil {
		cfg.Logger.Warn("the server did not answer; tool calls will be retried against it", "server", cfg.Server, "err", err)
	}
	server := newServer(Version, func(*mcp.CallToolRequest) (backend, error) { return api, nil }, cfg.Logger)
	err := server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if err != nil && (errors.Is(err, io.EOF) || ctx.Err() != nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcpserver: stdio: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// apiError is an error body of the HTTP API that maps to no gateway error.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("the server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// apiBackend is the stdio server's backend: the HTTP API of a running
// server, as the token's principal.
type apiBackend struct {
	cfg ClientConfig
}

// do sends one API request and decodes a 200 answer into out. Error bodies
// become the gateway's errors, so both backends read alike.
func (b *apiBackend) do(ctx context.Context, method, path string, body, out any) error {
	return b.doKey(ctx, method, path, "", body, out)
}

// errTransport marks a request whose answer never arrived.
type errTransport struct{ error }

func (e errTransport) Unwrap() error { return e.error }

// doKey is do with an Idempotency-Key ("" for none).
func (b *apiBackend) doKey(ctx context.Context, method, path, key string, body, out any) error {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.cfg.Server+path, rd)
	if err != nil {
		return fmt.Errorf("mcpserver: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.cfg.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idempotencyKeyHeader, key)
	}
	resp, err := b.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errTransport{fmt.Errorf("cannot reach the Harbormaster server at %s: %w", b.cfg.Server, err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("mcpserver: %s %s: reading the answer: %w", method, path, err)
	}
	if len(raw) > maxResponseBytes {
		return fmt.Errorf("mcpserver: %s %s: the answer is over %d bytes", method, path, maxResponseBytes)
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("mcpserver: %s %s: the answer is not the expected JSON: %w", method, path, err)
		}
		return nil
	}
	var e struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	code, msg := e.Error.Code, e.Error.Message
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w (%s)", ErrUnauthorized, msg)
	case strings.HasPrefix(code, "sql_"):
		return &gateway.SQLError{RequestID: e.Error.RequestID, Code: strings.TrimPrefix(code, "sql_"), Message: msg}
	case resp.StatusCode == http.StatusTooManyRequests && (code == gateway.FloodReferralRate || code == gateway.FloodTooManyWait):
		return &gateway.FloodError{RequestID: e.Error.RequestID, Code: code, Message: msg}
	case code == "unknown_target":
		return fmt.Errorf("%w: %s", gateway.ErrUnknownTarget, msg)
	case code == "not_found" && resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s", gateway.ErrNotFound, msg)
	case code == "logbook_unavailable":
		return fmt.Errorf("%w: %s", gateway.ErrLogUnavailable, msg)
	}
	return &apiError{Status: resp.StatusCode, Code: code, Message: msg}
}

// Submit sends the statement under a fresh Idempotency-Key and, when the
// answer is lost on the way (the connection broke), sends it again under
// the same key: the server runs it once and answers the retry with the
// first answer, or says it is still running.
func (b *apiBackend) Submit(ctx context.Context, target, sql string) (*gateway.Response, error) {
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := "mcp-" + hex.EncodeToString(k[:])
	body := map[string]string{"target": target, "sql": sql}
	var r gateway.Response
	err := b.doKey(ctx, http.MethodPost, "/v1/statements", key, body, &r)
	for i := 0; i < submitRetries && retryable(err); i++ {
		b.cfg.Logger.Warn("run_sql: retrying under the same Idempotency-Key", "err", err)
		t := time.NewTimer(time.Duration(i+1) * 500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		r = gateway.Response{}
		err = b.doKey(ctx, http.MethodPost, "/v1/statements", key, body, &r)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// submitRetries bounds Submit's retries of a lost answer.
const submitRetries = 4

// retryable: the answer was lost, or the first request under the key is
// still running.
func retryable(err error) bool {
	var tr errTransport
	var api *apiError
	return errors.As(err, &tr) || errors.As(err, &api) && api.Code == "idempotency_in_progress"
}

// pollEvery is how often WaitRequest asks again when the server answers a
// waiting request before the wait is over (a server without long-polling).
const pollEvery = time.Second

// WaitRequest long-polls GET /v1/requests/{id}?wait=Ns until the
// request leaves the waiting state or wait has passed.
func (b *apiBackend) WaitRequest(ctx context.Context, id string, wait time.Duration) (*gateway.RequestView, error) {
	deadline := b.cfg.Clock().Add(wait)
	for {
		left := deadline.Sub(b.cfg.Clock())
		path := "/v1/requests/" + url.PathEscape(id)
		if left > 0 {
			path += "?wait=" + strconv.Itoa(int((left+time.Second-1)/time.Second)) + "s"
		}
		var v gateway.RequestView
		if err := b.do(ctx, http.MethodGet, path, nil, &v); err != nil {
			return nil, err
		}
		left = deadline.Sub(b.cfg.Clock())
		if v.Status != gateway.StatusWaiting || left <= 0 {
			return &v, nil
		}
		t := time.NewTimer(min(left, pollEvery))
		select {
		case <-ctx.Done():
			t.Stop()
			return &v, nil
		case <-t.C:
		}
	}
}

// maxPages bounds how many pages of a list the stdio server follows.
const maxPages = 100

// The HTTP API's conventions the stdio server relies on, as its client:
// the largest page it answers (httpapi.MaxPageLimit) and the header that
// makes a POST safe to retry (httpapi.IdempotencyKeyHeader). They are
// written out rather than imported, so that this front links nothing of
// the other; TestClientConventions holds them to the API's.
const (
	pageLimit            = 500
	idempotencyKeyHeader = "Idempotency-Key"
)

// delegationsPage is one page of GET /v1/delegations (httpapi.DelegationsPage).
type delegationsPage struct {
	Delegations []scope.DelegationView `json:"delegations"`
	NextCursor  string                 `json:"next_cursor,omitempty"`
}

func (b *apiBackend) Delegations(ctx context.Context) ([]scope.DelegationView, error) {
	out := []scope.DelegationView{}
	cursor := ""
	for range maxPages {
		var body delegationsPage
		path := "/v1/delegations?limit=" + strconv.Itoa(pageLimit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := b.do(ctx, http.MethodGet, path, nil, &body); err != nil {
			return nil, err
		}
		for _, d := range body.Delegations {
			if d.Active {
				out = append(out, d)
			}
		}
		if cursor = body.NextCursor; cursor == "" {
			break
		}
	}
	return out, nil
}

func (b *apiBackend) Tables(ctx context.Context, target string) (*scope.TablesView, error) {
	out := &scope.TablesView{Tables: []scope.TableView{}}
	cursor := ""
	for range maxPages {
		q := url.Values{"limit": {strconv.Itoa(pageLimit)}}
		if target != "" {
			q.Set("target", target)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var v scope.TablesView
		if err := b.do(ctx, http.MethodGet, "/v1/tables?"+q.Encode(), nil, &v); err != nil {
			return nil, err
		}
		out.Tables = append(out.Tables, v.Tables...)
		if cursor = v.NextCursor; cursor == "" {
			break
		}
	}
	return out, nil
}
