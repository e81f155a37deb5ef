package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sort"

	"github.com/harbormaster-dev/harbormaster/internal/acts"
	"github.com/harbormaster-dev/harbormaster/internal/audit"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/lookalike"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// actFailure says why an act was refused, and with which status, as the
// API does for the same errors.
func (c *Console) actFailure(err error) (int, string) {
	switch {
	case errors.Is(err, gateway.ErrNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, gateway.ErrNotWaiting), errors.Is(err, gateway.ErrAlreadyRevoked), errors.Is(err, audit.ErrReviewed):
		return http.StatusConflict, err.Error()
	case errors.Is(err, gateway.ErrNotPreviewed), errors.Is(err, gateway.ErrPreviewChanged):
		return http.StatusConflict, err.Error()
	case errors.Is(err, gateway.ErrActRefused):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, gateway.ErrLogUnavailable):
		return http.StatusServiceUnavailable, "The act could not be recorded, so nothing happened; try again."
	}
	c.cfg.Logger.Error("console: act", "err", err)
	return http.StatusInternalServerError, "The act could not be carried out."
}

func (c *Console) getQueue(w http.ResponseWriter, r *http.Request, s *Session) {
	q, err := c.cfg.Gateway.Queue(r.Context(), s.Targets)
	if err != nil {
		c.cfg.Logger.Error("console: queue", "err", err)
		c.fail(w, r, s, http.StatusInternalServerError, "Queue", "The queue could not be read.")
		return
	}
	c.render(w, r, http.StatusOK, "queue", s, page{Title: "Queue", Nav: "queue", Data: q})
}

// diffRow is one row of a preview's before/after table. Side is "" for
// a before image paired with its after image, "before" or "after" for an
// image shown alone.
type diffRow struct {
	Side  string
	Cells []diffCell
}

// Changed reports whether any value of a paired row changes.
func (r diffRow) Changed() bool {
	for _, c := range r.Cells {
		if c.Changed {
			return true
		}
	}
	return false
}

type diffCell struct {
	Before, After string
	Changed       bool
	HasBefore     bool
	HasAfter      bool
	// BeforeNull and AfterNull mark SQL NULL, which must not read as
	// the text 'NULL'.
	BeforeNull, AfterNull bool
	// AfterAsWritten marks a value computed only when the statement runs,
	// shown as the statement wrote it (After), never evaluated.
	AfterAsWritten bool
}

// unevaluated is a preview's value shown as the statement wrote it.
type unevaluated string

type diffTable struct {
	Kind        string
	RowsReached int64
	Columns     []string
	Rows        []diffRow
	Truncated   bool
	TooMany     bool
}

// diff pairs before and after images by id where the id is on exactly one
// image of each side, else by position where neither has an id, and marks
// the cells that change. Every image is shown exactly once: one that
// cannot be paired stands alone, marked as the side it is. An UPDATE's
// after image holds only the columns it sets: the others keep their
// values, and show unchanged.
func diff(pv *pilot.Preview) *diffTable {
	rep := struct{ Before, After []map[string]any }{Before: pv.Before}
	for i, a := range pv.After {
		img := map[string]any{}
		if pv.Kind == "update" && i < len(pv.Before) {
			for k, v := range pv.Before[i] {
				img[k] = v
			}
		}
		for k, v := range a {
			img[k] = v
		}
		if i < len(pv.AsWritten) {
			for k, v := range pv.AsWritten[i] {
				img[k] = unevaluated(v)
			}
		}
		rep.After = append(rep.After, img)
	}
	t := &diffTable{Kind: pv.Kind, RowsReached: pv.Rows, Truncated: pv.ImagesTruncated, TooMany: pv.TooMany}
	cols := map[string]bool{}
	for _, set := range [][]map[string]any{rep.Before, rep.After} {
		for _, row := range set {
			for k := range row {
				cols[k] = true
			}
		}
	}
	for k := range cols {
		t.Columns = append(t.Columns, k)
	}
	sort.Slice(t.Columns, func(i, j int) bool {
		if (t.Columns[i] == "id") != (t.Columns[j] == "id") {
			return t.Columns[i] == "id"
		}
		return t.Columns[i] < t.Columns[j]
	})
	key := func(row map[string]any) string {
		if v, ok := row["id"]; ok {
			b, _ := json.Marshal(v)
			return string(b)
		}
		return ""
	}
	nBefore, nAfter := map[string]int{}, map[string]int{}
	for _, b := range rep.Before {
		nBefore[key(b)]++
	}
	after := map[string]map[string]any{}
	for _, a := range rep.After {
		k := key(a)
		nAfter[k]++
		after[k] = a
	}
	// byID: k names one image on each side (a table without a key may
	// repeat an id; pairing those would hide an image behind another).
	byID := func(k string) bool { return k != "" && nBefore[k] == 1 && nAfter[k] == 1 }
	byPosition := func(i int) bool {
		return i < len(rep.Before) && i < len(rep.After) && key(rep.Before[i]) == "" && key(rep.After[i]) == ""
	}
	pair := func(b, a map[string]any) {
		var row diffRow
		switch {
		case a == nil:
			row.Side = "before"
		case b == nil:
			row.Side = "after"
		}
		for _, col := range t.Columns {
			var cell diffCell
			if b != nil {
				v, ok := b[col]
				cell.Before, cell.HasBefore, cell.BeforeNull = cellText(v), ok, v == nil
			}
			if a != nil {
				v, ok := a[col]
				cell.After, cell.HasAfter, cell.AfterNull = cellText(v), ok, v == nil
				if w, ok := v.(unevaluated); ok {
					cell.After, cell.AfterAsWritten = string(w), true
				}
			}
			cell.Changed = b != nil && a != nil && (cell.Before != cell.After || cell.BeforeNull != cell.AfterNull)
			row.Cells = append(row.Cells, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	for i, b := range rep.Before {
		switch k := key(b); {
		case byID(k):
			pair(b, after[k])
		case byPosition(i):
			pair(b, rep.After[i])
		default:
			pair(b, nil)
		}
	}
	for i, a := range rep.After {
		if byID(key(a)) || byPosition(i) {
			continue
		}
		pair(nil, a)
	}
	return t
}

type requestPage struct {
	V          *gateway.RequestView
	Preview    *pilot.Preview
	Diff       *diffTable
	PreviewE   string
	Note       *Note
	Approval   string
	ApproveCmd string
	ApprovalE  string
	CanApprove bool
	Deny       string // the denial's canonical bytes, once a reason is given
	DenyCmd    string
	Reason     string
	// PreviewLookalikes lists the look-alike characters of the preview's
	// columns and values (a row value the agent wrote, or one it reads).
	PreviewLookalikes []string
}

// requestPage is a request as a human sees it. Opening it is a human
// asking for its preview: a waiting request without one gets one now
// (DESIGN.md invariant 10), and refresh computes a fresh one.
func (c *Console) requestPage(r *http.Request, s *Session, id string, refresh bool) (*requestPage, int, string) {
	v, err := c.cfg.Gateway.Request(r.Context(), id, "")
	if err != nil || !s.Sees(v.Target) {
		return nil, http.StatusNotFound, "There is no request " + id + " on your targets."
	}
	if v.Status == gateway.StatusWaiting {
		if pv, err := c.cfg.Gateway.Preview(r.Context(), id, refresh); err == nil {
			v = pv
		} else {
			c.cfg.Logger.Error("console: preview", "request", id, "err", err)
		}
	}
	p := &requestPage{V: v, CanApprove: s.Has(RoleApprover, v.Target)}
	if c.cfg.Notes != nil {
		if n, err := c.cfg.Notes(r.Context(), id); err == nil {
			p.Note = n
		}
	}
	if v.Status == gateway.StatusWaiting && p.CanApprove {
		ap, err := c.cfg.Gateway.ProposeApproval(r.Context(), id)
		if err != nil {
			_, p.ApprovalE = c.actFailure(err)
		} else {
			p.Approval = string(ap)
			p.ApproveCmd = "ssh-keygen -Y sign -n " + signing.NamespaceApproval + " -f ~/.ssh/id_ed25519 approval.json"
			if v, err = c.cfg.Gateway.Request(r.Context(), id, ""); err == nil { // proposing may have previewed it
				p.V = v
			}
		}
	}
	p.PreviewE = p.V.PreviewError
	if len(p.V.Preview) > 0 {
		// Numbers as the preview has them: read as floats, an integer past
		// 2^53 would show a value other than the one the approval covers.
		var pv pilot.Preview
		dec := json.NewDecoder(bytes.NewReader(p.V.Preview))
		dec.UseNumber()
		if err := dec.Decode(&pv); err != nil {
			p.PreviewE = "The preview is unreadable."
		} else {
			p.Preview, p.Diff = &pv, diff(&pv)
			p.PreviewLookalikes = previewLookalikes(p.Diff, &pv)
		}
	}
	return p, http.StatusOK, ""
}

// previewLookalikes lists, once each, the look-alike characters of a
// preview's columns, values and defaults, as its table shows them.
func previewLookalikes(t *diffTable, pv *pilot.Preview) []string {
	texts := slices.Clone(t.Columns)
	for _, row := range t.Rows {
		for _, c := range row.Cells {
			texts = append(texts, c.Before, c.After)
		}
	}
	for _, col := range slices.Sorted(maps.Keys(pv.Defaults)) {
		texts = append(texts, col, pv.Defaults[col])
	}
	return lookalike.Summary(maxLookalikes, texts...)
}

func (c *Console) getRequest(w http.ResponseWriter, r *http.Request, s *Session) {
	p, status, msg := c.requestPage(r, s, r.PathValue("id"), false)
	if p == nil {
		c.fail(w, r, s, status, "Not found", msg)
		return
	}
	c.render(w, r, http.StatusOK, "request", s, page{Title: "Request " + p.V.ID, Nav: "queue", Data: p})
}

func (c *Console) postApprove(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	act, sig := formText(r, "act"), normalizeSig(r.PostFormValue("signature"))
	// The same call as POST /v1/requests/{id}/approve.
	_, err := c.cfg.Gateway.Approve(r.Context(), id, []byte(act), []byte(sig))
	c.afterAct(w, r, s, id, err, "Approved.")
}

// postPreview computes a fresh preview of a waiting request, which every
// approver then shares.
func (c *Console) postPreview(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	p, status, msg := c.requestPage(r, s, id, true)
	if p == nil {
		c.fail(w, r, s, status, "Not found", msg)
		return
	}
	c.render(w, r, http.StatusOK, "request", s, page{Title: "Request " + id, Nav: "queue", Data: p, Notice: "A fresh preview was taken."})
}

func (c *Console) afterAct(w http.ResponseWriter, r *http.Request, s *Session, id string, err error, ok string) {
	p, status, msg := c.requestPage(r, s, id, false)
	if p == nil {
		c.fail(w, r, s, status, "Not found", msg)
		return
	}
	pg := page{Title: "Request " + id, Nav: "queue", Data: p}
	status = http.StatusOK
	if err != nil {
		status, pg.Error = c.actFailure(err)
	} else {
		pg.Notice = ok + " The request is now " + string(p.V.Status) + "."
	}
	c.render(w, r, status, "request", s, pg)
}

func (c *Console) postDenyPrepare(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	p, status, msg := c.requestPage(r, s, id, false)
	if p == nil {
		c.fail(w, r, s, status, "Not found", msg)
		return
	}
	p.Reason = r.PostFormValue("reason")
	if p.Reason == "" {
		c.render(w, r, http.StatusBadRequest, "request", s, page{Title: "Request " + id, Nav: "queue", Data: p, Error: "A denial needs a reason."})
		return
	}
	act, err := acts.Canonical(acts.Denial{Version: 1, Kind: acts.KindDenial, RequestID: p.V.ID, Target: p.V.Target,
		StatementSHA256: marque.StatementHash(p.V.CanonicalSQL), Reason: p.Reason})
	if err != nil {
		c.fail(w, r, s, http.StatusInternalServerError, "Deny", err.Error())
		return
	}
	p.Deny = string(act)
	p.DenyCmd = "ssh-keygen -Y sign -n " + signing.NamespaceDenial + " -f ~/.ssh/id_ed25519 denial.json"
	c.render(w, r, http.StatusOK, "request", s, page{Title: "Request " + id, Nav: "queue", Data: p})
}

func (c *Console) postDeny(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	_, err := c.cfg.Gateway.Deny(r.Context(), id, []byte(formText(r, "act")), []byte(normalizeSig(r.PostFormValue("signature"))))
	c.afterAct(w, r, s, id, err, "Denied.")
}
