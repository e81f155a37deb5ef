package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/backtest"
	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

type mark struct{ Label, Class string }

type delegationRow struct {
	ID, Tier, Sentence, Grantee, Target, Expires string
	Marks                                        []mark
}

// marks are what the list and the page flag about a delegation.
func (c *Console) marks(r *http.Request, d *gateway.Delegation, now time.Time) []mark {
	var out []mark
	if d.Revoked != nil {
		out = append(out, mark{"revoked " + d.Revoked.UTC().Format("2006-01-02"), "bad"})
	}
	if exp, err := d.Bound.ExpiresAt(); err == nil && !now.Before(exp) {
		out = append(out, mark{"expired", "bad"})
	}
	if nb, err := d.Bound.NotBeforeAt(); err == nil && now.Before(nb) {
		out = append(out, mark{"not yet in force", "warn"})
	}
	if c.cfg.Auditor != nil && d.Bound.Tier() == "B" {
		if sus, _, err := c.cfg.Auditor.Suspended(r.Context(), d.ID); err == nil && sus {
			out = append(out, mark{markSuspended, "bad"})
		}
	}
	if d.Bound.Tier() == "B" && c.correlated(r, d.ID) {
		out = append(out, mark{"correlated panel", "warn"})
	}
	return out
}

// correlated reports whether any judgment under the delegation had a
// correlated panel.
func (c *Console) correlated(r *http.Request, id string) bool {
	found := false
	_ = c.cfg.Logbook.Iterate(r.Context(), logbook.Query{Kind: logbook.KindJudgment, SubjectKey: "delegation", SubjectValue: id}, func(e logbook.Entry) error {
		var p struct {
			Correlated bool `json:"correlated"`
		}
		if json.Unmarshal(e.Payload, &p) == nil && p.Correlated {
			found = true
			return errStop
		}
		return nil
	})
	return found
}

var errStop = errors.New("stop")

const markSuspended = "fast path suspended"

func (c *Console) getDelegations(w http.ResponseWriter, r *http.Request, s *Session) {
	now := c.cfg.Clock()
	var rows []delegationRow
	ds := c.cfg.Gateway.Registry().Delegations("")
	for i := len(ds) - 1; i >= 0; i-- { // newest first
		d := ds[i]
		if !s.Sees(d.Target) {
			continue
		}
		rows = append(rows, delegationRow{ID: d.ID, Tier: d.Bound.Tier(), Sentence: d.Bound.Sentence, Grantee: d.Grantee, Target: d.Target,
			Expires: d.Bound.Expires, Marks: c.marks(r, d, now)})
	}
	c.render(w, r, http.StatusOK, "delegations", s, page{Title: "Delegations", Nav: "delegations", Data: rows})
}

type ruleView struct {
	Index    int
	Op       string
	Table    string
	Summary  string
	Residual string
	Note     string
}

type eventView struct {
	Seq     int64
	Time    time.Time
	Kind    string
	Summary string
	Link    string
}

type delegationPage struct {
	D           *gateway.Delegation
	Tier        string
	Fallback    string
	Rules       []ruleView
	Lints       []bound.Problem
	Marks       []mark
	Fingerprint string
	Statements  []eventView
	Judgments   []eventView
	Audits      []eventView
	// Suspended, and what the session may do here.
	Suspended    bool
	CanRevoke    bool
	CanReview    bool
	CanReinstate bool
	CanEnable    bool
	Surveyor     string
	Pending      *pendingAct
}

func (c *Console) getDelegation(w http.ResponseWriter, r *http.Request, s *Session) {
	p, status := c.delegationPage(r, s, r.PathValue("id"))
	if p == nil {
		c.fail(w, r, s, status, "Not found", "There is no delegation "+r.PathValue("id")+" on your targets.")
		return
	}
	c.render(w, r, http.StatusOK, "delegation", s, page{Title: "Delegation " + p.D.ID, Nav: "delegations", Data: p})
}

func (c *Console) delegationPage(r *http.Request, s *Session, id string) (*delegationPage, int) {
	d := c.cfg.Gateway.Registry().Delegation(id)
	if d == nil || !s.Sees(d.Target) {
		return nil, http.StatusNotFound
	}
	p := &delegationPage{D: d, Tier: d.Bound.Tier(), Marks: c.marks(r, d, c.cfg.Clock())}
	for _, m := range p.Marks {
		p.Suspended = p.Suspended || m.Label == markSuspended
	}
	now := c.cfg.Clock()
	_, err := c.cfg.Signers.Authorize(s.key, signing.NamespaceRevocation, d.Target, now)
	p.CanRevoke = err == nil && d.Revoked == nil
	p.CanReview = s.Has(RoleReviewer, d.Target) && p.Tier == "B" && d.Revoked == nil
	_, err = c.cfg.Signers.Authorize(s.key, signing.NamespaceEnable, d.Target, now)
	p.CanReinstate = err == nil && p.Suspended
	p.CanEnable = err == nil && c.cfg.Surveyor != nil && p.Tier == "B" && d.Revoked == nil
	if c.cfg.Surveyor != nil {
		p.Surveyor = c.cfg.Surveyor.Identity() + " (bundle " + c.cfg.Surveyor.Bundle().Version + ")"
	}
	if p.Tier == "B" {
		p.Fallback = bound.FallbackAuthority(d.Bound)
	}
	for i, rl := range d.Bound.Rules {
		rv := ruleView{Index: i + 1, Op: string(rl.Op), Table: rl.Table, Summary: bound.Summary(rl), Residual: rl.Residual}
		if rl.Op == "select" {
			rv.Note = bound.ReadCapNote
		}
		p.Rules = append(p.Rules, rv)
	}
	if ex, ok := c.cfg.Gateway.Pilot(d.Target); ok {
		if _, rep := bound.Compile(asWritten(d.Bound), ex.Catalog(), bound.Options{}); rep != nil {
			p.Lints = rep.Lints
		}
	}
	ctx := r.Context()
	if es, err := c.cfg.Logbook.Find(ctx, logbook.Query{Kind: logbook.KindDelegation, SubjectKey: "delegation", SubjectValue: d.ID, Limit: 1}); err == nil && len(es) == 1 {
		var pl struct {
			Fingerprint string `json:"fingerprint"`
		}
		_ = json.Unmarshal(es[0].Payload, &pl)
		p.Fingerprint = pl.Fingerprint
	}
	p.Statements = c.recent(r, logbook.KindDecision, d.ID, func(pl map[string]any) (string, string) {
		id, _ := pl["request_id"].(string)
		return str(pl["outcome"]) + " " + str(pl["path"]) + ": " + str(pl["canonical_sql"]), Prefix + "queue/" + id
	})
	p.Judgments = c.recent(r, logbook.KindJudgment, d.ID, func(pl map[string]any) (string, string) {
		corr := ""
		if b, _ := pl["correlated"].(bool); b {
			corr = " (correlated panel)"
		}
		return str(pl["outcome"]) + corr + ", request " + str(pl["request_id"]), ""
	})
	if c.cfg.Auditor != nil {
		if list, err := c.cfg.Auditor.List(ctx, ""); err == nil {
			for _, a := range list {
				if a.DelegationID != d.ID {
					continue
				}
				sum := a.Status
				if a.Verdict != "" {
					sum += ": " + a.Verdict + " (" + a.Reviewer + ") " + a.Note
				}
				p.Audits = append(p.Audits, eventView{Time: a.Created, Kind: "audit", Summary: sum, Link: Prefix + "audit/" + a.ID})
			}
		}
	}
	return p, http.StatusOK
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// recent is the last entries of kind about a delegation, newest first.
func (c *Console) recent(r *http.Request, kind logbook.Kind, id string, sum func(map[string]any) (string, string)) []eventView {
	var out []eventView
	_ = c.cfg.Logbook.Iterate(r.Context(), logbook.Query{Kind: kind, SubjectKey: "delegation", SubjectValue: id}, func(e logbook.Entry) error {
		var pl map[string]any
		_ = json.Unmarshal(e.Payload, &pl)
		s, link := sum(pl)
		out = append(out, eventView{Seq: e.Seq, Time: e.Time, Kind: string(e.Kind), Summary: s, Link: link})
		if len(out) > 200 {
			out = out[len(out)-20:]
		}
		return nil
	})
	if len(out) > 20 {
		out = out[len(out)-20:]
	}
	slices.Reverse(out)
	return out
}

// asWritten turns a signed bound back into the delegation it compiles
// from, to read its lints against today's catalog.
func asWritten(b *bound.Bound) *bound.Delegation {
	d := &bound.Delegation{Sentence: b.Sentence, Grantee: b.Grantee, Target: b.Target, File: "signed delegation"}
	if t, err := b.ExpiresAt(); err == nil {
		d.Expires = &t
	}
	if b.NotBefore != "" {
		if t, err := b.NotBeforeAt(); err == nil {
			d.NotBefore = &t
		}
	}
	if b.Quota != nil {
		d.Quota = b.Quota.String()
	}
	for _, r := range b.Rules {
		mr := r.MaxRows
		// Columns as written in YAML: quoted where SQL would quote them
		// ("Name"), so they read back as the same names.
		cols := make([]string, len(r.Columns))
		for i, c := range r.Columns {
			cols[i] = sqlcheck.QuoteIdent(c)
		}
		d.Allow = append(d.Allow, bound.RuleSpec{Op: string(r.Op), Table: r.Table, Columns: cols, Fence: r.Fence, Check: r.Check, MaxRows: &mr, Residual: r.Residual})
	}
	return d
}

// The signing ceremony.

type signPage struct {
	YAML      string
	Since     string
	Backtest  *backtest.Report
	BacktestE string
	bound     *bound.Bound
	Report    *bound.Report
	Problems  []string
	Canonical string
	Download  template.URL
	Command   string
	CanSign   bool
	NotYours  string
	// Hidden lists the hidden characters the canonical bytes hold (shown
	// exactly, since they are copied and signed); Sentence is shown
	// marked beside them.
	Hidden   []string
	Sentence string
}

func (c *Console) getSign(w http.ResponseWriter, r *http.Request, s *Session) {
	c.render(w, r, http.StatusOK, "sign", s, page{Title: "Sign a delegation", Nav: "sign", Data: signPage{}})
}

// readYAML takes the delegation from the upload, else the text area.
func readYAML(r *http.Request) string {
	if f, _, err := r.FormFile("file"); err == nil {
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxForm))
		if err == nil && len(b) > 0 {
			return string(b)
		}
	}
	return strings.ReplaceAll(r.PostFormValue("yaml"), "\r\n", "\n")
}

// report compiles yaml exactly as the gateway will when it is submitted.
func (c *Console) report(s *Session, yaml string) signPage {
	p := signPage{YAML: yaml}
	d, err := bound.Parse([]byte(yaml), "delegation.yaml")
	if err != nil {
		p.Problems = strings.Split(err.Error(), "\n")
		return p
	}
	ex, ok := c.cfg.Gateway.Pilot(d.Target)
	if !ok || !s.Sees(d.Target) {
		p.Problems = []string{"target: there is no target " + d.Target + " that you may act on"}
		return p
	}
	b, rep := bound.Compile(d, ex.Catalog(), bound.Options{Now: c.cfg.Clock})
	p.Report = rep
	for _, pr := range rep.Problems {
		p.Problems = append(p.Problems, pr.Field+": "+pr.Message)
	}
	if !rep.Signable || b == nil {
		return p
	}
	canon, err := b.Canonical()
	if err != nil {
		p.Problems = append(p.Problems, err.Error())
		return p
	}
	p.bound = b
	p.Canonical = string(canon)
	p.Hidden, p.Sentence = hiddenIn(p.Canonical), b.Sentence
	p.Download = template.URL("data:application/json;base64," + base64.StdEncoding.EncodeToString(canon))
	p.Command = "ssh-keygen -Y sign -n harbormaster-delegation -f ~/.ssh/id_ed25519 delegation.json"
	p.CanSign = true
	if !s.Has(RoleGrantor, d.Target) {
		p.NotYours = "Your key is not allowed to sign delegations for " + d.Target + "; a grantor of that target must sign it."
	}
	return p
}

// backtestRows caps the rows of the ceremony's backtest table; the totals
// count every statement of the window.
const backtestRows = 200

func (c *Console) postSignReport(w http.ResponseWriter, r *http.Request, s *Session) {
	p := c.report(s, readYAML(r))
	p.Since = strings.TrimSpace(r.PostFormValue("since"))
	if p.Since == "" {
		p.Since = "30d"
	}
	if p.bound != nil {
		// Before signing: what the new delegation would have done with the
		// grantee's recorded statements on this target (a static replay).
		if ex, ok := c.cfg.Gateway.Pilot(p.bound.Target); ok {
			since, err := backtest.ParseWindow(p.Since)
			if err == nil {
				p.Backtest, err = backtest.Run(r.Context(), backtest.Input{Logbook: c.cfg.Logbook, Delegation: p.bound, Catalog: ex.Catalog(),
					Since: since, Now: c.cfg.Clock(), MaxRows: backtestRows})
			}
			if err != nil {
				p.BacktestE = "The backtest could not run: " + err.Error()
			}
		}
	}
	status := http.StatusOK
	if !p.CanSign {
		status = http.StatusUnprocessableEntity
	}
	c.render(w, r, status, "sign", s, page{Title: "Sign a delegation: the report", Nav: "sign", Data: p})
}

func (c *Console) postSignSubmit(w http.ResponseWriter, r *http.Request, s *Session) {
	yaml := strings.ReplaceAll(r.PostFormValue("yaml"), "\r\n", "\n")
	p := c.report(s, yaml)
	if !p.CanSign {
		// An unsignable delegation never gets past the report.
		c.render(w, r, http.StatusUnprocessableEntity, "sign", s, page{Title: "Sign a delegation: the report", Nav: "sign", Data: p,
			Error: "This delegation cannot be signed; fix the problems in the report first."})
		return
	}
	// The same call, with the same source, as POST /v1/delegations: the
	// logbook entry is the API's.
	d, _, err := c.cfg.Gateway.AddDelegation(r.Context(), []byte(yaml), []byte(normalizeSig(r.PostFormValue("signature"))), "api")
	if err != nil {
		var de *gateway.DelegationError
		msg := "The delegation could not be stored; try again."
		status := http.StatusInternalServerError
		switch {
		case errors.As(err, &de):
			msg, status = "Refused: "+de.Error(), http.StatusUnprocessableEntity
		case errors.Is(err, gateway.ErrDelegationRevoked):
			msg, status = err.Error(), http.StatusConflict
		case errors.Is(err, gateway.ErrLogUnavailable):
			msg, status = "The delegation could not be recorded in the logbook, so nothing happened; try again.", http.StatusServiceUnavailable
		default:
			c.cfg.Logger.Error("console: add delegation", "err", err)
		}
		c.render(w, r, status, "sign", s, page{Title: "Sign a delegation: the report", Nav: "sign", Data: p, Error: msg})
		return
	}
	http.Redirect(w, r, Prefix+"delegations/"+d.ID, http.StatusSeeOther)
}
