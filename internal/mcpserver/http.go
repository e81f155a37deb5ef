package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
)

// Path is where the streamable HTTP endpoint is served.
const Path = "/mcp"

// Version is the server version MCP clients see.
const Version = "0.1.0"

// Config configures the streamable HTTP endpoint.
type Config struct {
	// Clock decides which delegations are in force. Defaults to time.Now.
	Clock func() time.Time
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// MaxBodyBytes caps an MCP request body. Defaults to 1 MiB, as /v1.
	MaxBodyBytes int64
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	return c
}

// Register serves the MCP endpoint at Path on mux. auth returns the agent
// principal of a request's bearer token, or "" (httpapi.Server.Authenticate).
func Register(mux *http.ServeMux, gw *gateway.Gateway, auth func(*http.Request) string, logger *slog.Logger) {
	mux.Handle(Path, NewHandler(gw, auth, Config{Logger: logger}))
}

type principalKey struct{}

// NewHandler returns the streamable HTTP handler: 401 without a valid agent
// token, else MCP, every tool acting as the token's principal.
func NewHandler(gw *gateway.Gateway, authenticate func(*http.Request) string, cfg Config) http.Handler {
	cfg = cfg.WithDefaults()
	log := cfg.Logger.With("component", "mcp")
	server := newServer(Version, func(req *mcp.CallToolRequest) (backend, error) {
		p := principalOf(req)
		if p == "" {
			// Unreachable behind the middleware below; refuse rather than guess.
			return nil, errors.New("no authenticated agent on this request")
		}
		return &gatewayBackend{gw: gw, principal: p, clock: cfg.Clock}, nil
	}, log)
	// Stateless: each HTTP request carries its own token, so no session
	// outlives the credential that opened it, and any node can answer.
	// The SDK's DNS-rebinding guard (403 for a loopback listener reached
	// under another Host name) is off: it exists for unauthenticated local
	// servers, every request here needs a bearer token a rebinding page
	// cannot have, and the guard would refuse a reverse proxy on the same
	// host.
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: sdkLogger(log), MaxRequestBodyBytes: cfg.MaxBodyBytes,
			DisableLocalhostProtection: true})
	// The SDK's bearer middleware carries the principal to the tools as
	// TokenInfo.UserID; the principal itself was established just before.
	verified := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, _ := ctx.Value(principalKey{}).(string)
		if p == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(mcpHandler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := authenticate(r)
		if p == "" {
			log.Warn("unauthorized", "front", "mcp", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", "no valid agent token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="harbormaster"`)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
				"code": "unauthorized", "message": "a valid agent token is required: Authorization: Bearer <token>"}})
			return
		}
		verified.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}
