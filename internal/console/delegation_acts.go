package console

import (
	"net/http"
	"strconv"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// The acts on a delegation, each the same signed act as over the API: a
// revocation (POST /v1/delegations/{id}/revoke), a reviewer's mark that a
// residual clause is auditable (.../auditable), the Surveyor's enablement
// for a residual rule (.../surveyor), a reinstatement of a suspended fast
// path (.../reinstate). Preparing one shows its canonical
// bytes and the ssh-keygen command; submitting passes the pasted signature
// to the gateway call the API makes.

// pendingAct is a prepared act waiting for its signature.
type pendingAct struct {
	Kind      string
	Title     string
	Bytes     string
	Namespace string
	Command   string
}

var delegationActs = map[string]struct {
	title, namespace, file string
}{
	"revoke":    {"Revoke this delegation", signing.NamespaceRevocation, "revocation.json"},
	"auditable": {"Mark the residual clause auditable", signing.NamespaceReview, "auditable.json"},
	"reinstate": {"Reinstate the fast path", signing.NamespaceEnable, "reinstate.json"},
	"enable":    {"Enable or disable the Surveyor for a residual rule", signing.NamespaceEnable, "enable.json"},
}

func (c *Console) postDelegationPrepare(w http.ResponseWriter, r *http.Request, s *Session) {
	d := c.cfg.Gateway.Registry().Delegation(r.PathValue("id"))
	if d == nil || !s.Sees(d.Target) {
		c.fail(w, r, s, http.StatusNotFound, "Not found", "There is no delegation "+r.PathValue("id")+" on your targets.")
		return
	}
	kind := r.PostFormValue("kind")
	spec, ok := delegationActs[kind]
	if !ok {
		c.fail(w, r, s, http.StatusBadRequest, "Bad request", "There is no such act on a delegation.")
		return
	}
	note := r.PostFormValue("note")
	if note == "" && kind != "enable" { // an enablement carries no note
		c.fail(w, r, s, http.StatusBadRequest, "Bad request", "The act needs a reason or a note.")
		return
	}
	stamp := acts.Stamp(c.cfg.Clock())
	var act any
	switch kind {
	case "revoke":
		act = acts.Revocation{Version: 1, Kind: acts.KindRevocation, DelegationID: d.ID, Target: d.Target, Reason: note, Time: stamp}
	case "auditable", "enable":
		rule, err := strconv.Atoi(r.PostFormValue("rule"))
		if err != nil || rule < 0 || rule >= len(d.Bound.Rules) || d.Bound.Rules[rule].Residual == "" {
			c.fail(w, r, s, http.StatusBadRequest, "Bad request", "Name a rule with a residual clause.")
			return
		}
		if kind == "auditable" {
			act = acts.Auditable{Version: 1, Kind: acts.KindAuditable, DelegationID: d.ID, Rule: rule, Note: note, Time: stamp}
			break
		}
		if c.cfg.Surveyor == nil {
			c.fail(w, r, s, http.StatusConflict, "No Surveyor", "This node has no Surveyor configured, so there is nothing to enable.")
			return
		}
		act = acts.Enable{Version: 1, Kind: acts.KindEnable, DelegationID: d.ID, Rule: rule, Surveyor: c.cfg.Surveyor.Identity(),
			Bundle: c.cfg.Surveyor.Bundle().Version, On: r.PostFormValue("on") == "true", Time: stamp}
	case "reinstate":
		act = acts.Reinstate{Version: 1, Kind: acts.KindReinstate, DelegationID: d.ID, Note: note, Time: stamp}
	}
	b, err := acts.Canonical(act)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Act", err.Error())
		return
	}
	p, _ := c.delegationPage(r, s, d.ID)
	p.Pending = &pendingAct{Kind: kind, Title: spec.title, Bytes: string(b), Namespace: spec.namespace,
		Command: "ssh-keygen -Y sign -n " + spec.namespace + " -f ~/.ssh/id_ed25519 " + spec.file}
	c.render(w, r, http.StatusOK, "delegation", s, page{Title: "Delegation " + d.ID, Nav: "delegations", Data: p,
		Notice: "Sign the act below within " + acts.MaxActAge.String() + "."})
}

func (c *Console) postDelegationAct(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	act, sig := []byte(formText(r, "act")), []byte(normalizeSig(r.PostFormValue("signature")))
	var err error
	// Each the same call as the API's, with the API's check that the act
	// names the delegation of the path.
	switch r.PostFormValue("kind") {
	case "revoke":
		if rv, perr := acts.ParseRevocation(act); perr == nil && rv.DelegationID != id {
			c.fail(w, r, s, http.StatusBadRequest, "Bad request", "The revocation names another delegation.")
			return
		}
		_, err = c.cfg.Gateway.Revoke(r.Context(), act, sig)
	case "auditable":
		if a, perr := acts.ParseAuditable(act); perr == nil && a.DelegationID != id {
			c.fail(w, r, s, http.StatusBadRequest, "Bad request", "The act names another delegation.")
			return
		}
		err = c.cfg.Gateway.MarkAuditable(r.Context(), act, sig)
	case "enable":
		if a, perr := acts.ParseEnable(act); perr == nil && a.DelegationID != id {
			c.fail(w, r, s, http.StatusBadRequest, "Bad request", "The act names another delegation.")
			return
		}
		err = c.cfg.Gateway.EnableSurveyor(r.Context(), act, sig)
	case "reinstate":
		if a, perr := acts.ParseReinstate(act); perr == nil && a.DelegationID != id {
			c.fail(w, r, s, http.StatusBadRequest, "Bad request", "The act names another delegation.")
			return
		}
		err = c.cfg.Gateway.Reinstate(r.Context(), act, sig)
	default:
		c.fail(w, r, s, http.StatusBadRequest, "Bad request", "There is no such act on a delegation.")
		return
	}
	p, status := c.delegationPage(r, s, id)
	if p == nil {
		c.fail(w, r, s, status, "Not found", "There is no delegation "+id+" on your targets.")
		return
	}
	pg := page{Title: "Delegation " + id, Nav: "delegations", Data: p}
	status = http.StatusOK
	if err != nil {
		status, pg.Error = c.actFailure(err)
	} else {
		pg.Notice = "Recorded at " + c.cfg.Clock().UTC().Format(time.RFC3339) + "."
	}
	c.render(w, r, status, "delegation", s, pg)
}
