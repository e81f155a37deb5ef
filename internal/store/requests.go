package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The repositories: the domain's tables reached through typed methods, so
// that no package outside the store holds SQL. Their statements are
// written once in the SQL both drivers accept, with ? placeholders that
// Store.SQL rewrites for PostgreSQL; where the dialects differ, a method
// picks its statement by driver.

// RequestStatus is a request's state (the gateway names the states).
type RequestStatus string

// Request is a row of the requests table: one statement an agent sent.
type Request struct {
	ID, Principal, Target string
	SQL, Canonical        string
	Outcome               string
	Status                RequestStatus
	Path                  string
	DelegationID          string
	Rule                  sql.NullInt64
	Reasons               string // JSON array of strings
	Detail                string
	TxID, MarqueID        string
	RowsAffected          int64
	CreatedNS, UpdatedNS  int64
	Preview               string // JSON (pilot.Preview), or ""
	PreviewSHA256         string
	DecidedBy             string
}

// RequestOutcome is what finishing a request writes.
type RequestOutcome struct {
	ID, Outcome     string
	Status          RequestStatus
	Reasons, Detail string
	RowsAffected    int64
	TxID, MarqueID  string
	UpdatedNS       int64
}

// RequestFilter selects requests for ListRequests. Zero fields select
// everything; rows come oldest first.
type RequestFilter struct {
	ID     string
	Status RequestStatus
	// CreatedBefore and UpdatedBefore, when positive, keep requests
	// created (updated) at or before that Unix-nanosecond time.
	CreatedBefore, UpdatedBefore int64
}

// Requests is the requests table's repository. Its two hot statements,
// which commit inside logbook records (logbook.Record.With), are prepared
// once: on SQLite a record's transaction holds the one write connection,
// so they could not be prepared from inside it.
type Requests struct {
	st                   *Store
	insert, finish       *sql.Stmt
	insertSQL, finishSQL string
}

// NewRequests prepares the requests repository. Close it before the store.
func NewRequests(ctx context.Context, st *Store) (*Requests, error) {
	r := &Requests{st: st}
	var err error
	r.insertSQL = st.SQL(`INSERT INTO requests (id, principal, target, sql, canonical, outcome,
		status, path, delegation_id, rule, reasons, detail, txid, marque_id, rows_affected, created_ns, updated_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if r.insert, err = st.w.PrepareContext(ctx, r.insertSQL); err != nil {
		return nil, fmt.Errorf("store: requests: prepare: %w", err)
	}
	r.finishSQL = st.SQL(`UPDATE requests SET outcome = ?, status = ?, reasons = ?, detail = ?,
		rows_affected = ?, txid = ?, marque_id = ?, updated_ns = ? WHERE id = ?`)
	if r.finish, err = st.w.PrepareContext(ctx, r.finishSQL); err != nil {
		_ = r.insert.Close()
		return nil, fmt.Errorf("store: requests: prepare: %w", err)
	}
	return r, nil
}

// Close releases the prepared statements.
func (r *Requests) Close() error { return errors.Join(r.insert.Close(), r.finish.Close()) }

// Insert writes a new request row in tx (a logbook record's transaction).
func (r *Requests) Insert(ctx context.Context, tx *sql.Tx, q Request) error {
	_, err := tx.StmtContext(ctx, r.insert).ExecContext(ctx,
		q.ID, q.Principal, q.Target, q.SQL, q.Canonical, q.Outcome, q.Status, q.Path,
		q.DelegationID, q.Rule, q.Reasons, q.Detail, q.TxID, q.MarqueID, q.RowsAffected, q.CreatedNS, q.UpdatedNS)
	return err
}

// InsertView is Insert as a statement and its arguments (nil, int64 and
// string only), for a logbook record's View: the row is written with its
// entry, wherever the entry commits first.
func (r *Requests) InsertView(q Request) (string, []any) {
	var rule any
	if q.Rule.Valid {
		rule = q.Rule.Int64
	}
	return r.insertSQL, []any{q.ID, q.Principal, q.Target, q.SQL, q.Canonical, q.Outcome, string(q.Status), q.Path,
		q.DelegationID, rule, q.Reasons, q.Detail, q.TxID, q.MarqueID, q.RowsAffected, q.CreatedNS, q.UpdatedNS}
}

// Finish writes a request's outcome in tx (a logbook record's transaction).
func (r *Requests) Finish(ctx context.Context, tx *sql.Tx, o RequestOutcome) error {
	_, err := tx.StmtContext(ctx, r.finish).ExecContext(ctx,
		o.Outcome, o.Status, o.Reasons, o.Detail, o.RowsAffected, o.TxID, o.MarqueID, o.UpdatedNS, o.ID)
	return err
}

// FinishView is Finish as a statement and its arguments, for a logbook
// record's View (InsertView).
func (r *Requests) FinishView(o RequestOutcome) (string, []any) {
	return r.finishSQL, []any{o.Outcome, string(o.Status), o.Reasons, o.Detail, o.RowsAffected, o.TxID, o.MarqueID, o.UpdatedNS, o.ID}
}

// ClaimMarque replaces a request's marque id, previous, by marqueID if, and
// only if, the request is still in status running with previous recorded:
// the compare-and-set that keeps a node from running a statement another
// node's reconciliation settled meanwhile (MoveIfMarque). It reports
// whether it was recorded.
// It runs in tx, a logbook record's transaction (logbook.Record.If).
func (r *Requests) ClaimMarque(ctx context.Context, tx *sql.Tx, id, previous, marqueID string, running RequestStatus, updatedNS int64) (bool, error) {
	return r.affectedOne(tx.ExecContext(ctx, r.st.SQL(`UPDATE requests SET marque_id = ?, updated_ns = ? WHERE id = ? AND status = ? AND marque_id = ?`),
		marqueID, updatedNS, id, running, previous))
}

// MoveIfMarque moves a request from status from to to if, and only if, the
// marque id recorded for it is still marqueID (ClaimMarque's other side),
// and reports whether it moved.
// It runs in tx, a logbook record's transaction (logbook.Record.If).
func (r *Requests) MoveIfMarque(ctx context.Context, tx *sql.Tx, id, marqueID string, from, to RequestStatus, updatedNS int64) (bool, error) {
	return r.affectedOne(tx.ExecContext(ctx, r.st.SQL(`UPDATE requests SET status = ?, updated_ns = ? WHERE id = ? AND status = ? AND marque_id = ?`),
		to, updatedNS, id, from, marqueID))
}

// InsertIfMissing writes a request row rebuilt from the logbook, unless
// one with its id exists (operational handle).
func (r *Requests) InsertIfMissing(ctx context.Context, q Request) error {
	_, err := r.st.ops.ExecContext(ctx, r.st.SQL(`INSERT INTO requests (id, principal, target, sql, canonical, outcome, status, path,
		delegation_id, reasons, created_ns, updated_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
		q.ID, q.Principal, q.Target, q.SQL, q.Canonical, q.Outcome, q.Status, q.Path, q.DelegationID, q.Reasons, q.CreatedNS, q.UpdatedNS)
	return err
}

// List returns the requests f selects, oldest first (by created time,
// then id).
func (r *Requests) List(ctx context.Context, f RequestFilter) ([]Request, error) {
	q := `SELECT id, principal, target, sql, canonical, outcome, status, path,
		delegation_id, rule, reasons, detail, marque_id, txid, rows_affected, created_ns, updated_ns, preview, preview_sha256, decided_by
		FROM requests WHERE 1 = 1`
	var args []any
	if f.ID != "" {
		q += " AND id = ?"
		args = append(args, f.ID)
	}
	if f.Status != "" {
		q += " AND status = ?"
		args = append(args, f.Status)
	}
	if f.CreatedBefore > 0 {
		q += " AND created_ns <= ?"
		args = append(args, f.CreatedBefore)
	}
	if f.UpdatedBefore > 0 {
		q += " AND updated_ns <= ?"
		args = append(args, f.UpdatedBefore)
	}
	rows, err := r.st.r.QueryContext(ctx, r.st.SQL(q+" ORDER BY created_ns, id"), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Request
	for rows.Next() {
		var v Request
		if err := rows.Scan(&v.ID, &v.Principal, &v.Target, &v.SQL, &v.Canonical, &v.Outcome, &v.Status, &v.Path,
			&v.DelegationID, &v.Rule, &v.Reasons, &v.Detail, &v.MarqueID, &v.TxID, &v.RowsAffected, &v.CreatedNS, &v.UpdatedNS,
			&v.Preview, &v.PreviewSHA256, &v.DecidedBy); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Exists reports whether a request row with id exists.
func (r *Requests) Exists(ctx context.Context, id string) (bool, error) {
	var n int
	err := r.st.r.QueryRowContext(ctx, r.st.SQL(`SELECT count(*) FROM requests WHERE id = ?`), id).Scan(&n)
	return n > 0, err
}

// Count is how many requests of principal ("" for every principal) have
// status, and the creation time of the oldest (0 for none).
func (r *Requests) Count(ctx context.Context, status RequestStatus, principal string) (n int, oldestNS int64, err error) {
	q, args := `SELECT count(*), min(created_ns) FROM requests WHERE status = ?`, []any{status}
	if principal != "" {
		q += " AND principal = ?"
		args = append(args, principal)
	}
	var oldest sql.NullInt64
	err = r.st.r.QueryRowContext(ctx, r.st.SQL(q), args...).Scan(&n, &oldest)
	return n, oldest.Int64, err
}

// SetPreview stores a request's preview and its digest while its status
// is status: when it has none, or, with refresh, in place of the one it
// has. It reports whether it stored it (without refresh, another human's
// preview may have come first: that one stands, and every approver
// shares it).
func (r *Requests) SetPreview(ctx context.Context, id string, status RequestStatus, preview, sha256 string, refresh bool) (bool, error) {
	q := `UPDATE requests SET preview = ?, preview_sha256 = ? WHERE id = ? AND status = ? AND preview_sha256 = ''`
	if refresh {
		q = `UPDATE requests SET preview = ?, preview_sha256 = ? WHERE id = ? AND status = ?`
	}
	return r.affectedOne(r.st.ops.ExecContext(ctx, r.st.SQL(q), preview, sha256, id, status))
}

// Move sets a request's status to to if, and only if, it is from: the
// conditional update is the lock between nodes. updatedNS, when positive,
// is written too. It reports whether the request moved.
func (r *Requests) Move(ctx context.Context, id string, from, to RequestStatus, updatedNS int64) (bool, error) {
	q, args := `UPDATE requests SET status = ? WHERE id = ? AND status = ?`, []any{to, id, from}
	if updatedNS > 0 {
		q, args = `UPDATE requests SET status = ?, updated_ns = ? WHERE id = ? AND status = ?`, []any{to, updatedNS, id, from}
	}
	return r.affectedOne(r.st.ops.ExecContext(ctx, r.st.SQL(q), args...))
}

// Decision is a human act on a request: who, the signed act, and for a
// denial the reasons the request closes with.
type Decision struct {
	Status                             RequestStatus
	Path, DecidedBy, Act, ActSignature string
	Reasons                            string // "" leaves the reasons as they are
	UpdatedNS                          int64
}

// Decide records a human act on a request in status from, if it is still
// there, and reports whether it was.
func (r *Requests) Decide(ctx context.Context, id string, from RequestStatus, d Decision) (bool, error) {
	if d.Reasons != "" {
		return r.affectedOne(r.st.ops.ExecContext(ctx, r.st.SQL(`UPDATE requests SET status = ?, decided_by = ?, act = ?, act_signature = ?, reasons = ?, updated_ns = ?
			WHERE id = ? AND status = ?`), d.Status, d.DecidedBy, d.Act, d.ActSignature, d.Reasons, d.UpdatedNS, id, from))
	}
	return r.affectedOne(r.st.ops.ExecContext(ctx, r.st.SQL(`UPDATE requests SET status = ?, path = ?, decided_by = ?, act = ?, act_signature = ?, updated_ns = ?
		WHERE id = ? AND status = ?`), d.Status, d.Path, d.DecidedBy, d.Act, d.ActSignature, d.UpdatedNS, id, from))
}

// Undecide returns a request in status from to status to, clearing the
// human act Decide recorded.
func (r *Requests) Undecide(ctx context.Context, id string, from, to RequestStatus) error {
	_, err := r.st.ops.ExecContext(ctx, r.st.SQL(`UPDATE requests SET status = ?, path = '', decided_by = '', act = '', act_signature = '' WHERE id = ? AND status = ?`),
		to, id, from)
	return err
}

func (r *Requests) affectedOne(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// OldestOf is the creation time of the oldest request in any of statuses
// (0 for none).
func (r *Requests) OldestOf(ctx context.Context, statuses []RequestStatus) (int64, error) {
	if len(statuses) == 0 {
		return 0, nil
	}
	args := make([]any, len(statuses))
	for i, s := range statuses {
		args[i] = s
	}
	var oldest sql.NullInt64
	err := r.st.r.QueryRowContext(ctx, r.st.SQL(`SELECT min(created_ns) FROM requests WHERE status IN (?`+strings.Repeat(", ?", len(statuses)-1)+`)`), args...).Scan(&oldest)
	return oldest.Int64, err
}

// DeletePruned deletes, in tx, the requests in one of statuses whose
// logbook entries retention is removing: named as the request by an entry
// at or below through, and by no entry after it (indexed or not yet), so
// that a request keeps its row while any of its entries is kept (its
// decision entry, which reconciliation would otherwise take for an
// orphan, above all). It runs in logbook.Prune's With, before the
// entries' subject rows go.
func (r *Requests) DeletePruned(ctx context.Context, tx *sql.Tx, through int64, statuses []RequestStatus) (int64, error) {
	if len(statuses) == 0 {
		return 0, nil
	}
	match := "json_extract(e.subjects, '$.request') = requests.id"
	if r.st.driver == Postgres {
		match = "(e.subjects::jsonb ->> 'request') = requests.id"
	}
	args := []any{through, through}
	for _, s := range statuses {
		args = append(args, s)
	}
	res, err := tx.ExecContext(ctx, r.st.SQL(`DELETE FROM requests WHERE id IN
		(SELECT value FROM logbook_subjects WHERE seq <= ? AND key = 'request')
		AND NOT EXISTS (SELECT 1 FROM logbook_subjects s WHERE s.key = 'request' AND s.value = requests.id AND s.seq > ?)
		AND NOT EXISTS (SELECT 1 FROM logbook_entries e WHERE e.seq > (SELECT indexed_through FROM logbook_index WHERE id = 1) AND `+match+`)
		AND status IN (?`+strings.Repeat(", ?", len(statuses)-1)+`)`), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
