package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// RequestIDHeader carries the HTTP request's id on every answer: the
// client's own when it sent a sane one, else one the server made. Log lines
// about the request carry it as http_request_id. It is not the statement
// request id ("req_...") that POST /v1/statements answers with.
const RequestIDHeader = "X-Request-Id"

type requestIDKey struct{}

// RequestID returns the HTTP request id the API gave ctx's request, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// saneRequestID: 1 to 128 characters a log line and a header carry as they
// are. Anything else is replaced, never echoed.
var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

func newRequestID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return "hrq_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// ServeHTTP gives the request its id, answers it through the routes and
// logs the answer at debug level.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(RequestIDHeader)
	if !saneRequestID.MatchString(id) {
		id = newRequestID()
	}
	w.Header().Set(RequestIDHeader, id)
	ctx := context.WithValue(r.Context(), requestIDKey{}, id)
	sw := &statusWriter{ResponseWriter: w}
	start := time.Now()
	s.mux.ServeHTTP(sw, r.WithContext(ctx))
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	s.log.DebugContext(ctx, "http", "method", r.Method, "path", r.URL.Path, "status", sw.status, "ms", time.Since(start).Milliseconds())
}

// statusWriter remembers the status; it flushes and unwraps so that
// streaming answers (MCP's event streams) pass through.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDHandler adds the HTTP request id of the record's context to
// every log line written with one (the *Context logging calls).
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, rec slog.Record) error {
	if id := RequestID(ctx); id != "" {
		rec.AddAttrs(slog.String("http_request_id", id))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// probeMethods are the methods a 405's Allow header may list.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowed returns the methods some route accepts on r's path, other than
// r's own: a non-empty answer makes a 404 a 405.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range probeMethods {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pat := s.mux.Handler(probe); pat != "" && pat != "/" {
			out = append(out, m)
		}
	}
	return out
}

// noRoute answers a path no route has (404), or a method the path's routes
// do not accept (405 with Allow).
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowed(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			r.URL.Path+" does not accept "+r.Method+"; it accepts "+strings.Join(allow, ", "))
		return
	}
	writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
}

// jsonContent reports whether a request body's Content-Type is JSON
// (application/json or any +json type). A request without a Content-Type
// is read as JSON, as it always was.
func jsonContent(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// publicMessage drops Go operation prefixes ("gateway: ", "store: ") from
// an error message meant for a person: every segment before ": " that is a
// single lowercase word. "unknown target: \"bank\"" stays as it is;
// "gateway: unknown target: \"bank\"" loses its first word.
func publicMessage(msg string) string {
	var out []string
	rest := msg
	for {
		i := strings.Index(rest, ": ")
		if i < 0 {
			out = append(out, rest)
			break
		}
		seg := rest[:i]
		if !goPrefix.MatchString(seg) {
			out = append(out, seg)
		}
		rest = rest[i+2:]
	}
	return strings.Join(out, ": ")
}

var goPrefix = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
