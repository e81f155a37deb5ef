package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// TLS is the server's TLS configuration (ServerTLS builds it): its
	// certificate, TLS 1.3 only, client certificates required and verified
	// against the client CA. Required.
	TLS *tls.Config
	// CallTimeout bounds one call, detached from the client's connection.
	// It must exceed the longest statement_timeout plus lock_timeout of
	// the targets. Defaults to 1 minute.
	CallTimeout time.Duration
	// SessionIdle rolls back a client transaction (sessions.go) no call
	// has touched this long. Defaults to DefaultSessionIdle.
	SessionIdle time.Duration
	// Logger defaults to a discard logger.
	Logger *slog.Logger
}

// WithDefaults fills unset fields.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.CallTimeout <= 0 {
		c.CallTimeout = time.Minute
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c ServerConfig) validate() error {
	if c.TLS == nil {
		return errors.New("pilot remote: server: TLS is required")
	}
	if c.TLS.ClientAuth != tls.RequireAndVerifyClientCert || c.TLS.ClientCAs == nil {
		return errors.New("pilot remote: server: TLS must require and verify client certificates (ServerTLS)")
	}
	if c.TLS.MinVersion < tls.VersionTLS13 {
		return errors.New("pilot remote: server: TLS must be 1.3 only (ServerTLS)")
	}
	return nil
}

// Server serves pilot.Executor for its targets. It adds no authority:
// every call goes to the target's Executor, which verifies what it runs.
type Server struct {
	cfg    ServerConfig
	pilots map[string]pilot.Executor
	mux    *http.ServeMux

	mu      sync.Mutex
	digests map[string]catalogDigest // by target

	// sessions are the client transactions held (sessions.go).
	sessions *serverSessions
}

type catalogDigest struct {
	cat *sqlcheck.Catalog
	w   *wireCatalog
}

// NewServer serves pilots, each under its Target name.
func NewServer(cfg ServerConfig, pilots ...pilot.Executor) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(pilots) == 0 {
		return nil, errors.New("pilot remote: server: no targets")
	}
	s := &Server{cfg: cfg, pilots: map[string]pilot.Executor{}, mux: http.NewServeMux(), digests: map[string]catalogDigest{},
		sessions: &serverSessions{idle: cfg.SessionIdle, byID: map[string]*heldSession{}}}
	for _, p := range pilots {
		if _, dup := s.pilots[p.Target()]; dup {
			return nil, fmt.Errorf("pilot remote: server: target %s listed twice", p.Target())
		}
		s.pilots[p.Target()] = p
	}
	for op, h := range map[string]func(context.Context, pilot.Executor, []byte) (*reply, error){
		opCatalog:         s.catalog,
		opPing:            s.ping,
		opExecute:         s.execute,
		opExecuteApproved: s.executeApproved,
		opRehearse:        s.rehearse,
		opPreview:         s.preview,
		opDescribe:        s.describe,
		opReceipt:         s.receipt,
		opVoidReceipt:     s.voidReceipt,
		opXactStatus:      s.xactStatus,
		opPruneReceipts:   s.pruneReceipts,
		opTxBegin:         s.txBegin,
		opTxExecute:       s.txExecute,
		opTxSavepoint:     s.txSavepoint,
		opTxCommit:        s.txCommit,
		opTxRollback:      s.txRollback,
	} {
		s.mux.Handle("POST /v1/targets/{target}/"+op, s.handle(op, h))
	}
	return s, nil
}

// Handler is the server's HTTP handler (for tests that serve it
// themselves; Serve is the way to run it).
func (s *Server) Handler() http.Handler { return s.mux }

// detached are the calls that must not end with the client's connection:
// once sent, they run to their end (bounded by CallTimeout).
var detached = map[string]bool{opExecute: true, opExecuteApproved: true, opVoidReceipt: true,
	opTxExecute: true, opTxCommit: true, opTxRollback: true}

func (s *Server) handle(op string, h func(context.Context, pilot.Executor, []byte) (*reply, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			// ServerTLS requires a verified client certificate; this is
			// for a handler someone served without it.
			http.Error(w, "a client certificate is required", http.StatusUnauthorized)
			return
		}
		name := r.PathValue("target")
		p, ok := s.pilots[name]
		if !ok {
			http.Error(w, "no such target", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBody))
		if err != nil {
			http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		ctx := r.Context()
		if detached[op] {
			ctx = context.WithoutCancel(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		defer cancel()
		start := time.Now()
		rep, err := h(ctx, p, body)
		if err != nil {
			// The body was not what this call takes: nothing ran.
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := json.Marshal(rep)
		if err != nil {
			// After a commit this loses the answer: the client reports the
			// outcome unknown, and the receipt settles it.
			s.cfg.Logger.Error("pilot remote: encoding an answer", "target", name, "op", op, "err", err)
			http.Error(w, "the answer could not be encoded", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(catalogHeader, s.digest(p).Digest)
		if _, err := w.Write(out); err != nil && detached[op] {
			s.cfg.Logger.Warn("pilot remote: the client went away before its answer; the receipt settles it",
				"target", name, "op", op, "err", err)
		}
		s.cfg.Logger.Debug("pilot remote: call", "target", name, "op", op, "ms", time.Since(start).Milliseconds())
	})
}

// digest is the wire form of p's current catalog, computed once per
// catalog the Pilot holds.
func (s *Server) digest(p pilot.Executor) *wireCatalog {
	cat := p.Catalog()
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.digests[p.Target()]; ok && d.cat == cat {
		return d.w
	}
	w := encodeCatalog(cat)
	s.digests[p.Target()] = catalogDigest{cat: cat, w: w}
	return w
}

// decode reads a call's body strictly: known fields, one value.
func decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	if dec.More() {
		return errors.New("bad request body: more than one value")
	}
	return nil
}

// failed is the envelope of an error the Pilot returned.
func failed(err error) *reply {
	return &reply{Error: &wireError{Kind: errorKind(err), Message: err.Error()}}
}

func resultReply(res *pilot.Result, err error) *reply {
	if err != nil {
		return failed(err)
	}
	if res == nil {
		return failed(errors.New("the Pilot returned no result"))
	}
	return &reply{Result: encodeResult(res)}
}

func (s *Server) catalog(_ context.Context, p pilot.Executor, _ []byte) (*reply, error) {
	return &reply{Catalog: s.digest(p)}, nil
}

func (s *Server) ping(ctx context.Context, p pilot.Executor, _ []byte) (*reply, error) {
	if err := p.Ping(ctx); err != nil {
		return failed(err), nil
	}
	return &reply{}, nil
}

func (s *Server) execute(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b executeBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	return resultReply(p.Execute(ctx, pilot.Request{Marque: b.Marque, SQL: b.SQL, Bound: b.Bound,
		ExpectBefore: b.ExpectBefore, ExpectRows: b.ExpectRows, ExpectAfter: b.ExpectAfter})), nil
}

func (s *Server) executeApproved(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b approvedBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	return resultReply(p.ExecuteApproved(ctx, pilot.ApprovedRequest{Marque: b.Marque, SQL: b.SQL, Approval: b.Approval})), nil
}

func (s *Server) rehearse(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b rehearseBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if b.Auth == nil {
		return nil, errors.New("a rehearsal inside a bound needs the grantor's signature")
	}
	return resultReply(p.Rehearse(ctx, b.SQL, b.Bound, *b.Auth, b.Principal, b.Path)), nil
}

func (s *Server) describe(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b rehearseBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	if b.Auth == nil {
		return nil, errors.New("a description inside a bound needs the grantor's signature")
	}
	return resultReply(p.Describe(ctx, b.SQL, b.Bound, *b.Auth, b.Principal, b.Path)), nil
}

func (s *Server) preview(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b rehearseBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	_, js, err := p.Preview(ctx, b.SQL)
	if err != nil {
		return failed(err), nil
	}
	// The very bytes: the humans see what the Pilot computed.
	return &reply{Report: js}, nil
}

func (s *Server) receipt(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b receiptBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	found, rows, err := p.Receipt(ctx, b.MarqueID)
	if err != nil {
		return failed(err), nil
	}
	return &reply{Receipt: &wireReceipt{Found: found, Rows: rows}}, nil
}

func (s *Server) voidReceipt(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b receiptBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	found, rows, err := p.VoidReceipt(ctx, b.MarqueID, b.RequestID, b.Principal)
	if err != nil {
		return failed(err), nil
	}
	return &reply{Receipt: &wireReceipt{Found: found, Rows: rows}}, nil
}

func (s *Server) xactStatus(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b receiptBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	st, err := p.XactStatus(ctx, b.TxID)
	if err != nil {
		return failed(err), nil
	}
	return &reply{Status: &st}, nil
}

func (s *Server) pruneReceipts(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b receiptBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	n, err := p.PruneReceipts(ctx, time.Unix(0, b.BeforeNS))
	if err != nil {
		return failed(err), nil
	}
	return &reply{Receipt: &wireReceipt{Rows: n}}, nil
}

// Serve serves on ln (plain TCP: Serve adds the TLS) until ctx ends,
// then shuts down gracefully, letting calls in flight finish (up to
// CallTimeout).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.mux,
		TLSConfig:         s.cfg.TLS,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// The response is written when the call ends, within CallTimeout.
		WriteTimeout:   s.cfg.CallTimeout + 30*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		// HTTP/1.1 only: see ServerTLS.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tls.NewListener(ln, s.cfg.TLS)) }()
	// Sessions left idle are rolled back on a clock too, not only when
	// another session call comes: a node that has gone sends none, and
	// its transaction's row locks would stay.
	reapCtx, stopReap := context.WithCancel(ctx)
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		s.sessions.reapEvery(reapCtx, min(max(s.cfg.SessionIdle/2, 10*time.Millisecond), 30*time.Second))
	}()
	defer func() { stopReap(); <-reaped }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout+5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	// What no node will commit now rolls back.
	s.sessions.closeAll()
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
