package store

import (
	"context"
	"database/sql"
	"errors"
)

// AuditRow is a row of the audits table: one sampled judgment queued for
// a human review.
type AuditRow struct {
	ID, JudgmentID, RequestID, DelegationID string
	Why                                     string
	Evidence                                string // JSON
	Status                                  string // pending, reviewed
	Verdict, Reviewer, Note                 string
	CreatedNS                               int64
}

// CountAudits is how many audits of a delegation were queued at or after
// sinceNS.
func (s *Store) CountAudits(ctx context.Context, delegationID string, sinceNS int64) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, s.SQL(`SELECT count(*) FROM audits WHERE delegation_id = ? AND created_ns >= ?`), delegationID, sinceNS).Scan(&n)
	return n, err
}

// InsertAudit queues an audit, pending, unless its judgment has one.
func (s *Store) InsertAudit(ctx context.Context, a AuditRow) error {
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO audits (id, judgment_id, request_id, delegation_id, why, evidence, status, created_ns)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT (judgment_id) DO NOTHING`),
		a.ID, a.JudgmentID, a.RequestID, a.DelegationID, a.Why, a.Evidence, a.CreatedNS)
	return err
}

// Audits lists audits with status ("" for all), oldest first.
func (s *Store) Audits(ctx context.Context, status string) ([]AuditRow, error) {
	q := `SELECT id, judgment_id, request_id, delegation_id, why, evidence, status, verdict, reviewer, note, created_ns FROM audits`
	var args []any
	if status != "" {
		q += ` WHERE status = ?`
		args = append(args, status)
	}
	rows, err := s.r.QueryContext(ctx, s.SQL(q+` ORDER BY created_ns, id`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditRow
	for rows.Next() {
		var a AuditRow
		if err := rows.Scan(&a.ID, &a.JudgmentID, &a.RequestID, &a.DelegationID, &a.Why, &a.Evidence, &a.Status, &a.Verdict, &a.Reviewer, &a.Note, &a.CreatedNS); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ReviewAudit records a verdict on a pending audit and reports whether it
// was still pending.
func (s *Store) ReviewAudit(ctx context.Context, id, verdict, reviewer, note, act string, atNS int64) (bool, error) {
	res, err := s.w.ExecContext(ctx, s.SQL(`UPDATE audits SET status = 'reviewed', verdict = ?, reviewer = ?, note = ?, review_act = ?, reviewed_ns = ?
		WHERE id = ? AND status = 'pending'`), verdict, reviewer, note, act, atNS, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// RecentVerdicts are a delegation's last n review verdicts, newest first.
func (s *Store) RecentVerdicts(ctx context.Context, delegationID string, n int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, s.SQL(`SELECT verdict FROM audits WHERE delegation_id = ? AND status = 'reviewed' ORDER BY reviewed_ns DESC LIMIT ?`),
		delegationID, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// AuditStats are the audit queue's depth and oldest pending creation time
// (0 for none), and the reviews at or after sinceNS and how many of them
// found a wrong verdict.
func (s *Store) AuditStats(ctx context.Context, sinceNS int64) (pending int, oldestNS int64, reviewed, wrong int, err error) {
	var oldest sql.NullInt64
	if err = s.r.QueryRowContext(ctx, `SELECT count(*), min(created_ns) FROM audits WHERE status = 'pending'`).Scan(&pending, &oldest); err != nil {
		return
	}
	// CASE, not sum(boolean): PostgreSQL has no sum of booleans.
	err = s.r.QueryRowContext(ctx, s.SQL(`SELECT count(*), coalesce(sum(CASE WHEN verdict = 'wrong' THEN 1 ELSE 0 END), 0) FROM audits
		WHERE status = 'reviewed' AND reviewed_ns >= ?`), sinceNS).Scan(&reviewed, &wrong)
	return pending, oldest.Int64, reviewed, wrong, err
}

// Suspension is a delegation's fast-path suspension (suspensions).
type Suspension struct {
	Reason      string
	SuspendedNS int64
	Lifted      bool
}

// Suspend suspends a delegation's fast path (again, if it was lifted).
func (s *Store) Suspend(ctx context.Context, delegationID, reason string, atNS int64) error {
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO suspensions (delegation_id, suspended_ns, reason) VALUES (?, ?, ?)
		ON CONFLICT (delegation_id) DO UPDATE SET suspended_ns = excluded.suspended_ns, reason = excluded.reason, lifted_ns = NULL, lifted_by = NULL`),
		delegationID, atNS, reason)
	return err
}

// Suspension returns a delegation's suspension; found is false when it
// was never suspended.
func (s *Store) Suspension(ctx context.Context, delegationID string) (sp Suspension, found bool, err error) {
	var lifted sql.NullInt64
	err = s.r.QueryRowContext(ctx, s.SQL(`SELECT reason, suspended_ns, lifted_ns FROM suspensions WHERE delegation_id = ?`), delegationID).
		Scan(&sp.Reason, &sp.SuspendedNS, &lifted)
	if errors.Is(err, sql.ErrNoRows) {
		return Suspension{}, false, nil
	}
	sp.Lifted = lifted.Valid
	return sp, err == nil, err
}

// LiftSuspension lifts a delegation's suspension, if it is in force.
func (s *Store) LiftSuspension(ctx context.Context, delegationID, by string, atNS int64) error {
	_, err := s.w.ExecContext(ctx, s.SQL(`UPDATE suspensions SET lifted_ns = ?, lifted_by = ? WHERE delegation_id = ? AND lifted_ns IS NULL`),
		atNS, by, delegationID)
	return err
}
