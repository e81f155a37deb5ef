package console

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/switches"
)

// The sampled audit.

type auditRow struct {
	A      audit.Audit
	Target string
	Age    time.Duration
}

type auditsPage struct {
	Enabled     bool
	Rows        []auditRow
	Oldest      time.Duration
	Alert       time.Duration
	Overdue     bool
	FailureRate float64
	Reviewed    []auditRow
}

// auditTarget is the target of an audit's delegation, or "".
func (c *Console) auditTarget(a audit.Audit) string {
	if d := c.cfg.Gateway.Registry().Delegation(a.DelegationID); d != nil {
		return d.Target
	}
	return ""
}

func (c *Console) getAudits(w http.ResponseWriter, r *http.Request, s *Session) {
	p := auditsPage{Enabled: c.cfg.Auditor != nil, Alert: c.cfg.AuditAlert}
	if p.Enabled {
		list, err := c.cfg.Auditor.List(r.Context(), "")
		if err != nil {
			c.fail(w, r, s, http.StatusInternalServerError, "Audit", "The audit queue could not be read.")
			return
		}
		now := c.cfg.Clock()
		for _, a := range list {
			t := c.auditTarget(a)
			if !s.Sees(t) {
				continue
			}
			row := auditRow{A: a, Target: t, Age: now.Sub(a.Created)}
			if a.Status == "pending" {
				p.Rows = append(p.Rows, row)
				p.Oldest = max(p.Oldest, row.Age)
			} else {
				p.Reviewed = append(p.Reviewed, row)
			}
		}
		p.Overdue = p.Oldest > p.Alert
		if _, _, rate, err := c.cfg.Auditor.Stats(r.Context()); err == nil {
			p.FailureRate = rate
		}
	}
	c.render(w, r, http.StatusOK, "audits", s, page{Title: "Audit review", Nav: "audit", Data: p})
}

// evidence is the evidence set of a sampled judgment, as the gateway
// records it.
type evidence struct {
	Submitted  string          `json:"statement_submitted"`
	Signed     string          `json:"statement_signed"`
	Sentence   string          `json:"sentence"`
	Bound      []bound.Rule    `json:"bound"`
	Residual   string          `json:"residual"`
	Jurors     []juror         `json:"jurors"`
	Correlated bool            `json:"correlated"`
	Rehearsal  json.RawMessage `json:"rehearsal"`
	JudgmentID string          `json:"judgment_id"`
	Bundle     string          `json:"bundle"`
}

type juror struct {
	Index     int    `json:"index"`
	Framing   string `json:"framing"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Outcome   string `json:"outcome"`
	Verdict   string `json:"verdict"`
	Failure   string `json:"failure"`
	LatencyMS int64  `json:"latency_ms"`
}

type auditPage struct {
	A         *audit.Audit
	Target    string
	E         evidence
	Rules     []string
	CanReview bool
	Verdict   string
	Note      string
	Act       string
	Command   string
	Suspended bool
	Done      bool
}

func (c *Console) auditPage(r *http.Request, s *Session, id string) (*auditPage, string) {
	if c.cfg.Auditor == nil {
		return nil, "There is no sampled audit on this deployment."
	}
	a, err := c.cfg.Auditor.Get(r.Context(), id)
	if err != nil || a == nil {
		return nil, "There is no audit " + id + "."
	}
	t := c.auditTarget(*a)
	if !s.Sees(t) {
		return nil, "There is no audit " + id + " on your targets."
	}
	p := &auditPage{A: a, Target: t, CanReview: s.Has(RoleReviewer, t) && a.Status == "pending"}
	_ = json.Unmarshal(a.Evidence, &p.E)
	for _, rl := range p.E.Bound {
		p.Rules = append(p.Rules, bound.Summary(rl))
	}
	return p, ""
}

func (c *Console) getAudit(w http.ResponseWriter, r *http.Request, s *Session) {
	p, msg := c.auditPage(r, s, r.PathValue("id"))
	if p == nil {
		c.fail(w, r, s, http.StatusNotFound, "Not found", msg)
		return
	}
	c.render(w, r, http.StatusOK, "audit", s, page{Title: "Audit " + p.A.ID, Nav: "audit", Data: p})
}

func (c *Console) postReviewPrepare(w http.ResponseWriter, r *http.Request, s *Session) {
	p, msg := c.auditPage(r, s, r.PathValue("id"))
	if p == nil {
		c.fail(w, r, s, http.StatusNotFound, "Not found", msg)
		return
	}
	p.Verdict, p.Note = r.PostFormValue("verdict"), r.PostFormValue("note")
	if p.Verdict != "right" && p.Verdict != "wrong" {
		c.render(w, r, http.StatusBadRequest, "audit", s, page{Title: "Audit " + p.A.ID, Nav: "audit", Data: p, Error: "Mark the verdict right or wrong."})
		return
	}
	act, err := acts.Canonical(acts.Review{Version: 1, Kind: acts.KindReview, AuditID: p.A.ID, Verdict: p.Verdict, Note: p.Note})
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Audit", err.Error())
		return
	}
	p.Act = string(act)
	p.Command = "ssh-keygen -Y sign -n " + signing.NamespaceReview + " -f ~/.ssh/id_ed25519 review.json"
	c.render(w, r, http.StatusOK, "audit", s, page{Title: "Audit " + p.A.ID, Nav: "audit", Data: p})
}

func (c *Console) postReview(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	// The same call as POST /v1/audit/{id}/review.
	suspended, err := c.cfg.Gateway.ReviewAudit(r.Context(), []byte(formText(r, "act")), []byte(normalizeSig(r.PostFormValue("signature"))))
	p, msg := c.auditPage(r, s, id)
	if p == nil {
		c.fail(w, r, s, http.StatusNotFound, "Not found", msg)
		return
	}
	pg := page{Title: "Audit " + id, Nav: "audit", Data: p}
	status := http.StatusOK
	if err != nil {
		status, pg.Error = c.actFailure(err)
	} else {
		p.Done, p.Suspended = true, suspended
		pg.Notice = "Review recorded."
		if suspended {
			pg.Notice += " The delegation's fast path is now suspended."
		}
	}
	c.render(w, r, status, "audit", s, pg)
}

// Switches.

type switchRow struct {
	Label     string
	Target    string // "" for the deployment
	On        bool
	Effective string
	By        string
	At        time.Time
	CanChange bool
}

func (c *Console) switchRows(s *Session) []switchRow {
	state := map[string]switches.State{}
	if c.cfg.Switches != nil {
		for _, st := range c.cfg.Switches.Snapshot() {
			if st.Name == switches.TierB {
				state[st.Scope] = st
			}
		}
	}
	targets := c.cfg.Gateway.Targets()
	dep := state[switches.Deployment]
	rows := []switchRow{{Label: "Deployment", On: dep.On, By: dep.UpdatedBy, At: dep.UpdatedAt, CanChange: s.HasAll(RoleOperator, targets)}}
	for _, t := range targets {
		if !s.Sees(t) {
			continue
		}
		st := state[switches.TargetScope(t)]
		row := switchRow{Label: "Target " + t, Target: t, On: st.On, By: st.UpdatedBy, At: st.UpdatedAt, CanChange: s.Has(RoleOperator, t)}
		if c.cfg.Switches != nil {
			if on, why := c.cfg.Switches.TierBOn(t); on {
				row.Effective = "Tier B runs on " + t
			} else {
				row.Effective = "Tier B is off on " + t + ": " + why
			}
		}
		rows = append(rows, row)
	}
	return rows
}

type switchConfirm struct {
	Label  string
	Target string
	On     bool
}

type switchChange struct {
	Seq   int64
	Time  time.Time
	Scope string
	On    bool
	By    string
}

// switchHistory is every recorded switch change, newest first (at most 50).
func (c *Console) switchHistory(r *http.Request) []switchChange {
	var out []switchChange
	_ = c.cfg.Logbook.Iterate(r.Context(), logbook.Query{Kind: logbook.KindSwitch}, func(e logbook.Entry) error {
		var p struct {
			Scope string `json:"scope"`
			On    bool   `json:"on"`
			By    string `json:"by"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		out = append(out, switchChange{Seq: e.Seq, Time: e.Time, Scope: p.Scope, On: p.On, By: p.By})
		if len(out) > 500 {
			out = out[len(out)-50:]
		}
		return nil
	})
	if len(out) > 50 {
		out = out[len(out)-50:]
	}
	slices.Reverse(out)
	return out
}

func (c *Console) switchData(r *http.Request, s *Session) map[string]any {
	return map[string]any{"Rows": c.switchRows(s), "History": c.switchHistory(r)}
}

func (c *Console) getSwitches(w http.ResponseWriter, r *http.Request, s *Session) {
	c.render(w, r, http.StatusOK, "switches", s, page{Title: "Switches", Nav: "switches", Data: c.switchData(r, s)})
}

// switchScope checks the session may flip the switch the form names.
func (c *Console) switchScope(r *http.Request, s *Session) (string, string, bool) {
	t := r.PostFormValue("target")
	if t == "" {
		return switches.Deployment, "the deployment", s.HasAll(RoleOperator, c.cfg.Gateway.Targets())
	}
	if _, ok := c.cfg.Gateway.Pilot(t); !ok {
		return "", "", false
	}
	return switches.TargetScope(t), "target " + t, s.Has(RoleOperator, t)
}

func (c *Console) postSwitchConfirm(w http.ResponseWriter, r *http.Request, s *Session) {
	_, label, ok := c.switchScope(r, s)
	if !ok {
		c.fail(w, r, s, http.StatusForbidden, "Refused", "Your key may not flip that switch: it needs harbormaster-switch for every target the switch governs.")
		return
	}
	on := r.PostFormValue("on") == "true"
	c.render(w, r, http.StatusOK, "switches", s, page{Title: "Switches: confirm", Nav: "switches",
		Data: map[string]any{"Rows": c.switchRows(s), "History": c.switchHistory(r), "Confirm": switchConfirm{Label: label, Target: r.PostFormValue("target"), On: on}}})
}

func (c *Console) postSwitch(w http.ResponseWriter, r *http.Request, s *Session) {
	scope, label, ok := c.switchScope(r, s)
	if !ok {
		c.fail(w, r, s, http.StatusForbidden, "Refused", "Your key may not flip that switch: it needs harbormaster-switch for every target the switch governs.")
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		c.fail(w, r, s, http.StatusBadRequest, "Not confirmed", "A switch changes only after its confirmation step.")
		return
	}
	on := r.PostFormValue("on") == "true"
	pg := page{Title: "Switches", Nav: "switches"}
	if err := c.cfg.Gateway.SetSwitch(r.Context(), switches.Key{Name: switches.TierB, Scope: scope}, on, s.Name); err != nil {
		_, pg.Error = c.actFailure(err)
	} else {
		state := "off"
		if on {
			state = "on"
		}
		pg.Notice = "Tier B is switched " + state + " for " + label + "."
		if c.cfg.Switches != nil {
			_ = c.cfg.Switches.Poll(r.Context())
		}
	}
	pg.Data = c.switchData(r, s)
	c.render(w, r, http.StatusOK, "switches", s, pg)
}

// The logbook.

type entryView struct {
	Seq      int64
	Time     time.Time
	Kind     string
	Subjects string
	Payload  string
}

type logbookPage struct {
	Kind, Subject, From string
	Entries             []entryView
	Checkpoint          *logbook.Checkpoint
	Head                int64
	CanVerify           bool
	Verify              *logbook.Report
	VerifyText          string
}

const logbookPageSize = 100

func (c *Console) logbookPage(r *http.Request, s *Session) (*logbookPage, error) {
	ctx := r.Context()
	q := r.URL.Query()
	p := &logbookPage{Kind: q.Get("kind"), Subject: q.Get("subject"), From: q.Get("from"), CanVerify: c.cfg.CheckpointVerifier != nil}
	head, _, err := c.cfg.Logbook.Head(ctx)
	if err != nil {
		return nil, err
	}
	p.Head = head
	lq := logbook.Query{Kind: logbook.Kind(p.Kind), Limit: logbookPageSize}
	if k, v, ok := strings.Cut(p.Subject, "="); ok {
		lq.SubjectKey, lq.SubjectValue = strings.TrimSpace(k), strings.TrimSpace(v)
	}
	if n, err := strconv.ParseInt(p.From, 10, 64); err == nil && n > 0 {
		lq.From = n
	} else if lq.Kind == "" && lq.SubjectKey == "" {
		lq.From = max(1, head-logbookPageSize+1)
	}
	es, err := c.cfg.Logbook.Find(ctx, lq)
	if err != nil {
		return nil, err
	}
	targets := map[string]string{}
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i]
		if !c.entryVisible(ctx, s, e, targets) {
			continue
		}
		subj, _ := json.Marshal(e.Subjects)
		pl := string(e.Payload)
		if len(pl) > 600 {
			pl = pl[:600] + " ..."
		}
		p.Entries = append(p.Entries, entryView{Seq: e.Seq, Time: e.Time, Kind: string(e.Kind), Subjects: string(subj), Payload: pl})
	}
	if cps, err := c.cfg.Logbook.Checkpoints(ctx); err == nil && len(cps) > 0 {
		p.Checkpoint = &cps[len(cps)-1]
	}
	return p, nil
}

// entryVisible reports whether a human sees a logbook entry: one of a
// target the session does not see is not shown. An entry's target is its
// target subject, else the target of the switch, delegation or request it
// names (a Surveyor judgment, an audit, an enablement, a Leadsman note
// name no target of their own); an entry whose delegation or request
// cannot be read is shown only to a human who sees every target. One
// that names none of these (a deployment switch) is shown to everyone.
// targets caches the lookups of one page, by subject.
func (c *Console) entryVisible(ctx context.Context, s *Session, e logbook.Entry, targets map[string]string) bool {
	if t, ok := e.Subjects["target"]; ok {
		return s.Sees(t)
	}
	if sw, ok := e.Subjects["switch"]; ok {
		if _, scope, _ := strings.Cut(sw, "@"); strings.HasPrefix(scope, "target:") {
			return s.Sees(strings.TrimPrefix(scope, "target:"))
		}
	}
	seesAll := func() bool {
		for _, t := range c.cfg.Gateway.Targets() {
			if !s.Sees(t) {
				return false
			}
		}
		return true
	}
	resolve := func(key string, lookup func(id string) (string, bool)) (bool, bool) {
		id, ok := e.Subjects[key]
		if !ok {
			return false, false
		}
		t, cached := targets[key+"="+id]
		if !cached {
			t, _ = lookup(id)
			targets[key+"="+id] = t
		}
		if t == "" {
			return seesAll(), true
		}
		return s.Sees(t), true
	}
	if v, ok := resolve("delegation", func(id string) (string, bool) {
		if d := c.cfg.Gateway.Registry().Delegation(id); d != nil {
			return d.Target, true
		}
		return "", false
	}); ok {
		return v
	}
	if v, ok := resolve("request", func(id string) (string, bool) {
		r, err := c.cfg.Gateway.Request(ctx, id, "")
		if err != nil {
			return "", false
		}
		return r.Target, true
	}); ok {
		return v
	}
	return true
}

func (c *Console) getLogbook(w http.ResponseWriter, r *http.Request, s *Session) {
	p, err := c.logbookPage(r, s)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Logbook", "The logbook could not be read.")
		return
	}
	c.render(w, r, http.StatusOK, "logbook", s, page{Title: "Logbook", Nav: "logbook", Data: p})
}

func (c *Console) postVerify(w http.ResponseWriter, r *http.Request, s *Session) {
	p, err := c.logbookPage(r, s)
	if err != nil || c.cfg.CheckpointVerifier == nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Logbook", "The logbook could not be verified here.")
		return
	}
	rep, err := c.cfg.Logbook.Verify(r.Context(), c.cfg.CheckpointVerifier)
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Logbook", "The logbook could not be read to verify it.")
		return
	}
	p.Verify, p.VerifyText = &rep, rep.String()
	c.render(w, r, http.StatusOK, "logbook", s, page{Title: "Logbook", Nav: "logbook", Data: p})
}
