package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/leadsman"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// RegisterNotes adds GET /v1/requests/{id}/note: the Leadsman's advisory
// note on a request, for a human who may read the queue of its target
// (harbormaster-session). Agents are refused before anything is looked
// up. The note's text is model output, JSON-escaped like every response.
func RegisterNotes(s *Server, notes *leadsman.Reader) {
	s.HandleFunc("GET /v1/requests/{id}/note", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), signing.RequestScheme+" ") {
			s.unauthorizedHuman(w, errors.New("notes are for humans"))
			return
		}
		id := r.PathValue("id")
		v, err := s.gw.Request(r.Context(), id, "")
		if errors.Is(err, gateway.ErrNotFound) {
			writeError(w, http.StatusNotFound, "not_found", "no request "+id)
			return
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal", "the request could not be read")
			return
		}
		if _, _, err := s.humanTargets(r, nil, signing.NamespaceSession, []string{v.Target}); err != nil {
			s.unauthorizedHuman(w, err)
			return
		}
		n, err := notes.Note(r.Context(), id)
		switch {
		case errors.Is(err, leadsman.ErrNoNote):
			writeError(w, http.StatusNotFound, "no_note", "the Leadsman has written no note on request "+id)
		case err != nil:
			s.log.ErrorContext(r.Context(), "leadsman note", "err", err)
			writeError(w, http.StatusInternalServerError, "internal", "the note could not be read")
		default:
			writeJSON(w, http.StatusOK, n)
		}
	})
}
