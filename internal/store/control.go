package store

import (
	"context"
	"database/sql"
	"errors"
)

// Delegation is a row of the delegations table: a signed grant as stored.
type Delegation struct {
	ID, Target, Grantee, Signer string
	Canonical, Signature        string // the signed bytes, the armored sshsig
	Source                      string
	CreatedNS                   int64
	RevokedNS                   sql.NullInt64
}

// Delegations lists every stored delegation, oldest first.
func (s *Store) Delegations(ctx context.Context) ([]Delegation, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, target, grantee, signer, canonical, signature, source, created_ns, revoked_ns FROM delegations ORDER BY created_ns, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Delegation
	for rows.Next() {
		var d Delegation
		if err := rows.Scan(&d.ID, &d.Target, &d.Grantee, &d.Signer, &d.Canonical, &d.Signature, &d.Source, &d.CreatedNS, &d.RevokedNS); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// InsertDelegation stores a delegation unless one with its id is stored
// (the id is derived from the signed bytes: it is the same one).
func (s *Store) InsertDelegation(ctx context.Context, d Delegation) error {
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO delegations (id, target, grantee, signer, canonical, signature, source, created_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
		d.ID, d.Target, d.Grantee, d.Signer, d.Canonical, d.Signature, d.Source, d.CreatedNS)
	return err
}

// RevokeDelegation records a delegation's signed revocation.
func (s *Store) RevokeDelegation(ctx context.Context, id string, revokedNS int64, by, revocation string) error {
	_, err := s.w.ExecContext(ctx, s.SQL(`UPDATE delegations SET revoked_ns = ?, revoked_by = ?, revocation = ? WHERE id = ?`),
		revokedNS, by, revocation, id)
	return err
}

// SurveyorRule is a residual rule's Tier B state (surveyor_rules).
type SurveyorRule struct {
	AuditableBy string
	Enabled     bool
	Surveyor    string
	EnabledNS   int64
}

// SurveyorRule returns a rule's Tier B state; found is false when nothing
// was ever recorded for it.
func (s *Store) SurveyorRule(ctx context.Context, delegationID string, rule int) (r SurveyorRule, found bool, err error) {
	var enabled int
	err = s.r.QueryRowContext(ctx, s.SQL(`SELECT auditable_by, enabled, surveyor, enabled_ns FROM surveyor_rules WHERE delegation_id = ? AND rule = ?`),
		delegationID, rule).Scan(&r.AuditableBy, &enabled, &r.Surveyor, &r.EnabledNS)
	if errors.Is(err, sql.ErrNoRows) {
		return SurveyorRule{}, false, nil
	}
	r.Enabled = enabled == 1
	return r, err == nil, err
}

// MarkAuditable records a reviewer's signed act marking a rule auditable.
func (s *Store) MarkAuditable(ctx context.Context, delegationID string, rule int, by, act string, atNS int64) error {
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO surveyor_rules (delegation_id, rule, auditable_by, auditable_act, auditable_ns) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (delegation_id, rule) DO UPDATE SET auditable_by = excluded.auditable_by, auditable_act = excluded.auditable_act, auditable_ns = excluded.auditable_ns`),
		delegationID, rule, by, act, atNS)
	return err
}

// Enablement is a signed act enabling (or disabling) the Surveyor for a rule.
type Enablement struct {
	DelegationID string
	Rule         int
	On           bool
	By, Act      string
	Surveyor     string
	Bundle       string
	SignedNS     int64
}

// SetEnablement records an enablement act.
func (s *Store) SetEnablement(ctx context.Context, e Enablement) error {
	on := 0
	if e.On {
		on = 1
	}
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO surveyor_rules (delegation_id, rule, enabled, enabled_by, enabled_act, surveyor, bundle, enabled_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delegation_id, rule) DO UPDATE SET enabled = excluded.enabled, enabled_by = excluded.enabled_by,
		enabled_act = excluded.enabled_act, surveyor = excluded.surveyor, bundle = excluded.bundle, enabled_ns = excluded.enabled_ns`),
		e.DelegationID, e.Rule, on, e.By, e.Act, e.Surveyor, e.Bundle, e.SignedNS)
	return err
}

// Judgment is a row of the judgments table.
type Judgment struct {
	ID, RequestID, DelegationID string
	Rule                        int
	Outcome                     string
	Correlated                  bool
	Record                      string // the judgment JSON
	CreatedNS                   int64
}

// InsertJudgment stores a Surveyor judgment.
func (s *Store) InsertJudgment(ctx context.Context, j Judgment) error {
	corr := 0
	if j.Correlated {
		corr = 1
	}
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO judgments (id, request_id, delegation_id, rule, outcome, correlated, record, created_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), j.ID, j.RequestID, j.DelegationID, j.Rule, j.Outcome, corr, j.Record, j.CreatedNS)
	return err
}

// Switch is a row of the switches table.
type Switch struct {
	Name, Scope string
	On          bool
	UpdatedNS   int64
	UpdatedBy   string
}

// Switches reads every switch.
func (s *Store) Switches(ctx context.Context) ([]Switch, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, scope, value, updated_ns, updated_by FROM switches`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Switch
	for rows.Next() {
		var sw Switch
		var on int64
		if err := rows.Scan(&sw.Name, &sw.Scope, &on, &sw.UpdatedNS, &sw.UpdatedBy); err != nil {
			return nil, err
		}
		sw.On = on == 1
		out = append(out, sw)
	}
	return out, rows.Err()
}

// SetSwitch writes one switch.
func (s *Store) SetSwitch(ctx context.Context, sw Switch) error {
	v := 0
	if sw.On {
		v = 1
	}
	_, err := s.w.ExecContext(ctx, s.SQL(`INSERT INTO switches (name, scope, value, updated_ns, updated_by) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name, scope) DO UPDATE SET value = excluded.value, updated_ns = excluded.updated_ns, updated_by = excluded.updated_by`),
		sw.Name, sw.Scope, v, sw.UpdatedNS, sw.UpdatedBy)
	return err
}
