// Package scope holds what an agent is shown of its own scope, and builds
// it from the gateway: its delegations in plain language (DelegationView)
// and the tables they cover, column by column (TablesView). Both agents'
// fronts render these values, the HTTP API as JSON and MCP as a tool's
// structured content and text, so both show the same scope in the same
// JSON; neither front imports the other for it.
//
// Everything here is drawn from the signed bounds and, for the columns of
// a table, from the catalog each bound sees (bound.Catalog): nothing of
// the target outside an agent's bound shows (DESIGN.md invariant 10).
package scope

import (
	"errors"
	"fmt"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// DelegationView is a delegation as the fronts show it: to its agent
// (GET /v1/delegations, MCP my_delegations) and to the humans who add or
// revoke it.
type DelegationView struct {
	ID        string             `json:"id"`
	Sentence  string             `json:"sentence"`
	Grantee   string             `json:"grantee"`
	Target    string             `json:"target"`
	Tier      string             `json:"tier"`
	Signer    string             `json:"signer"`
	NotBefore string             `json:"not_before,omitempty"`
	Expires   string             `json:"expires"`
	Active    bool               `json:"active"`
	Revoked   bool               `json:"revoked"`
	Rules     []bound.RuleReport `json:"rules"`
	Fallback  string             `json:"fallback_authority,omitempty"`
}

// ViewDelegation renders a delegation in plain language.
func ViewDelegation(d *gateway.Delegation, now time.Time) DelegationView {
	v := DelegationView{ID: d.ID, Sentence: d.Bound.Sentence, Grantee: d.Grantee, Target: d.Target, Tier: d.Bound.Tier(),
		Signer: d.Signer, NotBefore: d.Bound.NotBefore, Expires: d.Bound.Expires, Active: d.Active(now), Revoked: d.Revoked != nil,
		Rules: []bound.RuleReport{}}
	for i, r := range d.Bound.Rules {
		route := "compiled"
		if r.Residual != "" {
			route = "residual"
		}
		v.Rules = append(v.Rules, bound.RuleReport{Index: i, Op: string(r.Op), Table: r.Table, Route: route, Summary: bound.Summary(r), Residual: r.Residual})
	}
	if v.Tier == "B" {
		v.Fallback = bound.FallbackAuthority(d.Bound)
	}
	return v
}

// TablesView is what GET /v1/tables shows: every table the caller's
// active delegations name, column by column, with the rules that let the
// caller read or write each column. It is derived from the signed bounds
// and the target's catalog, so it says exactly what the static check will
// accept on the caller's own authority.
type TablesView struct {
	Tables []TableView `json:"tables"`
	// NextCursor is set over HTTP when more tables follow (the API's
	// pages); MCP answers every table at once.
	NextCursor string `json:"next_cursor,omitempty"`
}

// TableView is one table in scope.
type TableView struct {
	Target  string       `json:"target"`
	Table   string       `json:"table"`
	Columns []ColumnView `json:"columns"`
	Rules   []ScopeRule  `json:"rules"`
	// Note is set when the table is not in the target's current catalog.
	Note string `json:"note,omitempty"`
}

// ColumnView is one column and the rules that cover it.
type ColumnView struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	// Read: a select rule lists the column. A statement that mentions the
	// column anywhere (select list, WHERE, JOIN, ORDER BY) needs one.
	Read bool `json:"read"`
	// Write: an update or insert rule lists the column (SET or INSERT).
	Write   bool      `json:"write"`
	ReadBy  []RuleRef `json:"read_by"`
	WriteBy []RuleRef `json:"write_by"`
}

// RuleRef names one rule of one delegation.
type RuleRef struct {
	DelegationID string `json:"delegation_id"`
	Rule         int    `json:"rule"`
	Op           string `json:"op"`
	// Route is "compiled" (runs at once) or "residual" (needs the Surveyor,
	// so referred to a human while Tier B is off).
	Route string `json:"route"`
}

// ScopeRule is one rule on a table, with its bounds.
type ScopeRule struct {
	DelegationID string   `json:"delegation_id"`
	Rule         int      `json:"rule"`
	Op           string   `json:"op"`
	Route        string   `json:"route"`
	Columns      []string `json:"columns"`
	Fence        string   `json:"fence,omitempty"`
	Check        string   `json:"check,omitempty"`
	MaxRows      int64    `json:"max_rows"`
	Residual     string   `json:"residual,omitempty"`
	Summary      string   `json:"summary"`
	Expires      string   `json:"expires"`
}

// DescribeTables describes the tables that principal's delegations in force
// at now cover, on one target or (target "") on every target. principal must
// be an authenticated agent: the view is only ever of its own scope. An
// unknown target is gateway.ErrUnknownTarget.
func DescribeTables(gw *gateway.Gateway, principal, target string, now time.Time) (*TablesView, error) {
	if principal == "" {
		return nil, errors.New("describe tables: no principal")
	}
	if target != "" {
		if _, ok := gw.Pilot(target); !ok {
			return nil, fmt.Errorf("%w: %q", gateway.ErrUnknownTarget, target)
		}
	}
	type key struct{ target, table string }
	idx := map[key]int{}
	out := &TablesView{Tables: []TableView{}}
	for _, d := range gw.Registry().Delegations(principal) {
		if !d.Active(now) || target != "" && d.Target != target {
			continue
		}
		var scope *sqlcheck.Catalog
		if p, ok := gw.Pilot(d.Target); ok {
			scope = d.Bound.Catalog(p.Catalog(), bound.CatalogName)
		}
		for i, r := range d.Bound.Rules {
			k := key{d.Target, r.Table}
			ti, ok := idx[k]
			if !ok {
				ti = len(out.Tables)
				idx[k] = ti
				out.Tables = append(out.Tables, TableView{Target: d.Target, Table: r.Table, Columns: []ColumnView{}, Rules: []ScopeRule{}})
			}
			t := &out.Tables[ti]
			t.addColumns(scope, r)
			route := "compiled"
			if r.Residual != "" {
				route = "residual"
			}
			t.Rules = append(t.Rules, ScopeRule{DelegationID: d.ID, Rule: i, Op: string(r.Op), Route: route,
				Columns: append([]string{}, r.Columns...), Fence: r.Fence, Check: r.Check, MaxRows: r.MaxRows,
				Residual: r.Residual, Summary: bound.Summary(r), Expires: d.Bound.Expires})
			ref := RuleRef{DelegationID: d.ID, Rule: i, Op: string(r.Op), Route: route}
			for _, col := range r.Columns {
				c := t.column(col)
				switch r.Op {
				case sqlcheck.OpSelect:
					c.Read, c.ReadBy = true, append(c.ReadBy, ref)
				case sqlcheck.OpUpdate, sqlcheck.OpInsert:
					c.Write, c.WriteBy = true, append(c.WriteBy, ref)
				}
			}
		}
	}
	return out, nil
}

// addColumns adds the columns of r's table as the delegation's bound sees
// it (bound.Catalog: the columns its rules list and those their fences and
// checks read), in the table's order, with their types: the same columns
// the statement path knows, and nothing of the table outside the bound
// (DESIGN.md invariant 10). scope is nil when the target's catalog is not
// available.
func (t *TableView) addColumns(scope *sqlcheck.Catalog, r bound.Rule) {
	name, err := r.TableName()
	if scope == nil || err != nil {
		t.Note = "the target's catalog is not available; only the columns the rules name are listed"
		return
	}
	ct, ok := scope.Table(name)
	if !ok {
		t.Note = "the table is not in the target's current catalog; only the columns the rules name are listed"
		return
	}
	for _, c := range ct.Columns {
		col := t.column(c.Name)
		col.Type = c.Type
	}
}

// column returns the named column, adding it when the catalog lacks it.
func (t *TableView) column(name string) *ColumnView {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return &t.Columns[i]
		}
	}
	t.Columns = append(t.Columns, ColumnView{Name: name, ReadBy: []RuleRef{}, WriteBy: []RuleRef{}})
	return &t.Columns[len(t.Columns)-1]
}
