package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// Humans authenticate each request with their SSH key (signing.SignRequest):
// the allowed-signers file says, per namespace and target, who may read the
// queue (harbormaster-session) or flip a switch (harbormaster-switch).
// Approvals, denials and revocations need no session at all: the signature
// over the act is the authority.

func (s *Server) registerHumanRoutes() {
	s.HandleFunc("GET /v1/queue", s.getQueue)
	s.HandleFunc("GET /v1/requests/{id}/approval", s.getApproval)
	s.HandleFunc("POST /v1/requests/{id}/preview", s.postPreview)
	s.HandleFunc("POST /v1/requests/{id}/approve", s.actOnce(s.postApprove))
	s.HandleFunc("POST /v1/requests/{id}/deny", s.actOnce(s.postDeny))
	s.HandleFunc("POST /v1/delegations/{id}/revoke", s.actOnce(s.postRevoke))
	s.HandleFunc("GET /v1/switches", s.getSwitches)
	s.HandleFunc("POST /v1/switches", s.postSwitch)
}

// humanTargets verifies a signed request and returns the targets (of those
// given) the signer may act on in namespace. VerifyRequest accepts a request
// once per target in this process; with Config.ClaimRequest the request is
// also claimed in the store, once for every node, so a header replayed
// through another node is refused as well. A claim that cannot be made
// refuses the request.
func (s *Server) humanTargets(r *http.Request, body []byte, namespace string, targets []string) (signing.Signer, []string, error) {
	if s.signers == nil {
		return signing.Signer{}, nil, errors.New("no signers file is configured")
	}
	p, err := signing.ParseRequestAuth(r.Header.Get("Authorization"))
	if err != nil {
		return signing.Signer{}, nil, err
	}
	now := time.Now() // the Server has no clock of its own
	var who signing.Signer
	var ok []string
	var lastErr error
	for _, t := range targets {
		sg, err := s.signers.VerifyRequest(p, namespace, r.Method, r.URL.RequestURI(), body, t, now)
		if err != nil {
			if lastErr == nil || !errors.Is(lastErr, signing.ErrRequestReplayed) {
				lastErr = err // a replay is the reason worth telling
			}
			continue
		}
		if who.Name != "" && sg.Name != who.Name {
			return signing.Signer{}, nil, errors.New("the key is listed under more than one name")
		}
		who = sg
		ok = append(ok, t)
	}
	if len(ok) == 0 {
		if lastErr == nil {
			lastErr = errors.New("no target")
		}
		return signing.Signer{}, nil, lastErr
	}
	if s.claim != nil {
		id := signing.RequestID(namespace, who.Fingerprint, r.Method, r.URL.RequestURI(), p.Unix, body)
		first, err := s.claim(r.Context(), id, time.Unix(p.Unix, 0).Add(signing.MaxRequestAge))
		if err != nil {
			s.log.ErrorContext(r.Context(), "signed request replay check", "err", err)
			return signing.Signer{}, nil, errors.New("the request could not be checked against replays; try again")
		}
		if !first {
			return signing.Signer{}, nil, fmt.Errorf("%w (through another node)", signing.ErrRequestReplayed)
		}
	}
	return who, ok, nil
}

func (s *Server) unauthorizedHuman(w http.ResponseWriter, err error) {
	s.log.Warn("unauthorized", "front", "http", "why", "signed human request refused", "err", err)
	w.Header().Set("WWW-Authenticate", signing.RequestScheme)
	writeError(w, http.StatusUnauthorized, "unauthorized", "sign the request with an allowed SSH key ("+signing.RequestScheme+"): "+err.Error())
}

// QueuePage is GET /v1/queue: the requests waiting for a human on the
// viewer's targets, oldest first.
type QueuePage struct {
	Requests   []*gateway.RequestView `json:"requests"`
	Viewer     string                 `json:"viewer"`
	NextCursor string                 `json:"next_cursor,omitempty"`
}

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) {
	pg, ok := readPage(w, r)
	if !ok {
		return
	}
	who, targets, err := s.humanTargets(r, nil, signing.NamespaceSession, s.gw.Targets())
	if err != nil {
		s.unauthorizedHuman(w, err)
		return
	}
	q, err := s.gw.Queue(r.Context(), targets)
	if err != nil {
		s.log.ErrorContext(r.Context(), "queue", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the queue could not be read")
		return
	}
	q, next := paginate(q, func(v *gateway.RequestView) string { return timeKey(v.Created, v.ID) }, pg)
	writeJSON(w, http.StatusOK, QueuePage{Requests: q, Viewer: who.Name, NextCursor: next})
}

// requestForHuman serves GET /v1/requests/{id} to a human: everything,
// the preview included, computed now if the request is waiting and has
// none (a human is asking: DESIGN.md invariant 10).
// Who asks is settled before the request is looked up, so that a caller
// who is not such a human cannot learn which request ids exist; a request
// of a target the human may not read is not found.
func (s *Server) requestForHuman(w http.ResponseWriter, r *http.Request) {
	s.previewForHuman(w, r, nil, false)
}

// postPreview is POST /v1/requests/{id}/preview: a human asks for a fresh
// preview of a waiting request, which every approver then shares.
func (s *Server) postPreview(w http.ResponseWriter, r *http.Request) {
	body, ok := s.bufferBody(w, r)
	if !ok {
		return
	}
	s.previewForHuman(w, r, body, true)
}

// previewForHuman answers a signed human request for a request, with its
// preview (computed now when it has none, or with refresh).
func (s *Server) previewForHuman(w http.ResponseWriter, r *http.Request, body []byte, refresh bool) {
	_, targets, err := s.humanTargets(r, body, signing.NamespaceSession, s.gw.Targets())
	if err != nil {
		s.unauthorizedHuman(w, err)
		return
	}
	v, err := s.gw.Request(r.Context(), r.PathValue("id"), "")
	if err == nil && slices.Contains(targets, v.Target) {
		v, err = s.gw.Preview(r.Context(), v.ID, refresh)
	}
	if errors.Is(err, gateway.ErrNotFound) || err == nil && !slices.Contains(targets, v.Target) {
		writeError(w, http.StatusNotFound, "not_found", "no request "+r.PathValue("id"))
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "request lookup", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the request could not be read")
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// getApproval settles who asks before it looks the request up, as
// requestForHuman does: a caller who is not such a human cannot learn
// which request ids exist.
func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	_, targets, err := s.humanTargets(r, nil, signing.NamespaceSession, s.gw.Targets())
	if err != nil {
		s.unauthorizedHuman(w, err)
		return
	}
	v, err := s.gw.Request(r.Context(), id, "")
	if err == nil && !slices.Contains(targets, v.Target) {
		err = fmt.Errorf("request %s: %w", id, gateway.ErrNotFound)
	}
	if err != nil {
		s.actError(w, r, err)
		return
	}
	ap, err := s.gw.ProposeApproval(r.Context(), id)
	if err != nil {
		s.actError(w, r, err)
		return
	}
	// Proposing may have previewed it just now: show what the approval signs.
	if v, err = s.gw.Request(r.Context(), id, ""); err != nil {
		s.actError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ApprovalProposal{Approval: string(ap), Request: v})
}

type actBody struct {
	Act       string `json:"act"`
	Signature string `json:"signature"`
}

func (s *Server) readAct(w http.ResponseWriter, r *http.Request) (actBody, bool) {
	var b actBody
	if !decode(w, r, &b) {
		return b, false
	}
	if b.Act == "" || b.Signature == "" {
		writeError(w, http.StatusBadRequest, "bad_request", `both "act" (the signed canonical bytes) and "signature" are required`)
		return b, false
	}
	return b, true
}

func (s *Server) actError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, gateway.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, gateway.ErrNotWaiting), errors.Is(err, gateway.ErrAlreadyRevoked), errors.Is(err, audit.ErrReviewed):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, gateway.ErrNotPreviewed):
		writeError(w, http.StatusConflict, "not_previewed", err.Error())
	case errors.Is(err, gateway.ErrPreviewChanged):
		writeError(w, http.StatusConflict, "preview_changed", err.Error())
	case errors.Is(err, gateway.ErrActRefused):
		writeError(w, http.StatusForbidden, "act_refused", err.Error())
	case errors.Is(err, gateway.ErrLogUnavailable):
		writeError(w, http.StatusServiceUnavailable, "logbook_unavailable", "the act could not be recorded, so nothing happened; try again")
	default:
		s.log.ErrorContext(r.Context(), "act", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the act could not be carried out")
	}
}

func (s *Server) postApprove(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readAct(w, r)
	if !ok {
		return
	}
	v, err := s.gw.Approve(r.Context(), r.PathValue("id"), []byte(b.Act), []byte(b.Signature))
	if err != nil {
		s.actError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) postDeny(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readAct(w, r)
	if !ok {
		return
	}
	v, err := s.gw.Deny(r.Context(), r.PathValue("id"), []byte(b.Act), []byte(b.Signature))
	if err != nil {
		s.actError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) postRevoke(w http.ResponseWriter, r *http.Request) {
	b, ok := s.readAct(w, r)
	if !ok {
		return
	}
	if rv, err := acts.ParseRevocation([]byte(b.Act)); err == nil && rv.DelegationID != r.PathValue("id") {
		writeError(w, http.StatusBadRequest, "bad_request", "the revocation names another delegation")
		return
	}
	d, err := s.gw.Revoke(r.Context(), []byte(b.Act), []byte(b.Signature))
	if err != nil {
		s.actError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, DelegationAnswer{Delegation: scope.ViewDelegation(d, time.Now())})
}

func (s *Server) getSwitches(w http.ResponseWriter, r *http.Request) {
	if s.switches == nil {
		writeJSON(w, http.StatusOK, SwitchesView{Switches: []switches.State{}, TierB: map[string]bool{}, WhyOff: map[string]string{}})
		return
	}
	tierB := map[string]bool{}
	reasons := map[string]string{}
	for _, t := range s.gw.Targets() {
		on, why := s.switches.TierBOn(t)
		tierB[t] = on
		if !on {
			reasons[t] = why
		}
	}
	writeJSON(w, http.StatusOK, SwitchesView{Switches: s.switches.Snapshot(), TierB: tierB, WhyOff: reasons,
		StalenessMS: s.switches.Staleness().Milliseconds()})
}

type switchBody struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	On     bool   `json:"on"`
}

// postSwitch flips a switch: an operator act, signed in the switch
// namespace, logged. The deployment switch needs a signer allowed for
// every target.
func (s *Server) postSwitch(w http.ResponseWriter, r *http.Request) {
	body, ok := s.bufferBody(w, r)
	if !ok {
		return
	}
	var b switchBody
	if !decode(w, r, &b) {
		return
	}
	if b.Name != switches.TierB {
		writeError(w, http.StatusBadRequest, "bad_request", `the only switch is "tier_b"`)
		return
	}
	scope, targets := switches.Deployment, s.gw.Targets()
	if b.Target != "" {
		if _, ok := s.gw.Pilot(b.Target); !ok {
			writeError(w, http.StatusNotFound, "unknown_target", "unknown target "+b.Target)
			return
		}
		scope, targets = switches.TargetScope(b.Target), []string{b.Target}
	}
	who, allowed, err := s.humanTargets(r, body, signing.NamespaceSwitch, targets)
	if err != nil || len(allowed) != len(targets) {
		if err == nil {
			err = errors.New("the deployment switch needs a signer allowed for every target (" + strings.Join(targets, ", ") + ")")
		}
		s.unauthorizedHuman(w, err)
		return
	}
	// The signed request is authenticated (and claimed) first: a retry is
	// signed afresh, and its key is the signer's.
	s.once(w, r, "signer:"+who.Fingerprint, body, func(w http.ResponseWriter) {
		if err := s.gw.SetSwitch(r.Context(), switches.Key{Name: b.Name, Scope: scope}, b.On, who.Name); err != nil {
			s.actError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, SwitchAnswer{Name: b.Name, Scope: scope, On: b.On, By: who.Name})
	})
}

// SwitchAnswer is what POST /v1/switches answers.
type SwitchAnswer struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	On    bool   `json:"on"`
	By    string `json:"by"`
}

// ApprovalProposal is GET /v1/requests/{id}/approval: the canonical
// approval to sign, and the request it approves (its preview included).
type ApprovalProposal struct {
	Approval string               `json:"approval"`
	Request  *gateway.RequestView `json:"request"`
}

// SwitchesView is GET /v1/switches: every switch, whether Tier B is on
// for each target and, where it is off, why, and how old this node's view
// of the switches is.
type SwitchesView struct {
	Switches    []switches.State  `json:"switches"`
	TierB       map[string]bool   `json:"tier_b"`
	WhyOff      map[string]string `json:"why_off"`
	StalenessMS int64             `json:"staleness_ms"`
}
