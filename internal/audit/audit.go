// Package audit is the sampled audit of the Surveyor's conforms decisions
// (DESIGN.md section 7, the EDR's "sampled audit, after the fact").
//
// A share of surveyed conforms (default 10%, at least one per delegation
// per UTC day, more for correlated panels) is queued for human review after
// execution. Sampling is keyed: HMAC-SHA256 of the judgment id under a key
// the agents never see, so an agent cannot predict which of its statements
// a human will look at. A reviewer marking a judgment wrong writes a
// logbook finding, notifies the grantor, and at the threshold (by default
// any wrong verdict in the last 20 reviews of that delegation) suspends the
// delegation's fast path until a grantor reinstates it. Suspension is
// automatic, not discretionary: an audit nobody acts on is decorative.
package audit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/logbook"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Config configures the auditor.
type Config struct {
	// Rate is the share of surveyed conforms sampled. Defaults to 0.10.
	Rate float64
	// CorrelatedRate is the share for judgments of correlated panels.
	// Defaults to 0.5, and is never below Rate.
	CorrelatedRate float64
	// Key is the sampling HMAC key. Required, at least 16 bytes.
	Key []byte
	// Window and MaxWrong: suspend a delegation when at least MaxWrong of
	// its last Window reviews found a wrong verdict. Default 20 and 1.
	Window   int
	MaxWrong int
	// Webhook, when set, is told of every finding (to reach the grantor).
	Webhook string
	// Clock defaults to time.Now; Logger to discard; HTTPClient to 5s timeout.
	Clock      func() time.Time
	Logger     *slog.Logger
	HTTPClient *http.Client
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Rate == 0 {
		c.Rate = 0.10
	}
	if c.CorrelatedRate == 0 {
		c.CorrelatedRate = 0.5
	}
	if c.CorrelatedRate < c.Rate {
		c.CorrelatedRate = c.Rate
	}
	if c.Window <= 0 {
		c.Window = 20
	}
	if c.MaxWrong <= 0 {
		c.MaxWrong = 1
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	return c
}

// Appender is the logbook.
type Appender interface {
	Append(ctx context.Context, rec logbook.Record) (logbook.Entry, error)
}

// Auditor samples judgments and records reviews.
type Auditor struct {
	cfg Config
	st  *store.Store
	lb  Appender
}

// New returns an auditor.
func New(cfg Config, st *store.Store, lb Appender) (*Auditor, error) {
	cfg = cfg.WithDefaults()
	switch {
	case len(cfg.Key) < 16:
		return nil, errors.New("audit: config: Key must be at least 16 bytes")
	case cfg.Rate < 0 || cfg.Rate > 1 || cfg.CorrelatedRate > 1:
		return nil, errors.New("audit: config: rates must be between 0 and 1")
	}
	return &Auditor{cfg: cfg, st: st, lb: lb}, nil
}

// Sampled reports whether id falls in the sample at rate, by a keyed hash:
// deterministic for the control plane, unpredictable without the key.
func Sampled(key []byte, id string, rate float64) bool {
	if rate >= 1 {
		return true
	}
	if rate <= 0 {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	v := binary.BigEndian.Uint64(m.Sum(nil)[:8])
	return float64(v>>11)/float64(1<<53) < rate
}

// Candidate is one surveyed conforms that executed.
type Candidate struct {
	JudgmentID   string
	RequestID    string
	DelegationID string
	Correlated   bool
	// Evidence is the evidence set shown to the reviewer.
	Evidence any
}

// Consider samples a candidate and, when sampled, queues it for review.
func (a *Auditor) Consider(ctx context.Context, c Candidate) (bool, string, error) {
	rate := a.cfg.Rate
	if c.Correlated {
		rate = a.cfg.CorrelatedRate
	}
	why := ""
	switch {
	case Sampled(a.cfg.Key, c.JudgmentID, rate) && c.Correlated:
		why = fmt.Sprintf("sampled at the raised rate for correlated panels (%.0f%%)", rate*100)
	case Sampled(a.cfg.Key, c.JudgmentID, rate):
		why = fmt.Sprintf("sampled (%.0f%%)", rate*100)
	default:
		now := a.cfg.Clock().UTC()
		day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		n, err := a.st.CountAudits(ctx, c.DelegationID, day.UnixNano())
		if err != nil {
			return false, "", fmt.Errorf("audit: consider: %w", err)
		}
		if n > 0 {
			return false, "", nil
		}
		why = "the first surveyed conforms of the day for this delegation (daily minimum)"
	}
	ev, err := json.Marshal(c.Evidence)
	if err != nil {
		return false, "", fmt.Errorf("audit: evidence: %w", err)
	}
	id := newID()
	if _, err := a.lb.Append(ctx, logbook.Record{Kind: logbook.KindAuditSampled,
		Subjects: map[string]string{"audit": id, "judgment": c.JudgmentID, "request": c.RequestID, "delegation": c.DelegationID},
		Payload:  map[string]any{"audit_id": id, "judgment_id": c.JudgmentID, "why": why}}); err != nil {
		return false, "", fmt.Errorf("audit: consider: %w", err)
	}
	err = a.st.InsertAudit(ctx, store.AuditRow{ID: id, JudgmentID: c.JudgmentID, RequestID: c.RequestID,
		DelegationID: c.DelegationID, Why: why, Evidence: string(ev), CreatedNS: a.cfg.Clock().UnixNano()})
	if err != nil {
		return false, "", fmt.Errorf("audit: consider: %w", err)
	}
	return true, why, nil
}

func newID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return "aud_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Audit is one queued review.
type Audit struct {
	ID           string          `json:"id"`
	JudgmentID   string          `json:"judgment_id"`
	RequestID    string          `json:"request_id"`
	DelegationID string          `json:"delegation_id"`
	Why          string          `json:"why"`
	Evidence     json.RawMessage `json:"evidence"`
	Status       string          `json:"status"`
	Verdict      string          `json:"verdict,omitempty"`
	Reviewer     string          `json:"reviewer,omitempty"`
	Note         string          `json:"note,omitempty"`
	Created      time.Time       `json:"created"`
}

// List returns audits with status ("" for all), oldest first.
func (a *Auditor) List(ctx context.Context, status string) ([]Audit, error) {
	rows, err := a.st.Audits(ctx, status)
	if err != nil {
		return nil, fmt.Errorf("audit: list: %w", err)
	}
	out := []Audit{}
	for _, r := range rows {
		out = append(out, Audit{ID: r.ID, JudgmentID: r.JudgmentID, RequestID: r.RequestID, DelegationID: r.DelegationID,
			Why: r.Why, Evidence: json.RawMessage(r.Evidence), Status: r.Status, Verdict: r.Verdict, Reviewer: r.Reviewer,
			Note: r.Note, Created: time.Unix(0, r.CreatedNS).UTC()})
	}
	return out, nil
}

// Get returns one audit.
func (a *Auditor) Get(ctx context.Context, id string) (*Audit, error) {
	all, err := a.List(ctx, "")
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].ID == id {
			return &all[i], nil
		}
	}
	return nil, fmt.Errorf("audit: %s: %w", id, ErrNotFound)
}

// Errors.
var (
	ErrNotFound  = errors.New("no such audit")
	ErrReviewed  = errors.New("already reviewed")
	ErrBadReview = errors.New("bad review")
)

// Review records a reviewer's verdict. A wrong verdict writes a finding,
// notifies the webhook, and suspends the delegation's fast path at the
// threshold. It returns whether the delegation is now suspended.
func (a *Auditor) Review(ctx context.Context, id, verdict, note, reviewer string, act, sig []byte) (bool, error) {
	au, err := a.Get(ctx, id)
	if err != nil {
		return false, err
	}
	if au.Status != "pending" {
		return false, fmt.Errorf("audit: %s: %w", id, ErrReviewed)
	}
	if verdict != "right" && verdict != "wrong" {
		return false, fmt.Errorf("audit: %w: verdict must be right or wrong", ErrBadReview)
	}
	if _, err := a.lb.Append(ctx, logbook.Record{Kind: logbook.KindAuditReview,
		Subjects: map[string]string{"audit": id, "judgment": au.JudgmentID, "delegation": au.DelegationID, "signer": reviewer},
		Payload:  map[string]any{"audit_id": id, "verdict": verdict, "note": note, "reviewer": reviewer, "act": string(act), "signature": string(sig)}}); err != nil {
		return false, fmt.Errorf("audit: review: %w", err)
	}
	reviewed, err := a.st.ReviewAudit(ctx, id, verdict, reviewer, note, string(act)+string(sig), a.cfg.Clock().UnixNano())
	if err != nil {
		return false, fmt.Errorf("audit: review: %w", err)
	}
	if !reviewed {
		return false, fmt.Errorf("audit: %s: %w", id, ErrReviewed)
	}
	if verdict != "wrong" {
		return false, nil
	}
	if _, err := a.lb.Append(ctx, logbook.Record{Kind: logbook.KindFinding,
		Subjects: map[string]string{"audit": id, "judgment": au.JudgmentID, "request": au.RequestID, "delegation": au.DelegationID},
		Payload: map[string]any{"audit_id": id, "judgment_id": au.JudgmentID, "request_id": au.RequestID,
			"delegation_id": au.DelegationID, "reviewer": reviewer, "note": note,
			"finding": "a reviewer found a Surveyor conforms verdict wrong"}}); err != nil {
		return false, fmt.Errorf("audit: finding: %w", err)
	}
	a.notify(au, reviewer, note)
	wrong, err := a.recentWrong(ctx, au.DelegationID)
	if err != nil {
		return false, err
	}
	if wrong < a.cfg.MaxWrong {
		return false, nil
	}
	reason := fmt.Sprintf("%d wrong verdict(s) in the last %d reviews (threshold %d)", wrong, a.cfg.Window, a.cfg.MaxWrong)
	return true, a.suspend(ctx, au.DelegationID, reason)
}

func (a *Auditor) recentWrong(ctx context.Context, delegation string) (int, error) {
	verdicts, err := a.st.RecentVerdicts(ctx, delegation, a.cfg.Window)
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	n := 0
	for _, v := range verdicts {
		if v == "wrong" {
			n++
		}
	}
	return n, nil
}

func (a *Auditor) suspend(ctx context.Context, delegation, reason string) error {
	if _, err := a.lb.Append(ctx, logbook.Record{Kind: logbook.KindSuspension,
		Subjects: map[string]string{"delegation": delegation},
		Payload:  map[string]any{"delegation_id": delegation, "reason": reason}}); err != nil {
		return fmt.Errorf("audit: suspend: %w", err)
	}
	if err := a.st.Suspend(ctx, delegation, reason, a.cfg.Clock().UnixNano()); err != nil {
		return fmt.Errorf("audit: suspend: %w", err)
	}
	return nil
}

// Suspended reports whether a delegation's fast path is suspended.
func (a *Auditor) Suspended(ctx context.Context, delegation string) (bool, string, error) {
	sp, found, err := a.st.Suspension(ctx, delegation)
	if err != nil {
		return false, "", fmt.Errorf("audit: suspended: %w", err)
	}
	if !found {
		return false, "", nil
	}
	return !sp.Lifted, sp.Reason, nil
}

// Suspension reports whether a delegation is suspended, why, and since when.
func (a *Auditor) Suspension(ctx context.Context, delegation string) (bool, string, time.Time, error) {
	sp, found, err := a.st.Suspension(ctx, delegation)
	if err != nil {
		return false, "", time.Time{}, fmt.Errorf("audit: suspension: %w", err)
	}
	if !found {
		return false, "", time.Time{}, nil
	}
	return !sp.Lifted, sp.Reason, time.Unix(0, sp.SuspendedNS), nil
}

// Reinstate lifts a suspension (a grantor's signed act, verified by the caller).
func (a *Auditor) Reinstate(ctx context.Context, delegation, by string, act, sig []byte) error {
	if _, err := a.lb.Append(ctx, logbook.Record{Kind: logbook.KindReinstatement,
		Subjects: map[string]string{"delegation": delegation, "signer": by},
		Payload:  map[string]any{"delegation_id": delegation, "by": by, "act": string(act), "signature": string(sig)}}); err != nil {
		return fmt.Errorf("audit: reinstate: %w", err)
	}
	return a.st.LiftSuspension(ctx, delegation, by, a.cfg.Clock().UnixNano())
}

// Stats reports the audit queue's depth, oldest pending age, and the share
// of the last seven days' reviews that found a wrong verdict.
func (a *Auditor) Stats(ctx context.Context) (pending int, oldest time.Duration, failureRate float64, err error) {
	since := a.cfg.Clock().Add(-7 * 24 * time.Hour).UnixNano()
	var oldestNS int64
	var reviewed, wrong int
	if pending, oldestNS, reviewed, wrong, err = a.st.AuditStats(ctx, since); err != nil {
		return
	}
	if pending > 0 {
		oldest = a.cfg.Clock().Sub(time.Unix(0, oldestNS))
	}
	if reviewed > 0 {
		failureRate = float64(wrong) / float64(reviewed)
	}
	return
}

// notify tells the webhook (the grantor) of a finding, without blocking.
func (a *Auditor) notify(au *Audit, reviewer, note string) {
	if a.cfg.Webhook == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		text := fmt.Sprintf("Harbormaster finding: reviewer %s marked the Surveyor's conforms verdict on request %s (delegation %s) wrong.",
			reviewer, au.RequestID, au.DelegationID)
		body, _ := json.Marshal(map[string]any{"text": text, "audit_id": au.ID, "delegation_id": au.DelegationID, "note": note})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.Webhook, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := a.cfg.HTTPClient.Do(req)
		if err != nil {
			a.cfg.Logger.Warn("finding webhook failed", "err", err)
			return
		}
		resp.Body.Close()
	}()
}
