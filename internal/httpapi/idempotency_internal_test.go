package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestIdempotencyKeptAnswers: an answer over the cap is not kept (a retry
// is told the request id), and an answer that says nothing happened (503)
// frees the key for a retry that runs.
func TestIdempotencyKeptAnswers(t *testing.T) {
	s, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	big := `{"request_id":"req_big","rows":"` + strings.Repeat("x", maxKeptAnswer) + `"}`
	do := func(key string, answer func(w http.ResponseWriter)) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/statements", strings.NewReader("{}"))
		r.Header.Set(IdempotencyKeyHeader, key)
		w := httptest.NewRecorder()
		s.once(w, r, "agent:a", []byte("{}"), func(w http.ResponseWriter) { runs++; answer(w) })
		return w
	}
	writeBig := func(w http.ResponseWriter) { w.WriteHeader(200); _, _ = w.Write([]byte(big)) }
	if w := do("big", writeBig); w.Code != 200 || w.Body.Len() != len(big) {
		t.Fatalf("first: %d, %d bytes", w.Code, w.Body.Len())
	}
	w := do("big", writeBig)
	if w.Code != 409 || !strings.Contains(w.Body.String(), "idempotency_answer_too_large") || !strings.Contains(w.Body.String(), "req_big") || runs != 1 {
		t.Fatalf("retry of a big answer: %d %s (runs %d)", w.Code, w.Body.String(), runs)
	}
	unavailable := func(w http.ResponseWriter) { writeError(w, 503, "logbook_unavailable", "nothing happened") }
	do("busy", unavailable)
	do("busy", unavailable)
	if runs != 3 {
		t.Fatalf("a 503 answer was kept: %d runs, want 3", runs)
	}
}
