package store

import (
	"context"
	"database/sql"
	"errors"
)

// NoteStatus is the state of a Leadsman note row.
type NoteStatus string

// Note statuses.
const (
	NoteWriting NoteStatus = "writing" // claimed by a node; its model call is under way
	NoteWritten NoteStatus = "written" // the note is in
	NoteFailed  NoteStatus = "failed"  // the model call failed; Failure says why
)

// Note is a row of leadsman_notes: the Leadsman's advisory note on one
// referred request. Text is model output: untrusted.
type Note struct {
	RequestID string
	Status    NoteStatus
	Leadsman  string
	Provider  string
	Model     string
	Text      string
	Failure   string
	ClaimedNS int64
	WrittenNS int64
}

// Unnoted is a waiting request the Leadsman has not claimed.
type Unnoted struct {
	ID        string
	CreatedNS int64
}

// Notes is the leadsman_notes table's repository. Only the Leadsman and
// the fronts that show its notes to humans use it (internal/layers holds
// every other package to that). Its writes go through the operational
// handle: a note is advisory and no decision waits for its fsync.
type Notes struct{ st *Store }

// NewNotes returns the notes repository.
func NewNotes(st *Store) *Notes { return &Notes{st: st} }

// Claim records that leadsman is writing the note on request id, and
// reports whether this caller got it: the first claim wins, and so does a
// claim on a row left writing since before staleNS (a node that stopped
// mid-call).
func (n *Notes) Claim(ctx context.Context, id, leadsman string, atNS, staleNS int64) (bool, error) {
	res, err := n.st.ops.ExecContext(ctx, n.st.SQL(`INSERT INTO leadsman_notes (request_id, status, leadsman, claimed_ns)
		VALUES (?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING`), id, NoteWriting, leadsman, atNS)
	if ok, err := one(res, err); err != nil || ok {
		return ok, err
	}
	return one(n.st.ops.ExecContext(ctx, n.st.SQL(`UPDATE leadsman_notes SET leadsman = ?, claimed_ns = ?
		WHERE request_id = ? AND status = ? AND claimed_ns < ?`), leadsman, atNS, id, NoteWriting, staleNS))
}

// Finish writes a claimed note's outcome (NoteWritten or NoteFailed) and
// reports whether the claim, made at note.ClaimedNS, was still this
// caller's.
func (n *Notes) Finish(ctx context.Context, note Note) (bool, error) {
	return one(n.st.ops.ExecContext(ctx, n.st.SQL(`UPDATE leadsman_notes SET status = ?, provider = ?, model = ?, note = ?, failure = ?, written_ns = ?
		WHERE request_id = ? AND status = ? AND claimed_ns = ?`),
		note.Status, note.Provider, note.Model, note.Text, note.Failure, note.WrittenNS, note.RequestID, NoteWriting, note.ClaimedNS))
}

// Get returns the note on request id; found is false when there is none.
func (n *Notes) Get(ctx context.Context, id string) (note Note, found bool, err error) {
	err = n.st.r.QueryRowContext(ctx, n.st.SQL(`SELECT request_id, status, leadsman, provider, model, note, failure, claimed_ns, written_ns
		FROM leadsman_notes WHERE request_id = ?`), id).
		Scan(&note.RequestID, &note.Status, &note.Leadsman, &note.Provider, &note.Model, &note.Text, &note.Failure, &note.ClaimedNS, &note.WrittenNS)
	if errors.Is(err, sql.ErrNoRows) {
		return Note{}, false, nil
	}
	return note, err == nil, err
}

// Unnoted lists up to limit requests in status waiting that have no note
// row, or one left writing since before staleNS, oldest first.
func (n *Notes) Unnoted(ctx context.Context, waiting RequestStatus, staleNS int64, limit int) ([]Unnoted, error) {
	rows, err := n.st.r.QueryContext(ctx, n.st.SQL(`SELECT r.id, r.created_ns FROM requests r
		WHERE r.status = ? AND NOT EXISTS (SELECT 1 FROM leadsman_notes l WHERE l.request_id = r.id AND (l.status <> ? OR l.claimed_ns >= ?))
		ORDER BY r.created_ns, r.id LIMIT ?`), waiting, NoteWriting, staleNS, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Unnoted
	for rows.Next() {
		var u Unnoted
		if err := rows.Scan(&u.ID, &u.CreatedNS); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// one reports whether a statement affected exactly one row.
func one(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	k, err := res.RowsAffected()
	return k == 1, err
}
