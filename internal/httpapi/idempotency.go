package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// IdempotencyKeyHeader makes a POST safe to retry: the first request under
// a key runs, and a retry with the same key and the same body gets the
// first answer again (with Idempotency-Replayed: true) without running.
//
// A key belongs to a principal: the agent of the bearer token
// (POST /v1/statements), the signer of the act in the body (approve, deny,
// revoke, review, the Tier B acts, POST /v1/delegations), or the signer of
// the request (POST /v1/switches). An answer is only ever given back to its
// own principal, so a key reveals nothing across agents (invariant 10). For
// a signed act the answer goes back only to the byte-identical signed act,
// which only its signer holds.
//
// The same key with another body (or another endpoint) is 422
// idempotency_key_reused; a key whose first request is still running is
// 409 idempotency_in_progress with Retry-After. An answer that says nothing
// happened (429, 503) is not kept: a retry under its key runs afresh. Keys
// are kept for Config.IdempotencyTTL, in the control store when
// Config.Idempotency is set, so every node on the store knows them.
const IdempotencyKeyHeader = "Idempotency-Key"

// IdempotencyStore keeps Idempotency-Keys (store.Store implements it).
type IdempotencyStore interface {
	BeginIdempotent(ctx context.Context, scope, key, fingerprint string, nowNS, expiresNS int64) (store.IdempotencyEntry, bool, error)
	CompleteIdempotent(ctx context.Context, scope, key string, status int, body string, expiresNS int64) error
	ReleaseIdempotent(ctx context.Context, scope, key string) error
}

// maxKeptAnswer caps an answer kept under a key: a larger one (a big
// result) is replaced by its request id.
const maxKeptAnswer = 1 << 20

// DefaultIdempotencyTTL is how long a key and its answer are kept.
const DefaultIdempotencyTTL = 24 * time.Hour

// saneKey: 1 to 255 visible ASCII characters (a UUID is the usual choice).
var saneKey = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)

// agentOnce wraps an agent route: the key is the token's principal's.
func (s *Server) agentOnce(h func(w http.ResponseWriter, r *http.Request, principal string)) func(w http.ResponseWriter, r *http.Request, principal string) {
	return func(w http.ResponseWriter, r *http.Request, principal string) {
		body, ok := s.bufferBody(w, r)
		if !ok {
			return
		}
		s.once(w, r, "agent:"+principal, body, func(w http.ResponseWriter) { h(w, r, principal) })
	}
}

// actOnce wraps a route whose body is a signed act ({"act","signature"} or
// {"yaml","signature"}): the key is the act's signer's. A body whose
// signature cannot be read runs without the key; its act is refused.
func (s *Server) actOnce(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(IdempotencyKeyHeader) == "" {
			h(w, r)
			return
		}
		body, ok := s.bufferBody(w, r)
		if !ok {
			return
		}
		var b struct {
			Signature string `json:"signature"`
		}
		_ = json.Unmarshal(body, &b)
		info, err := signing.ParseSignature([]byte(b.Signature))
		if err != nil {
			h(w, r)
			return
		}
		s.once(w, r, "signer:"+info.Fingerprint, body, func(w http.ResponseWriter) { h(w, r) })
	}
}

// bufferBody reads the capped body and puts it back for the handler.
func (s *Server) bufferBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil || len(body) > MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over 1 MiB")
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// once runs do under the request's Idempotency-Key in scope, or at once
// when it has none.
func (s *Server) once(w http.ResponseWriter, r *http.Request, scope string, body []byte, do func(w http.ResponseWriter)) {
	key := r.Header.Get(IdempotencyKeyHeader)
	if key == "" {
		do(w)
		return
	}
	if !saneKey.MatchString(key) {
		writeError(w, http.StatusBadRequest, "bad_request", "Idempotency-Key must be 1 to 255 visible ASCII characters, such as a UUID")
		return
	}
	sum := sha256.New()
	io.WriteString(sum, r.Method+" "+r.URL.Path+"\n")
	sum.Write(body)
	fp := hex.EncodeToString(sum.Sum(nil))
	ctx := context.WithoutCancel(r.Context()) // the answer is kept even if the client has gone
	now := time.Now()
	e, first, err := s.idem.BeginIdempotent(ctx, scope, key, fp, now.UnixNano(), now.Add(s.idemTTL).UnixNano())
	if err != nil {
		s.log.ErrorContext(ctx, "idempotency key", "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "idempotency_unavailable", "the Idempotency-Key could not be checked, so nothing ran; try again")
		return
	}
	if !first {
		switch {
		case e.Fingerprint != fp:
			writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused",
				"this Idempotency-Key was used for another request (another body or endpoint); use a new key")
		case e.State != store.IdempotencyDone:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusConflict, "idempotency_in_progress",
				"the first request under this Idempotency-Key is still running; retry later for its answer")
		case e.Status == 0:
			// The first answer was too large to keep (see below).
			var ref struct {
				RequestID string `json:"request_id"`
			}
			_ = json.Unmarshal([]byte(e.Body), &ref)
			msg := "the first answer under this Idempotency-Key was over 1 MiB, so it was not kept; the request ran once"
			if ref.RequestID != "" {
				msg += ": read it with GET /v1/requests/" + ref.RequestID
			}
			writeError(w, http.StatusConflict, "idempotency_answer_too_large", msg)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Idempotency-Replayed", "true")
			w.WriteHeader(e.Status)
			_, _ = io.WriteString(w, e.Body)
		}
		return
	}
	rec := &recorder{ResponseWriter: w}
	do(rec)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status == http.StatusTooManyRequests || rec.status == http.StatusServiceUnavailable {
		// Nothing happened: the key is free again.
		if err := s.idem.ReleaseIdempotent(ctx, scope, key); err != nil {
			s.log.ErrorContext(ctx, "idempotency key release", "err", err)
		}
		return
	}
	status, answer := rec.status, rec.body.String()
	if len(answer) > maxKeptAnswer {
		// A large result is not kept in the control store: a retry is told
		// the request id instead (status 0 marks it).
		var ref struct {
			RequestID string `json:"request_id"`
		}
		_ = json.Unmarshal(rec.body.Bytes(), &ref)
		j, _ := json.Marshal(ref)
		status, answer = 0, string(j)
	}
	if err := s.idem.CompleteIdempotent(ctx, scope, key, status, answer, time.Now().Add(s.idemTTL).UnixNano()); err != nil {
		// The key stays running until it expires: a retry is told it is in
		// progress, never run again.
		s.log.ErrorContext(ctx, "idempotency key complete", "err", err)
	}
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// memIdempotency keeps keys in this process, for a Server without a store.
type memIdempotency struct {
	mu sync.Mutex
	m  map[[2]string]store.IdempotencyEntry
}

func newMemIdempotency() *memIdempotency {
	return &memIdempotency{m: map[[2]string]store.IdempotencyEntry{}}
}

func (m *memIdempotency) BeginIdempotent(_ context.Context, scope, key, fp string, nowNS, expiresNS int64) (store.IdempotencyEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.m {
		if e.ExpiresNS < nowNS {
			delete(m.m, k)
		}
	}
	k := [2]string{scope, key}
	if e, ok := m.m[k]; ok {
		return e, false, nil
	}
	e := store.IdempotencyEntry{Scope: scope, Key: key, Fingerprint: fp, State: store.IdempotencyRunning, CreatedNS: nowNS, ExpiresNS: expiresNS}
	m.m[k] = e
	return e, true, nil
}

func (m *memIdempotency) CompleteIdempotent(_ context.Context, scope, key string, status int, body string, expiresNS int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{scope, key}
	e, ok := m.m[k]
	if !ok || e.State != store.IdempotencyRunning {
		return errNotRunning(key)
	}
	e.State, e.Status, e.Body, e.ExpiresNS = store.IdempotencyDone, status, body, expiresNS
	m.m[k] = e
	return nil
}

func (m *memIdempotency) ReleaseIdempotent(_ context.Context, scope, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{scope, key}
	if e, ok := m.m[k]; ok && e.State == store.IdempotencyRunning {
		delete(m.m, k)
	}
	return nil
}

type errNotRunning string

func (e errNotRunning) Error() string {
	return "idempotency key " + strconv.Quote(string(e)) + " is not running"
}
