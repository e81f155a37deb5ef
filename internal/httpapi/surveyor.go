package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// Routes of the sampled audit and of the Surveyor's enablement. Reading the
// audit queue needs a signed request (harbormaster-session); every change
// is a signed act in the body: marking a clause auditable and reviewing a
// judgment (harbormaster-review), enabling the Surveyor for a rule and
// reinstating a suspended delegation (harbormaster-enable).
func (s *Server) registerSurveyorRoutes() {
	s.HandleFunc("GET /v1/audit", s.getAudits)
	s.HandleFunc("GET /v1/audit/{id}", s.getAudit)
	s.HandleFunc("POST /v1/audit/{id}/review", s.actOnce(s.postReview))
	s.HandleFunc("POST /v1/delegations/{id}/auditable", s.postAct(func(r *http.Request, act, sig []byte) (any, error) {
		return StatusAnswer{Status: "marked auditable"}, s.gw.MarkAuditable(r.Context(), act, sig)
	}))
	s.HandleFunc("POST /v1/delegations/{id}/surveyor", s.postAct(func(r *http.Request, act, sig []byte) (any, error) {
		return StatusAnswer{Status: "recorded"}, s.gw.EnableSurveyor(r.Context(), act, sig)
	}))
	s.HandleFunc("POST /v1/delegations/{id}/reinstate", s.postAct(func(r *http.Request, act, sig []byte) (any, error) {
		return StatusAnswer{Status: "reinstated"}, s.gw.Reinstate(r.Context(), act, sig)
	}))
}

func (s *Server) postAct(do func(r *http.Request, act, sig []byte) (any, error)) http.HandlerFunc {
	return s.actOnce(func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.readAct(w, r)
		if !ok {
			return
		}
		// The act names its delegation; the path must name the same one.
		var named struct {
			DelegationID string `json:"delegation_id"`
		}
		if err := json.Unmarshal([]byte(b.Act), &named); err == nil && named.DelegationID != r.PathValue("id") {
			writeError(w, http.StatusBadRequest, "bad_request", "the act names another delegation than the path")
			return
		}
		out, err := do(r, []byte(b.Act), []byte(b.Signature))
		if err != nil {
			s.actError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// AuditsPage is GET /v1/audit: the sampled audits of the viewer's
// targets, oldest first.
type AuditsPage struct {
	Audits     []audit.Audit `json:"audits"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

func (s *Server) getAudits(w http.ResponseWriter, r *http.Request) {
	pg, ok := readPage(w, r)
	if !ok {
		return
	}
	_, targets, err := s.humanTargets(r, nil, signing.NamespaceSession, s.gw.Targets())
	if err != nil {
		s.unauthorizedHuman(w, err)
		return
	}
	list, err := s.gw.Audits(r.Context(), r.URL.Query().Get("status"), targets)
	if err != nil {
		s.actError(w, r, err)
		return
	}
	list, next := paginate(list, func(a audit.Audit) string { return timeKey(a.Created, a.ID) }, pg)
	writeJSON(w, http.StatusOK, AuditsPage{Audits: list, NextCursor: next})
}

func (s *Server) getAudit(w http.ResponseWriter, r *http.Request) {
	_, targets, err := s.humanTargets(r, nil, signing.NamespaceSession, s.gw.Targets())
	if err != nil {
		s.unauthorizedHuman(w, err)
		return
	}
	list, err := s.gw.Audits(r.Context(), "", targets)
	if err != nil {
		s.actError(w, r, err)
		return
	}
	for _, a := range list {
		if a.ID == r.PathValue("id") {
			writeJSON(w, http.StatusOK, a)
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "no audit "+r.PathValue("id"))
}

func (s *Server) postReview(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readAct(w, r)
	if !ok {
		return
	}
	suspended, err := s.gw.ReviewAudit(r.Context(), []byte(b.Act), []byte(b.Signature))
	if err != nil {
		s.actError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ReviewAnswer{Status: "reviewed", DelegationSuspended: suspended})
}

// ReviewAnswer is what POST /v1/audit/{id}/review answers.
type ReviewAnswer struct {
	Status              string `json:"status"`
	DelegationSuspended bool   `json:"delegation_suspended"`
}

// StatusAnswer is what the Tier B acts on a delegation answer.
type StatusAnswer struct {
	Status string `json:"status"`
}
