package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// Client transactions over the wire (pilot.Sessions): the Pilot holds the
// target transaction on its side, under a random session id the node
// names in each call. A session idle longer than SessionIdle (the node
// has gone, or lost its answer) is rolled back by the server; so is every
// session when the server stops.

const (
	opTxBegin     = "tx-begin"
	opTxExecute   = "tx-execute"
	opTxSavepoint = "tx-savepoint"
	opTxCommit    = "tx-commit"
	opTxRollback  = "tx-rollback"
)

// Error kinds of the session calls.
const (
	kindSessionAborted = "session_aborted"
	kindSessionBroken  = "session_broken"
	kindSavepoint      = "savepoint"
	kindRolledBack     = "rolled_back"
	kindNoSession      = "no_session"
)

// DefaultSessionIdle is ServerConfig.SessionIdle's default: longer than
// the wire front's own bounds on an open transaction (60 s idle, 10
// minutes open), so the server reaps only what a node left behind.
const DefaultSessionIdle = 15 * time.Minute

// txBody is a session call's body.
type txBody struct {
	Session   string       `json:"session,omitempty"`
	Isolation string       `json:"isolation,omitempty"`
	Execute   *executeBody `json:"execute,omitempty"`
	Verb      string       `json:"verb,omitempty"`
	Name      string       `json:"name,omitempty"`
}

// wireSession is tx-begin's answer.
type wireSession struct {
	ID   string `json:"id"`
	TxID string `json:"txid"`
}

// serverSessions are the transactions a server holds.
type serverSessions struct {
	idle time.Duration

	mu   sync.Mutex
	byID map[string]*heldSession
}

type heldSession struct {
	target string
	sess   pilot.TxSession
	mu     sync.Mutex // one call at a time
	last   time.Time
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// get finds a session of target, reaping the idle ones first.
func (ss *serverSessions) get(target, id string) (*heldSession, error) {
	ss.reap()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	h, ok := ss.byID[id]
	if !ok || h.target != target {
		return nil, errNoSession
	}
	return h, nil
}

var errNoSession = errors.New("no such transaction on this Pilot: it ended, or was rolled back after it was left idle")

func (ss *serverSessions) reap() {
	now := time.Now()
	var idle []*heldSession
	ss.mu.Lock()
	for id, h := range ss.byID {
		if h.mu.TryLock() {
			if now.Sub(h.last) > ss.idle {
				idle = append(idle, h)
				delete(ss.byID, id)
			}
			h.mu.Unlock()
		}
	}
	ss.mu.Unlock()
	for _, h := range idle {
		h.sess.Rollback()
	}
}

// reapEvery reaps the idle sessions every period until ctx ends.
func (ss *serverSessions) reapEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ss.reap()
		}
	}
}

func (ss *serverSessions) drop(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, id)
}

// closeAll rolls back every session (the server stops).
func (ss *serverSessions) closeAll() {
	ss.mu.Lock()
	all := ss.byID
	ss.byID = map[string]*heldSession{}
	ss.mu.Unlock()
	for _, h := range all {
		h.mu.Lock()
		h.sess.Rollback()
		h.mu.Unlock()
	}
}

// sessionFailed is the envelope of a session call's error.
func sessionFailed(err error) *reply {
	var sp *pilot.SavepointError
	switch {
	case errors.As(err, &sp):
		return &reply{Error: &wireError{Kind: kindSavepoint, Code: sp.Code, Message: sp.Message}}
	case errors.Is(err, pilot.ErrSessionAborted):
		return &reply{Error: &wireError{Kind: kindSessionAborted, Message: err.Error()}}
	case errors.Is(err, pilot.ErrSessionBroken):
		return &reply{Error: &wireError{Kind: kindSessionBroken, Message: err.Error()}}
	case errors.Is(err, pilot.ErrRolledBack):
		return &reply{Error: &wireError{Kind: kindRolledBack, Message: err.Error()}}
	case errors.Is(err, errNoSession):
		return &reply{Error: &wireError{Kind: kindNoSession, Message: err.Error()}}
	}
	return failed(err)
}

func (s *Server) txBegin(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	var b txBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	ps, ok := p.(pilot.Sessions)
	if !ok {
		return failed(errors.New("this Pilot holds no transactions")), nil
	}
	// The transaction outlives this call: not the request's context.
	sess, err := ps.Begin(context.WithoutCancel(ctx), pilot.TxOptions{Isolation: b.Isolation})
	if err != nil {
		return failed(err), nil
	}
	id := newSessionID()
	s.sessions.mu.Lock()
	s.sessions.byID[id] = &heldSession{target: p.Target(), sess: sess, last: time.Now()}
	s.sessions.mu.Unlock()
	return &reply{Session: &wireSession{ID: id, TxID: sess.ID()}}, nil
}

// withSession runs f on the call's session, one call at a time.
func (s *Server) withSession(p pilot.Executor, body []byte, f func(*heldSession, txBody) *reply) (*reply, error) {
	var b txBody
	if err := decode(body, &b); err != nil {
		return nil, err
	}
	h, err := s.sessions.get(p.Target(), b.Session)
	if err != nil {
		return sessionFailed(err), nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { h.last = time.Now() }()
	return f(h, b), nil
}

func (s *Server) txExecute(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	return s.withSession(p, body, func(h *heldSession, b txBody) *reply {
		if b.Execute == nil {
			return failed(errors.New("tx-execute without a statement"))
		}
		e := b.Execute
		res, err := h.sess.Execute(ctx, pilot.Request{Marque: e.Marque, SQL: e.SQL, Bound: e.Bound,
			ExpectBefore: e.ExpectBefore, ExpectRows: e.ExpectRows, ExpectAfter: e.ExpectAfter})
		if err != nil {
			return sessionFailed(err)
		}
		return resultReply(res, nil)
	})
}

func (s *Server) txSavepoint(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	return s.withSession(p, body, func(h *heldSession, b txBody) *reply {
		if err := h.sess.Savepoint(ctx, b.Verb, b.Name); err != nil {
			return sessionFailed(err)
		}
		return &reply{}
	})
}

func (s *Server) txCommit(ctx context.Context, p pilot.Executor, body []byte) (*reply, error) {
	return s.withSession(p, body, func(h *heldSession, b txBody) *reply {
		defer s.sessions.drop(b.Session)
		if err := h.sess.Commit(ctx); err != nil {
			return sessionFailed(err)
		}
		return &reply{}
	})
}

func (s *Server) txRollback(_ context.Context, p pilot.Executor, body []byte) (*reply, error) {
	return s.withSession(p, body, func(h *heldSession, b txBody) *reply {
		defer s.sessions.drop(b.Session)
		h.sess.Rollback()
		return &reply{}
	})
}

// Begin opens a client transaction on the remote Pilot (pilot.Sessions).
func (c *Client) Begin(ctx context.Context, o pilot.TxOptions) (pilot.TxSession, error) {
	rep, _, err := c.call(ctx, opTxBegin, txBody{Isolation: o.Isolation})
	if err != nil {
		return nil, err
	}
	if rep.Session == nil || rep.Session.ID == "" {
		return nil, fmt.Errorf("pilot remote %s: %s: the answer holds no session", c.cfg.Target, opTxBegin)
	}
	return &remoteSession{c: c, id: rep.Session.ID, txid: rep.Session.TxID}, nil
}

var _ pilot.Sessions = (*Client)(nil)

// remoteSession is a transaction a remote Pilot holds.
type remoteSession struct {
	c    *Client
	id   string
	txid string
}

func (r *remoteSession) ID() string { return r.txid }

// sessionError maps a session call's error back to the Pilot's own.
func sessionError(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Kind {
	case kindSavepoint:
		return &pilot.SavepointError{Code: e.Code, Message: e.Message}
	case kindSessionAborted:
		return fmt.Errorf("%w (%s)", pilot.ErrSessionAborted, e.Error())
	case kindSessionBroken, kindNoSession:
		return fmt.Errorf("%w (%s)", pilot.ErrSessionBroken, e.Error())
	case kindRolledBack:
		return fmt.Errorf("%w (%s)", pilot.ErrRolledBack, e.Error())
	}
	return err
}

func (r *remoteSession) Execute(ctx context.Context, req pilot.Request) (*pilot.Result, error) {
	res, err := r.c.execute(ctx, opTxExecute, txBody{Session: r.id, Execute: &executeBody{Marque: req.Marque, SQL: req.SQL,
		Bound: req.Bound, ExpectBefore: req.ExpectBefore, ExpectRows: req.ExpectRows, ExpectAfter: req.ExpectAfter}})
	return res, sessionError(err)
}

func (r *remoteSession) Savepoint(ctx context.Context, verb, name string) error {
	_, _, err := r.c.call(ctx, opTxSavepoint, txBody{Session: r.id, Verb: verb, Name: name})
	return sessionError(err)
}

func (r *remoteSession) Commit(ctx context.Context) error {
	_, sent, err := r.c.call(context.WithoutCancel(ctx), opTxCommit, txBody{Session: r.id})
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return sessionError(err)
	case !sent:
		// Never reached the Pilot: it rolls the transaction back when it
		// has been idle long enough.
		return fmt.Errorf("pilot remote %s: commit: %w", r.c.cfg.Target, err)
	}
	return fmt.Errorf("pilot remote %s: commit: %w: %w", r.c.cfg.Target, pilot.ErrCommitUnknown, err)
}

func (r *remoteSession) Rollback() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := r.c.call(ctx, opTxRollback, txBody{Session: r.id}); err != nil {
		// The server rolls it back when it has been idle long enough.
		r.c.cfg.Logger.Warn("pilot remote: rollback", "target", r.c.cfg.Target, "err", err)
	}
}
