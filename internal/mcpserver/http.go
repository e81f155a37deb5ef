package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
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
	// AllowedHosts are the host names (no port) besides loopback names and
	// IP addresses that a request's Host may be: anything else is refused
	// with 403 before authentication (DNS rebinding).
	AllowedHosts []string
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call, besides loopback origins and those whose host is in
	// AllowedHosts. A request without Origin (not a browser) passes.
	AllowedOrigins []string
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

// Router is where Register adds the endpoint (*http.ServeMux, or
// *httpapi.Server, which lists its routes).
type Router interface {
	Handle(pattern string, h http.Handler)
}

// Register serves the MCP endpoint at Path on mux. auth returns the agent
// principal of a request's bearer token, or "" (httpapi.Server.Authenticate).
func Register(mux Router, gw *gateway.Gateway, auth func(*http.Request) string, logger *slog.Logger) {
	RegisterWith(mux, gw, auth, Config{Logger: logger})
}

// RegisterWith is Register with a Config: the endpoint at Path and its
// protected-resource metadata (RFC 9728) at MetadataPath.
func RegisterWith(mux Router, gw *gateway.Gateway, auth func(*http.Request) string, cfg Config) {
	mux.Handle(Path, NewHandler(gw, auth, cfg))
	mux.Handle("GET "+MetadataPath, metadataHandler(cfg.WithDefaults()))
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
	// The SDK's DNS-rebinding guard (loopback listeners only) is off: the
	// guard below checks Host and Origin on every listener, and lets the
	// names of a reverse proxy through when configured.
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
		if code, msg := cfg.refuseRebinding(r); code != "" {
			log.WarnContext(r.Context(), "mcp request refused", "code", code, "host", r.Host, "origin", r.Header.Get("Origin"))
			writeError(w, http.StatusForbidden, code, msg)
			return
		}
		p := authenticate(r)
		if p == "" {
			log.Warn("unauthorized", "front", "mcp", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "why", "no valid agent token")
			// RFC 6750 and 9728: the token is refused, and the metadata says
			// this resource takes a bearer token in the header and names no
			// authorization server: there is no OAuth flow to start.
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="harbormaster", error="invalid_token", `+
				`error_description="a Harbormaster agent token is required; it is not an OAuth token", resource_metadata=%q`, metadataURL(r)))
			writeError(w, http.StatusUnauthorized, "unauthorized",
				"a valid agent token is required: Authorization: Bearer <token>. Harbormaster agent tokens come from the operator "+
					"(agents in the server's config); there is no OAuth sign-in")
			return
		}
		verified.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// MetadataPath is where the endpoint's protected-resource metadata (RFC
// 9728) is served.
const MetadataPath = "/.well-known/oauth-protected-resource" + Path

func metadataURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + MetadataPath
}

// metadataHandler serves RFC 9728 metadata: the resource, a bearer token
// in the Authorization header, and no authorization servers.
func metadataHandler(cfg Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code, msg := cfg.refuseRebinding(r); code != "" {
			writeError(w, http.StatusForbidden, code, msg)
			return
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"resource":                 scheme + "://" + r.Host + Path,
			"resource_name":            "Harbormaster MCP",
			"bearer_methods_supported": []string{"header"},
			"authorization_servers":    []string{},
			"resource_documentation":   "https://github.com/harbormaster-dev/harbormaster/blob/main/docs/api.md#mcp",
		})
	})
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// refuseRebinding checks Host and Origin (MCP transports, "Security
// Warning"): a page that rebinds its own name to this server's address
// sends its own name in both. It returns an error code and message, or "".
func (c Config) refuseRebinding(r *http.Request) (string, string) {
	host := hostOnly(r.Host)
	if !c.hostAllowed(host) {
		return "host_not_allowed", fmt.Sprintf("this server is not reached under the name %q; "+
			"an operator can allow it (mcp.allowed_hosts)", clip(host))
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "", ""
	}
	if slices.Contains(c.AllowedOrigins, origin) {
		return "", ""
	}
	u, err := url.Parse(origin)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		h := u.Hostname()
		if isLoopback(h) || slices.ContainsFunc(c.AllowedHosts, func(a string) bool { return strings.EqualFold(a, h) }) {
			return "", ""
		}
	}
	return "origin_not_allowed", fmt.Sprintf("requests from the origin %q are not allowed; "+
		"an operator can allow it (mcp.allowed_origins)", clip(origin))
}

func (c Config) hostAllowed(host string) bool {
	if isLoopback(host) || net.ParseIP(host) != nil {
		return true
	}
	return slices.ContainsFunc(c.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) })
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostOnly drops the port and IPv6 brackets of a Host header.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
