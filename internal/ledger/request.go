package ledger

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/store"
)

// Request is one statement an agent sent, as the ledger records it: the
// one request type of the domain. The views the fronts show (the agent's
// answer, a request's page) are drawn from it.
type Request struct {
	ID           string
	Principal    string
	Target       string
	SQL          string
	Canonical    string
	Outcome      Outcome
	Status       Status
	Path         string
	DelegationID string
	Rule         *int
	Reasons      []string
	// Detail is for humans only: the target's error text, counts.
	Detail       string
	MarqueID     string
	TxID         string
	RowsAffected int64
	Created      time.Time
	Updated      time.Time

	// JudgmentID is the surveyed path's judgment; it is in the decision
	// entry, not the row.
	JudgmentID string

	// Read from the row only, for humans: the stored preview (JSON,
	// pilot.Preview) and its digest, and who approved or denied it.
	Preview       string
	PreviewSHA256 string
	DecidedBy     string
}

// ApplyResult takes the Pilot's outcome into the request: executed, or
// referred (a guard failure rolls back and refers, DESIGN.md section 6).
func (r *Request) ApplyResult(res *pilot.Result) {
	r.TxID, r.Detail = res.TxID, res.Detail
	switch res.Outcome {
	case pilot.Executed:
		r.Outcome, r.Status, r.RowsAffected = OutcomeExecuted, StatusExecuted, res.RowsAffected
		r.Reasons = nil
	default:
		r.Outcome, r.Status, r.RowsAffected = OutcomeReferred, StatusWaiting, 0
		r.Reasons = append([]string(nil), res.Reasons...)
	}
}

// Filter selects requests. Zero fields select everything; requests come
// oldest first.
type Filter struct {
	ID        string
	Principal string
	Status    Status
	// CreatedBefore and UpdatedBefore, when not zero, keep requests
	// created (updated) at or before then.
	CreatedBefore, UpdatedBefore time.Time
}

func (f Filter) store() store.RequestFilter {
	sf := store.RequestFilter{ID: f.ID, Status: store.RequestStatus(f.Status)}
	if !f.CreatedBefore.IsZero() {
		sf.CreatedBefore = f.CreatedBefore.UnixNano()
	}
	if !f.UpdatedBefore.IsZero() {
		sf.UpdatedBefore = f.UpdatedBefore.UnixNano()
	}
	return sf
}

// fromRow reads a request row.
func fromRow(r store.Request) *Request {
	q := &Request{ID: r.ID, Principal: r.Principal, Target: r.Target, SQL: r.SQL, Canonical: r.Canonical,
		Outcome: Outcome(r.Outcome), Status: Status(r.Status), Path: r.Path, DelegationID: r.DelegationID, Detail: r.Detail,
		MarqueID: r.MarqueID, TxID: r.TxID, RowsAffected: r.RowsAffected, Preview: r.Preview, PreviewSHA256: r.PreviewSHA256,
		DecidedBy: r.DecidedBy}
	if r.Rule.Valid {
		n := int(r.Rule.Int64)
		q.Rule = &n
	}
	_ = json.Unmarshal([]byte(r.Reasons), &q.Reasons)
	q.Created, q.Updated = time.Unix(0, r.CreatedNS).UTC(), time.Unix(0, r.UpdatedNS).UTC()
	return q
}

// row is the request as a new row: its outcome as given (the agent's).
func (r *Request) row(outcome Outcome) store.Request {
	reasons, _ := json.Marshal(nonNil(r.Reasons))
	var rule sql.NullInt64
	if r.Rule != nil {
		rule = sql.NullInt64{Int64: int64(*r.Rule), Valid: true}
	}
	return store.Request{ID: r.ID, Principal: r.Principal, Target: r.Target, SQL: r.SQL,
		Canonical: r.Canonical, Outcome: string(outcome), Status: store.RequestStatus(r.Status), Path: r.Path, DelegationID: r.DelegationID,
		Rule: rule, Reasons: string(reasons), Detail: r.Detail, TxID: r.TxID, MarqueID: r.MarqueID,
		CreatedNS: r.Created.UnixNano(), UpdatedNS: r.Updated.UnixNano()}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
