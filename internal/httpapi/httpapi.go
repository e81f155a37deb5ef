// Package httpapi serves the control plane's HTTP API under /v1.
//
// Agents authenticate with a bearer token; the server stores only token
// hashes. Every error is JSON: {"error": {"code": "...", "message": "..."}}.
// Request bodies are capped. Statement text, reasons and row values are
// untrusted data: they are only ever JSON-encoded, never interpolated.
//
// Agents connect here, so nothing of the process is served here: no
// /metrics (the node serves it on metrics_listen, a listener of its own),
// no pprof, expvar or other runtime endpoint. An unknown path, those
// included, answers as every unknown path does.
package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// MaxBodyBytes caps a request body.
const MaxBodyBytes = 1 << 20

// Agent is one agent principal and the SHA-256 of its token.
type Agent struct {
	Principal   string
	TokenSHA256 string // lowercase hex
}

// HashToken is how tokens are stored: lowercase hex SHA-256.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Config configures the API.
type Config struct {
	Agents []Agent
	// Signers authenticates humans' signed requests (queue, switches).
	Signers *signing.AllowedSigners
	// Switches is the node's switch poller, for GET /v1/switches.
	Switches *switches.Poller
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// ClaimRequest, when set, records each accepted signed request's
	// digest for every node on the store until the time given, and reports
	// whether it was the request's first use (store.ClaimRequest): a
	// request replayed through another node is refused there too. Without
	// it, the replay memory is this node's alone.
	ClaimRequest func(ctx context.Context, digest string, until time.Time) (bool, error)
	// Idempotency keeps Idempotency-Keys and their answers (store.Store):
	// in the control store every node knows them. Defaults to a memory of
	// this process alone.
	Idempotency IdempotencyStore
	// IdempotencyTTL is how long a key and its answer are kept. Defaults
	// to DefaultIdempotencyTTL (24 hours).
	IdempotencyTTL time.Duration
}

// Server is the HTTP API.
type Server struct {
	gw       *gateway.Gateway
	signers  *signing.AllowedSigners
	switches *switches.Poller
	claim    func(ctx context.Context, digest string, until time.Time) (bool, error)
	agents   map[[32]byte]string
	log      *slog.Logger
	mux      *http.ServeMux
	routes   []string
	idem     IdempotencyStore
	idemTTL  time.Duration
}

// New builds the API over a gateway.
func New(gw *gateway.Gateway, cfg Config) (*Server, error) {
	s := &Server{gw: gw, agents: map[[32]byte]string{}, log: cfg.Logger, mux: http.NewServeMux(), signers: cfg.Signers, switches: cfg.Switches, claim: cfg.ClaimRequest,
		idem: cfg.Idempotency, idemTTL: cfg.IdempotencyTTL}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = slog.New(requestIDHandler{s.log.Handler()})
	if s.idem == nil {
		s.idem = newMemIdempotency()
	}
	if s.idemTTL <= 0 {
		s.idemTTL = DefaultIdempotencyTTL
	}
	for _, a := range cfg.Agents {
		raw, err := hex.DecodeString(a.TokenSHA256)
		if err != nil || len(raw) != 32 {
			return nil, errors.New("agent " + a.Principal + ": token_sha256 must be 64 hex characters")
		}
		var k [32]byte
		copy(k[:], raw)
		s.agents[k] = a.Principal
	}
	s.HandleFunc("POST /v1/statements", s.agent(s.agentOnce(s.postStatement)))
	s.HandleFunc("GET /v1/requests/{id}", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Authorization"), signing.RequestScheme+" ") {
			s.requestForHuman(w, r)
			return
		}
		s.agent(s.getRequest)(w, r)
	})
	s.registerHumanRoutes()
	s.registerSurveyorRoutes()
	s.HandleFunc("GET /v1/delegations", s.agent(s.getDelegations))
	s.HandleFunc("POST /v1/delegations", s.actOnce(s.postDelegation))
	s.HandleFunc("GET /v1/openapi.json", s.getOpenAPI)
	RegisterTables(s)
	s.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := gw.Ready(ctx); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			// Which part, never its error text: anyone may ask, agents
			// too, and a target's own error text is for humans (the log).
			part := "a part of the server"
			var nr *gateway.NotReadyError
			if errors.As(err, &nr) {
				part = "the " + nr.Part
			}
			writeError(w, http.StatusServiceUnavailable, "not_ready", part+" does not answer; the server's log says why")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	s.mux.HandleFunc("/", s.noRoute)
	return s, nil
}

// Handler returns the root handler: every route, each answer with its
// X-Request-Id, 404 for an unknown path and 405 for a method its routes
// do not accept.
func (s *Server) Handler() http.Handler { return s }

// Handle adds a route (a ServeMux pattern "METHOD /path"); other packages
// add theirs (MCP, console) here so that Routes lists every one.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.routes = append(s.routes, pattern)
	s.mux.Handle(pattern, h)
}

// Mux is the routes' mux. Add routes with Handle instead, so that Routes
// lists them.
func (s *Server) Mux() *http.ServeMux { return s.mux }

// HandleFunc is Handle for a function.
func (s *Server) HandleFunc(pattern string, h http.HandlerFunc) { s.Handle(pattern, h) }

// Routes returns the patterns of every route, in the order they were
// added (the OpenAPI description's test compares them with its paths).
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

type principalKey struct{}

// Authenticate returns the principal of a bearer token, or "".
func (s *Server) Authenticate(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	for k, p := range s.agents {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			return p
		}
	}
	return ""
}

func (s *Server) agent(h func(w http.ResponseWriter, r *http.Request, principal string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := s.Authenticate(r)
		if p == "" {
			// Never the token: which route, from where, and why.
			s.log.Warn("unauthorized", "front", "http", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr,
				"why", "no valid agent token")
			w.Header().Set("WWW-Authenticate", `Bearer realm="harbormaster"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid agent token is required: Authorization: Bearer <token>")
			return
		}
		h(w, r, p)
	}
}

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeErrorReq(w, status, code, msg, "")
}

func writeErrorReq(w http.ResponseWriter, status int, code, msg, requestID string) {
	var b errorBody
	b.Error.Code, b.Error.Message, b.Error.RequestID = code, publicMessage(msg), requestID
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

// decode reads a capped JSON body into v, refusing unknown fields.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if !jsonContent(r) {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the request body must be JSON (Content-Type: application/json), not "+r.Header.Get("Content-Type"))
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over 1 MiB")
			return false
		}
		writeError(w, http.StatusBadRequest, "bad_json", "the request body is not the expected JSON: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "bad_json", "the request body has data after the JSON object")
		return false
	}
	return true
}

type statementBody struct {
	Target string `json:"target"`
	SQL    string `json:"sql"`
}

func (s *Server) postStatement(w http.ResponseWriter, r *http.Request, principal string) {
	var body statementBody
	if !decode(w, r, &body) {
		return
	}
	if body.Target == "" || strings.TrimSpace(body.SQL) == "" {
		writeError(w, http.StatusBadRequest, "bad_request", `both "target" and "sql" are required`)
		return
	}
	start := time.Now()
	resp, err := s.gw.Submit(r.Context(), principal, body.Target, body.SQL)
	if err != nil {
		s.statementError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "statement", "request", resp.RequestID, "principal", principal, "target", body.Target,
		"outcome", resp.Outcome, "path", resp.Path, "rows", resp.RowsAffected, "ms", time.Since(start).Milliseconds())
	writeJSON(w, http.StatusOK, resp)
}

// statementError answers a Submit error: its class (gateway.Classify) as
// an HTTP status and error code.
func (s *Server) statementError(w http.ResponseWriter, r *http.Request, err error) {
	f := gateway.Classify(err)
	switch f.Class {
	case gateway.FailureUnparseable, gateway.FailureOverLimit, gateway.FailureUnapprovable:
		// By code, not message: a parse error's message quotes the statement.
		s.log.InfoContext(r.Context(), "statement refused", "request", f.RequestID, "code", f.Code, "why", refusedWhy(f.Code))
		writeErrorReq(w, http.StatusUnprocessableEntity, "sql_"+f.Code, f.Message, f.RequestID)
	case gateway.FailureFlooded:
		// Too many referrals: recorded, not queued, nothing ran.
		w.Header().Set("Retry-After", "60")
		writeErrorReq(w, http.StatusTooManyRequests, f.Code, f.Message, f.RequestID)
	case gateway.FailureUnknownTarget:
		writeError(w, http.StatusNotFound, "unknown_target", err.Error())
	case gateway.FailureLogUnavailable:
		s.log.ErrorContext(r.Context(), "logbook unavailable", "err", err)
		writeError(w, http.StatusServiceUnavailable, "logbook_unavailable", f.Message)
	default:
		s.log.ErrorContext(r.Context(), "statement failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the statement could not be decided or executed; nothing ran unless the request shows otherwise")
	}
}

// refusedWhy is the log's reason for a statement refused at once.
func refusedWhy(code string) string {
	switch code {
	case sqlcheck.CodeMultipleStatements:
		return "the statement is stacked (several statements sent as one): refused, not queued"
	case sqlcheck.CodeParseError:
		return "the statement does not parse"
	case sqlcheck.CodeEmptyStatement:
		return "the statement is empty (only comments or whitespace)"
	}
	return "no human could approve it (" + code + "): refused, not queued"
}

// MaxWait caps the long-poll of GET /v1/requests/{id}?wait=30s.
const MaxWait = gateway.MaxWait

func (s *Server) getRequest(w http.ResponseWriter, r *http.Request, principal string) {
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "wait must be a duration such as 30s")
			return
		}
		wait = min(d, MaxWait)
	}
	v, err := s.gw.WaitRequest(r.Context(), r.PathValue("id"), principal, wait)
	if errors.Is(err, gateway.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no request "+r.PathValue("id")+" for this agent")
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "request lookup", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the request could not be read")
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// DelegationsPage is GET /v1/delegations: the caller's delegations,
// oldest first.
type DelegationsPage struct {
	Delegations []scope.DelegationView `json:"delegations"`
	NextCursor  string                 `json:"next_cursor,omitempty"`
}

func (s *Server) getDelegations(w http.ResponseWriter, r *http.Request, principal string) {
	pg, ok := readPage(w, r)
	if !ok {
		return
	}
	now := time.Now()
	type item struct {
		key string
		v   scope.DelegationView
	}
	var all []item
	for _, d := range s.gw.Registry().Delegations(principal) {
		all = append(all, item{timeKey(d.Created, d.ID), scope.ViewDelegation(d, now)})
	}
	items, next := paginate(all, func(i item) string { return i.key }, pg)
	out := DelegationsPage{Delegations: []scope.DelegationView{}, NextCursor: next}
	for _, i := range items {
		out.Delegations = append(out.Delegations, i.v)
	}
	writeJSON(w, http.StatusOK, out)
}

type delegationBody struct {
	YAML      string `json:"yaml"`
	Signature string `json:"signature"`
}

// postDelegation takes a signed delegation. It needs no token: the
// grantor's signature, checked against the signers file, is the authority.
func (s *Server) postDelegation(w http.ResponseWriter, r *http.Request) {
	var body delegationBody
	if !decode(w, r, &body) {
		return
	}
	if body.YAML == "" || body.Signature == "" {
		writeError(w, http.StatusBadRequest, "bad_request", `both "yaml" and "signature" are required`)
		return
	}
	d, rep, err := s.gw.AddDelegation(r.Context(), []byte(body.YAML), []byte(body.Signature), "api")
	var de *gateway.DelegationError
	switch {
	case errors.As(err, &de):
		var refusal DelegationRefusal
		refusal.Error.Code, refusal.Error.Message, refusal.Error.Problems = "delegation_refused", publicMessage(de.Error()), de.Problems
		refusal.Report = rep
		writeJSON(w, http.StatusUnprocessableEntity, refusal)
		return
	case errors.Is(err, gateway.ErrLogUnavailable):
		writeError(w, http.StatusServiceUnavailable, "logbook_unavailable", "the delegation could not be recorded; try again later")
		return
	case errors.Is(err, gateway.ErrDelegationRevoked):
		writeError(w, http.StatusConflict, "delegation_revoked", err.Error())
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "add delegation", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the delegation could not be stored")
		return
	}
	writeJSON(w, http.StatusCreated, DelegationAnswer{Delegation: scope.ViewDelegation(d, time.Now()), Report: rep})
}

// DelegationAnswer is what POST /v1/delegations (with the compilation
// report) and POST /v1/delegations/{id}/revoke (without) answer.
type DelegationAnswer struct {
	Delegation scope.DelegationView `json:"delegation"`
	Report     *bound.Report        `json:"report,omitempty"`
}

// DelegationRefusal is the 422 answer to a delegation that was refused:
// the error with every problem, and the compilation report.
type DelegationRefusal struct {
	Error struct {
		Code     string   `json:"code"`
		Message  string   `json:"message"`
		Problems []string `json:"problems"`
	} `json:"error"`
	Report *bound.Report `json:"report"`
}
