package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestStatementErrorByClass: each class of gateway.Classify is answered
// with its status, code and words; the text of anything else (the
// target's own error included) never reaches the agent.
func TestStatementErrorByClass(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.DiscardHandler)}
	sqlErr := func(code string) error { return &gateway.SQLError{RequestID: "req_1", Code: code, Message: "m"} }
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		body       string
		retryAfter string
	}{
		{"parse error", sqlErr(sqlcheck.CodeParseError), 422, `{"error":{"code":"sql_parse_error","message":"m","request_id":"req_1"}}`, ""},
		{"too deep", sqlErr(sqlcheck.CodeInputTooDeep), 422, `{"error":{"code":"sql_input_too_deep","message":"m","request_id":"req_1"}}`, ""},
		{"stacked", sqlErr(sqlcheck.CodeMultipleStatements), 422, `{"error":{"code":"sql_multiple_statements","message":"m","request_id":"req_1"}}`, ""},
		{"flood", &gateway.FloodError{RequestID: "req_2", Code: gateway.FloodTooManyWait, Message: "wait"}, 429,
			`{"error":{"code":"too_many_waiting","message":"wait","request_id":"req_2"}}`, "60"},
		{"unknown target", fmt.Errorf("gateway: %w: %q", gateway.ErrUnknownTarget, "nope"), 404,
			`{"error":{"code":"unknown_target","message":"unknown target: \"nope\""}}`, ""},
		{"logbook", fmt.Errorf("x: %w", gateway.ErrLogUnavailable), 503,
			`{"error":{"code":"logbook_unavailable","message":"the decision could not be recorded, so nothing ran; try again later"}}`, ""},
		{"anything else", errors.New(`pq: relation "secret_table" does not exist`), 500,
			`{"error":{"code":"internal","message":"the statement could not be decided or executed; nothing ran unless the request shows otherwise"}}`, ""},
	} {
		w := httptest.NewRecorder()
		s.statementError(w, httptest.NewRequest(http.MethodPost, "/v1/statements", nil), tc.err)
		if w.Code != tc.status || strings.TrimSpace(w.Body.String()) != tc.body || w.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%s: %d %s (Retry-After %q), want %d %s (%q)", tc.name, w.Code, w.Body, w.Header().Get("Retry-After"), tc.status, tc.body, tc.retryAfter)
		}
	}
}
