package pgwire

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/shadow"
)

// Agent is one agent principal: the SHA-256 of its token (as the HTTP API
// holds it) and, optionally, its SCRAM-SHA-256 verifier.
type Agent struct {
	Principal   string
	TokenSHA256 string // lowercase hex
	// SCRAM is the verifier's text form (NewVerifier); "" for none: the
	// agent then connects only over TLS, with its token as a cleartext
	// password.
	SCRAM string
}

// Config configures the front.
type Config struct {
	Agents []Agent
	// TLS, when set, is offered to clients that ask (sslmode=require).
	// Nil: no TLS, and only agents with a SCRAM verifier can connect.
	TLS *tls.Config
	// Logger defaults to a discard logger.
	Logger *slog.Logger
	// Clock defaults to time.Now.
	Clock func() time.Time
	// MaxMessage caps one protocol message's body. Defaults to 1 MiB, the
	// HTTP API's body cap.
	MaxMessage int
	// MaxConnections caps open connections. Defaults to 256.
	MaxConnections int
	// MaxPerAgent caps one principal's sessions, so that one agent cannot
	// lock the others out. Defaults to half of MaxConnections.
	MaxPerAgent int
	// AuthFailures is how many failed logins a source address, and
	// separately a user name, may have per minute; past it logins from
	// it are refused unchecked for the rest of the minute. Defaults to 10.
	AuthFailures int
	// StartupTimeout bounds the startup and authentication. Defaults to 10s.
	StartupTimeout time.Duration
	// MaxWait caps harbormaster_wait. Defaults to 60s (the HTTP long-poll
	// cap); DefaultWait, its wait without a second argument, to 30s.
	MaxWait     time.Duration
	DefaultWait time.Duration
	// TransactionIdle ends a session that waits this long inside a
	// transaction (rolling it back), as idle_in_transaction_session_timeout
	// does; a session may only tighten it. Defaults to 60s; negative: no
	// limit. TransactionMax rolls back a transaction open longer, at the
	// next message the client sends (its next statement is refused with
	// 25P04, its COMMIT answers ROLLBACK). Defaults to 10 minutes; negative: no limit. An open
	// transaction holds one of its target Pilot's connections.
	TransactionIdle time.Duration
	TransactionMax  time.Duration
	// Catalog answers catalog statements (pg_catalog, information_schema)
	// over a catalog drawn from the session's bound. Nil: they are
	// refused (0A000), as they were before there was one.
	Catalog CatalogReader
	// ServerVersion is reported as server_version, and is what version()
	// and server_version_num answer. Defaults to "15.0".
	ServerVersion string
	// Timeouts are the operator's limits for each target, by name, as its
	// Pilot pins them: a session may SET statement_timeout, lock_timeout
	// and idle_in_transaction_session_timeout only to keep or tighten
	// them, and SHOW answers them. A target without an entry (its Pilot
	// runs in its own process, with its own config) refuses those SETs.
	Timeouts map[string]Timeouts
}

// Timeouts are a target's limits on one statement (0: none).
type Timeouts struct {
	Statement time.Duration
	Lock      time.Duration
	// IdleInTransaction bounds a session idle inside a transaction; the
	// front holds none open between statements, so it defaults to none.
	IdleInTransaction time.Duration
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.MaxMessage <= 0 {
		c.MaxMessage = 1 << 20
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 256
	}
	if c.MaxPerAgent <= 0 {
		c.MaxPerAgent = max(1, c.MaxConnections/2)
	}
	if c.AuthFailures <= 0 {
		c.AuthFailures = 10
	}
	if c.StartupTimeout <= 0 {
		c.StartupTimeout = 10 * time.Second
	}
	if c.TransactionIdle == 0 {
		c.TransactionIdle = DefaultTransactionIdle
	}
	if c.TransactionMax == 0 {
		c.TransactionMax = 10 * time.Minute
	}
	if c.MaxWait <= 0 {
		c.MaxWait = gateway.MaxWait
	}
	if c.DefaultWait <= 0 {
		c.DefaultWait = 30 * time.Second
	}
	if c.ServerVersion == "" {
		c.ServerVersion = "15.0"
	}
	return c
}

type agent struct {
	principal string
	hash      [32]byte
	scram     *Verifier
}

// statementPath is what the front asks of the gateway: the call POST
// /v1/statements makes, a statement's description, the wait of GET /v1/requests/{id}, and the search
// path the target's Pilot pins.
type statementPath interface {
	Submit(ctx context.Context, principal, target, sql string) (*gateway.Response, error)
	// Describe describes a statement with $n placeholders without
	// running it (the front's Describe of a prepared statement).
	Describe(ctx context.Context, principal, target, sql string) (*gateway.Description, error)
	WaitRequest(ctx context.Context, id, principal string, wait time.Duration) (*gateway.RequestView, error)
	// BeginTx starts a client transaction (BEGIN).
	BeginTx(principal, target string, o pilot.TxOptions) (txPath, error)
	// SearchPath is the search path the target's Pilot pins for every
	// statement (its catalog's); nil while it is not known.
	SearchPath(target string) []string
	// Scope is what principal's delegations in force on target name, as
	// a shadow catalog holds it; nil while the target's catalog is not
	// known.
	Scope(principal, target string, now time.Time) *shadow.Spec
}

// CatalogReader answers catalog statements over a catalog drawn from a
// bound (shadow.Manager).
type CatalogReader interface {
	Query(ctx context.Context, spec *shadow.Spec, sql string) (*shadow.Result, error)
	Describe(ctx context.Context, spec *shadow.Spec, sql string) (*shadow.Description, error)
}

// DefaultTransactionIdle is Config.TransactionIdle's default.
const DefaultTransactionIdle = 60 * time.Second

// txPath is a client transaction on the statement path (gateway.Tx).
type txPath interface {
	Submit(ctx context.Context, sql string) (*gateway.Response, error)
	SetIsolation(level string) bool
	Savepoint(ctx context.Context, name string) error
	Release(ctx context.Context, name string) error
	RollbackTo(ctx context.Context, name string) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// gatewayPath is the gateway as the front's statement path.
type gatewayPath struct{ *gateway.Gateway }

func (g gatewayPath) BeginTx(principal, target string, o pilot.TxOptions) (txPath, error) {
	tx, err := g.Gateway.BeginTx(principal, target, o)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

func (g gatewayPath) Scope(principal, target string, now time.Time) *shadow.Spec {
	p, ok := g.Pilot(target)
	if !ok {
		return nil
	}
	cat := p.Catalog()
	if cat == nil {
		return nil
	}
	var rules []shadow.Rules
	for _, d := range g.Registry().InForce(principal, target, now) {
		rules = append(rules, d.Bound.Rules)
	}
	return shadow.FromBound(target, principal, cat.SearchPath(), rules, cat)
}

func (g gatewayPath) SearchPath(target string) []string {
	p, ok := g.Pilot(target)
	if !ok {
		return nil
	}
	cat := p.Catalog()
	if cat == nil {
		return nil
	}
	return cat.SearchPath()
}

// Server is the wire front. Every statement it does not answer itself
// (session settings, harbormaster_wait) goes to Gateway.Submit, the call
// POST /v1/statements makes.
type Server struct {
	cfg     Config
	gw      statementPath
	targets map[string]bool
	agents  map[string]*agent // by principal
	slots   chan struct{}
	fails   *failures
	// mockKey derives stand-in SCRAM salts for unknown users, so an
	// unknown user's exchange looks like a known one's.
	mockKey [32]byte
	// unknownSCRAM: over TLS an unknown user is asked for the method most
	// agents use (SCRAM, or the token in clear), so that in a deployment
	// whose agents all log in one way an unknown user looks like them.
	unknownSCRAM bool
	// mockIter and mockSaltLen shape the stand-in verifier as most
	// agents' verifiers are (a verifier taken from PostgreSQL may have
	// another iteration count than this front's 4096).
	mockIter, mockSaltLen int

	mu       sync.Mutex
	sessions map[uint32]*session // by BackendKeyData process id
	perAgent map[string]int      // open sessions by principal
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// New builds the front over a gateway.
func New(gw *gateway.Gateway, cfg Config) (*Server, error) {
	return newServer(gatewayPath{gw}, gw.Targets(), cfg)
}

func newServer(gw statementPath, targets []string, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	s := &Server{cfg: cfg, gw: gw, targets: map[string]bool{}, agents: map[string]*agent{}, slots: make(chan struct{}, cfg.MaxConnections), perAgent: map[string]int{},
		fails: newFailures(cfg.AuthFailures, cfg.Clock), sessions: map[uint32]*session{}, conns: map[net.Conn]struct{}{}}
	for _, t := range targets {
		s.targets[t] = true
	}
	withSCRAM := 0
	for _, a := range cfg.Agents {
		if a.SCRAM != "" {
			withSCRAM++
		}
	}
	s.unknownSCRAM = 2*withSCRAM >= len(cfg.Agents)
	for _, a := range cfg.Agents {
		raw, err := hex.DecodeString(a.TokenSHA256)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("pgwire: agent %s: token_sha256 must be 64 hex characters", a.Principal)
		}
		ag := &agent{principal: a.Principal}
		copy(ag.hash[:], raw)
		if a.SCRAM != "" {
			v, err := ParseVerifier(a.SCRAM)
			if err != nil {
				return nil, fmt.Errorf("pgwire: agent %s: pg_scram: %w", a.Principal, err)
			}
			ag.scram = &v
		}
		s.agents[a.Principal] = ag
	}
	s.mockKey = mockKey(cfg.Agents)
	s.mockIter, s.mockSaltLen = scramIterations, 16
	shapes := map[[2]int]int{}
	best := 0
	for _, p := range slices.Sorted(maps.Keys(s.agents)) {
		if v := s.agents[p].scram; v != nil {
			k := [2]int{v.Iterations, len(v.Salt)}
			if shapes[k]++; shapes[k] > best {
				best, s.mockIter, s.mockSaltLen = shapes[k], k[0], k[1]
			}
		}
	}
	return s, nil
}

// mockKey keys the stand-in salts of unknown users. An agent's salt is its
// verifier's, the same after every restart, so an unknown user's must be
// too, or salts asked before and after a restart tell the agents from the
// other names. It is derived from the agents' token hashes, which only
// the server holds: the same across restarts while the agents are the
// same. (PostgreSQL keys its mock salt with a secret kept in pg_control;
// a secret kept in the store would hold across changes of the agents too.)
func mockKey(agents []Agent) [32]byte {
	var k [32]byte
	if len(agents) == 0 {
		_, _ = rand.Read(k[:])
		return k
	}
	sorted := slices.Clone(agents)
	slices.SortFunc(sorted, func(a, b Agent) int { return strings.Compare(a.Principal, b.Principal) })
	m := hmac.New(sha256.New, []byte("harbormaster pgwire stand-in SCRAM salt"))
	for _, a := range sorted {
		fmt.Fprintf(m, "%s\x00%s\x00", a.Principal, strings.ToLower(a.TokenSHA256))
	}
	copy(k[:], m.Sum(nil))
	return k
}

// Serve accepts connections on ln until ctx ends, then closes them all
// and waits for their sessions.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	defer stop()
	defer s.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("pgwire: accept: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
}

func (s *Server) track(c net.Conn, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// handle runs one connection: startup, authentication, then the session.
func (s *Server) handle(ctx context.Context, c net.Conn) {
	s.track(c, true)
	defer s.track(c, false)
	defer c.Close()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		be := pgproto3.NewBackend(c, c)
		be.Send(fatal(stateTooMany, "sorry, too many clients already").response())
		_ = be.Flush()
		return
	}
	defer func() {
		// A malformed message must never take the server down.
		if r := recover(); r != nil {
			s.cfg.Logger.Error("pgwire: session panicked", "panic", fmt.Sprint(r), "remote", c.RemoteAddr().String())
		}
	}()
	_ = c.SetDeadline(s.cfg.Clock().Add(s.cfg.StartupTimeout))
	sess, err := s.startup(ctx, c)
	if err != nil {
		if !errors.Is(err, errQuiet) {
			s.cfg.Logger.Info("pgwire: connection refused", "remote", c.RemoteAddr().String(), "err", err)
		}
		return
	}
	defer s.leave(sess.principal) // startup admitted it
	_ = sess.conn.SetDeadline(time.Time{})
	defer s.forget(sess)
	sess.run(ctx)
}

// admit counts one more session of principal, or says it has its share.
func (s *Server) admit(principal string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perAgent[principal] >= s.cfg.MaxPerAgent {
		return false
	}
	s.perAgent[principal]++
	return true
}

func (s *Server) leave(principal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perAgent[principal]--; s.perAgent[principal] <= 0 {
		delete(s.perAgent, principal)
	}
}

// errQuiet ends a connection that needs no log line (a cancel request).
var errQuiet = errors.New("done")

// startup reads the startup packets: TLS and GSS encryption requests, a
// cancel request, then the startup message, and authenticates.
func (s *Server) startup(ctx context.Context, c net.Conn) (*session, error) {
	conn := c
	be := pgproto3.NewBackend(conn, conn)
	be.SetMaxBodyLen(10000) // a startup packet is small (PostgreSQL: 10000)
	tlsDone := false
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			werr := fatal(stateProtocol, "invalid startup packet: "+err.Error())
			if strings.Contains(err.Error(), "unknown startup message code") {
				werr.Message = "unsupported frontend protocol: this server speaks protocol 3.0 (" + err.Error() + ")"
			}
			be.Send(werr.response())
			_ = be.Flush()
			return nil, err
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if tlsDone {
				return nil, sendFatal(be, fatal(stateProtocol, "TLS was requested twice"))
			}
			if s.cfg.TLS == nil {
				if _, err := conn.Write([]byte{'N'}); err != nil {
					return nil, err
				}
				continue
			}
			if _, err := conn.Write([]byte{'S'}); err != nil {
				return nil, err
			}
			tc := tls.Server(conn, s.cfg.TLS)
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, fmt.Errorf("TLS handshake: %w", err)
			}
			conn, tlsDone = tc, true
			be = pgproto3.NewBackend(conn, conn)
			be.SetMaxBodyLen(10000)
		case *pgproto3.GSSEncRequest:
			// GSSAPI encryption is not offered: 'N' tells the client to go
			// on without it (then TLS or plain), as PostgreSQL does.
			if _, err := conn.Write([]byte{'N'}); err != nil {
				return nil, err
			}
		case *pgproto3.CancelRequest:
			s.cancel(m)
			return nil, errQuiet
		case *pgproto3.StartupMessage:
			if m.ProtocolVersion != pgproto3.ProtocolVersion30 {
				// 3.2 (PostgreSQL 18 clients): answer that only 3.0 is spoken.
				be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0})
			}
			return s.login(ctx, conn, be, m, tlsDone)
		default:
			return nil, sendFatal(be, fatal(stateProtocol, fmt.Sprintf("unexpected startup packet %T", msg)))
		}
	}
}

func sendFatal(be *pgproto3.Backend, e *wireError) error {
	be.Send(e.response())
	_ = be.Flush()
	return e
}

// login authenticates the startup message's user with its token.
func (s *Server) login(ctx context.Context, conn net.Conn, be *pgproto3.Backend, m *pgproto3.StartupMessage, isTLS bool) (*session, error) {
	p := m.Parameters
	if r, ok := p["replication"]; ok && !strings.EqualFold(r, "false") && !strings.EqualFold(r, "off") && r != "0" && !strings.EqualFold(r, "no") {
		return nil, sendFatal(be, fatal(stateFeature, "replication connections are not supported: Harbormaster governs statements, not replication"))
	}
	user, target := p["user"], p["database"]
	if user == "" {
		return nil, sendFatal(be, fatal(stateInvalidAuth, "no user in the startup message: connect as the agent principal (agent:NAME, or NAME)"))
	}
	if target == "" {
		target = user // PostgreSQL's default, which then names no target
	}
	principal := user
	if !strings.Contains(principal, ":") {
		principal = "agent:" + principal
	}
	if enc, ok := p["client_encoding"]; ok && !isUTF8(enc) {
		return nil, sendFatal(be, fatal(stateInvalidParameter, fmt.Sprintf("client_encoding %q is not supported: use UTF8", enc)))
	}
	source := remoteHost(conn)
	if s.fails.limited("addr:"+source) || s.fails.limited("user:"+principal) {
		return nil, sendFatal(be, fatal(statePassword, "too many failed authentication attempts from this address or for this user: wait a minute"))
	}
	a := s.agents[principal]
	ok, err := s.authenticate(be, a, principal, isTLS)
	if err != nil {
		return nil, err
	}
	if !ok {
		s.fails.add("addr:" + source)
		s.fails.add("user:" + principal)
		msg := fmt.Sprintf("password authentication failed for user %q: the password is the agent's token", user)
		if !isTLS {
			// The same words for every user, whether it is an agent or not.
			msg += "; an agent without a SCRAM verifier (pg_scram) connects only with TLS (sslmode=require), so that its token never crosses the network in clear"
		}
		return nil, sendFatal(be, fatal(statePassword, msg))
	}
	if !s.targets[target] {
		return nil, sendFatal(be, fatal(stateNoDatabase, fmt.Sprintf("database %q does not exist: the database name is the target's name", target)))
	}
	if _, werr := newSettings(s.facts(principal, target), p); werr != nil {
		return nil, sendFatal(be, werr)
	}
	if !s.admit(principal) {
		// After authentication: the agent learns its own count, nothing
		// of another's.
		return nil, sendFatal(be, fatal(stateTooMany, fmt.Sprintf("too many connections for %s: at most %d at once", principal, s.cfg.MaxPerAgent)))
	}
	sess := s.newSession(conn, be, principal, target, p)
	if err := sess.greet(); err != nil {
		s.forget(sess)
		s.leave(principal)
		return nil, err
	}
	return sess, nil
}

func isUTF8(enc string) bool {
	e := strings.ToUpper(strings.Trim(enc, `'" `))
	return e == "UTF8" || e == "UTF-8" || e == "UNICODE"
}

func remoteHost(c net.Conn) string {
	h, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return h
}

// authenticate runs SCRAM-SHA-256 when the agent has a verifier (and for
// an unknown user without TLS, with a stand-in that never verifies), or a
// cleartext password over TLS. It reports whether the token was right.
func (s *Server) authenticate(be *pgproto3.Backend, a *agent, principal string, isTLS bool) (bool, error) {
	switch {
	case !isTLS:
		// Without TLS every user goes through SCRAM: an agent with a
		// verifier for real; an unknown user, and an agent without a
		// verifier (which connects only inside TLS), with a stand-in
		// that never verifies. All three end alike, so a login attempt
		// does not tell which users are agents, or how they log in.
		if a != nil && a.scram == nil {
			a = nil
		}
		return s.scram(be, a, principal)
	case a != nil && a.scram != nil, a == nil && s.unknownSCRAM:
		return s.scram(be, a, principal)
	default:
		be.Send(&pgproto3.AuthenticationCleartextPassword{})
		if err := be.Flush(); err != nil {
			return false, err
		}
		if err := be.SetAuthType(pgproto3.AuthTypeCleartextPassword); err != nil {
			return false, err
		}
		msg, err := be.Receive()
		if err != nil {
			return false, err
		}
		pw, ok := msg.(*pgproto3.PasswordMessage)
		if !ok {
			return false, sendFatal(be, fatal(stateProtocol, "expected a password message"))
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(pw.Password)))
		return a != nil && subtle.ConstantTimeCompare(sum[:], a.hash[:]) == 1, nil
	}
}

func (s *Server) scram(be *pgproto3.Backend, a *agent, principal string) (bool, error) {
	sv := &scramServer{}
	if a != nil {
		sv.v, sv.real = *a.scram, true
	} else {
		salt := hmacSHA256(s.mockKey[:], principal)
		for len(salt) < s.mockSaltLen {
			salt = append(salt, hmacSHA256(s.mockKey[:], string(salt))...)
		}
		sv.v = Verifier{Iterations: s.mockIter, Salt: salt[:s.mockSaltLen], StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}
	}
	be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}})
	if err := be.Flush(); err != nil {
		return false, err
	}
	if err := be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return false, err
	}
	msg, err := be.Receive()
	if err != nil {
		return false, err
	}
	init, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok || init.AuthMechanism != "SCRAM-SHA-256" {
		return false, sendFatal(be, fatal(stateProtocol, "expected a SASL initial response with mechanism SCRAM-SHA-256 (channel binding is not offered)"))
	}
	first, err := sv.first(string(init.Data))
	if err != nil {
		return false, sendFatal(be, fatal(stateProtocol, err.Error()))
	}
	be.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(first)})
	if err := be.Flush(); err != nil {
		return false, err
	}
	if err := be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return false, err
	}
	msg, err = be.Receive()
	if err != nil {
		return false, err
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return false, sendFatal(be, fatal(stateProtocol, "expected a SASL response"))
	}
	final, err := sv.final(string(resp.Data))
	if errors.Is(err, errSCRAMProof) {
		return false, nil
	}
	if err != nil {
		return false, sendFatal(be, fatal(stateProtocol, err.Error()))
	}
	be.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(final)})
	return true, nil
}

// cancel cancels the in-flight statement of the session a cancel request
// names, when its secret matches; anything else is ignored, as
// PostgreSQL ignores it.
func (s *Server) cancel(m *pgproto3.CancelRequest) {
	s.mu.Lock()
	sess := s.sessions[m.ProcessID]
	s.mu.Unlock()
	if sess == nil || subtle.ConstantTimeCompare(sess.secret, m.SecretKey) != 1 {
		return
	}
	sess.cancelInflight()
}

func (s *Server) newSession(conn net.Conn, be *pgproto3.Backend, principal, target string, startup map[string]string) *session {
	sess := &session{srv: s, conn: conn, be: be, principal: principal, target: target,
		stmts: map[string]*prepared{}, portals: map[string]*portal{}, secret: make([]byte, 4)}
	// login refused a startup the settings cannot take.
	sess.settings, _ = newSettings(s.facts(principal, target), startup)
	if sess.settings == nil {
		sess.settings, _ = newSettings(s.facts(principal, target), nil)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		_, _ = rand.Read(sess.secret)
		pid := binary.BigEndian.Uint32(b[:]) &^ (1 << 31)
		if _, taken := s.sessions[pid]; !taken && pid != 0 {
			sess.pid = pid
			s.sessions[pid] = sess
			return sess
		}
	}
}

// facts are what a new session of principal on target knows of itself.
func (s *Server) facts(principal, target string) sessionFacts {
	f := sessionFacts{version: s.cfg.ServerVersion, principal: principal, target: target, searchPath: s.gw.SearchPath(target)}
	if t, ok := s.cfg.Timeouts[target]; ok {
		f.limits = &t
	}
	return f
}

func (s *Server) forget(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sess.pid)
}

// failures counts failed logins per key in one-minute windows.
type failures struct {
	mu    sync.Mutex
	max   int
	clock func() time.Time
	win   map[string]*window
}

type window struct {
	start time.Time
	n     int
}

func newFailures(max int, clock func() time.Time) *failures {
	return &failures{max: max, clock: clock, win: map[string]*window{}}
}

func (f *failures) limited(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.win[key]
	return w != nil && f.clock().Sub(w.start) < time.Minute && w.n >= f.max
}

func (f *failures) add(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock()
	if len(f.win) > 100000 {
		for k, w := range f.win {
			if now.Sub(w.start) >= time.Minute {
				delete(f.win, k)
			}
		}
	}
	w := f.win[key]
	if w == nil || now.Sub(w.start) >= time.Minute {
		w = &window{start: now}
		f.win[key] = w
	}
	w.n++
}
