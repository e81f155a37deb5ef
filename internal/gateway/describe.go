package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/route"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Description is what a statement with $n placeholders takes and
// returns, told without running it (Describe).
type Description struct {
	// ParamTypes are the type OIDs of $1..$n as the target types them in
	// their context; nil when it could not type them (SELECT $1).
	ParamTypes []uint32
	// Columns and ColumnTypes are the columns the statement returns once
	// its values are inlined, in order, with the names the target gives
	// them (two may share one): none for a write without RETURNING.
	Columns     []string
	ColumnTypes []uint32
}

// Why a statement is not described.
const (
	// NotDescribedRejected: it is refused whatever its values (it does
	// not parse, or no human could approve it).
	NotDescribedRejected = "rejected"
	// NotDescribedReferred: sent with its values, it would be referred
	// to a human: no delegation in force covers it (or this node's view
	// of them is stale).
	NotDescribedReferred = "referred"
	// NotDescribedRefused: its Pilot refused to describe it.
	NotDescribedRefused = "refused"
)

// NotDescribedError is a statement Describe does not describe, and its
// Code (NotDescribed...). Nothing was recorded or queued.
//
// Only a rejection carries the reasons a submission would answer: they
// are drawn from the text alone (it does not parse, DDL, a locking
// clause, past the limits). A statement no delegation covers, or that
// its Pilot refused to describe, carries none: the static check's
// reasons read the target's catalog, so that a column or a table outside
// the bound can show in them, and two targets that differ only outside
// the bound must refuse a Describe alike (DESIGN.md invariant 10).
// Sending the statement decides it, with its reasons.
type NotDescribedError struct {
	Code    string
	Reasons []string
	// Check is the static check's code of a rejection
	// (sqlcheck.CodeInputTooLarge, ...).
	Check string
}

func (e *NotDescribedError) Error() string {
	return fmt.Sprintf("gateway: describe: %s", e.Code)
}

// Describe tells what a statement with $n placeholders takes and returns,
// for the wire front's Describe of a prepared statement, without running
// it and without recording or queueing anything: no request is made.
//
// It is the statement path's steps 2 and 3 on the statement's NULL twin
// (sqlcheck.NullTwin: the check reads no constant's value, so the twin's
// decision is the statement's with any values). Only a statement some
// delegation in force covers (on the compiled path, or the surveyed one)
// goes to the Pilot, which verifies that delegation's signature and
// checks the twin itself before it prepares anything
// (pilot.Executor.Describe): nothing outside the bound is evaluated or
// told (DESIGN.md invariant 10). Everything else is a *NotDescribedError.
// A Pilot that cannot be reached is an error wrapping
// pilot.ErrUnreachable.
func (g *Gateway) Describe(ctx context.Context, principal, target, sql string) (*Description, error) {
	p, ok := g.targets[target]
	if !ok {
		return nil, fmt.Errorf("gateway: %w: %q", ErrUnknownTarget, target)
	}
	now := g.cfg.Clock()
	delegs := g.reg.InForce(principal, target, now)

	twin, _, _, err := sqlcheck.NullTwin(sql, g.cfg.Limits)
	if err != nil {
		// A text the twin cannot be made of is one the check refuses
		// whatever its values: its analysis says why.
		a := sqlcheck.Analyze(sql, p.Catalog(), g.cfg.Limits)
		nd := &NotDescribedError{Code: NotDescribedRejected, Check: sqlcheck.CodeParseError,
			Reasons: []string{"the statement cannot be checked: it must be exactly one statement that parses"}}
		if r, ok := a.Rejected(); ok {
			nd.Check, nd.Reasons = r.Code, []string{r.String()}
		}
		return nil, nd
	}
	// Against each delegation's catalog, as Submit checks (bound.Catalog).
	cat := p.Catalog()
	var first *Delegation
	if len(delegs) > 0 {
		first = delegs[0]
	}
	a, key := g.analyze(twin, g.scope(cat, first))
	if r, ok := a.Rejected(); ok {
		return nil, &NotDescribedError{Code: NotDescribedRejected, Check: r.Code, Reasons: []string{r.String()}}
	}
	checks := make([]route.Check, len(delegs))
	for i, d := range delegs {
		ad, kd := a, key
		if i > 0 {
			ad, kd = g.analyze(twin, g.scope(cat, d))
		}
		c := g.check(ad, kd, d)
		checks[i] = route.Check{Delegation: d.ID, Decision: c.dec}
	}
	// A statement some delegation covers is described, on the path it
	// would take: its description is drawn from that bound whether it
	// then runs, is surveyed or is referred (a used-up quota, Tier B
	// switched off), and Execute says which. No quota token is taken.
	// Delegations this node may no longer know to be revoked describe
	// nothing.
	i, ok := route.Choose(checks)
	if !ok || g.reg.Stale() != "" {
		return nil, &NotDescribedError{Code: NotDescribedReferred}
	}
	path := marque.PathCompiled
	if checks[i].Decision.Outcome == sqlcheck.Survey {
		path = marque.PathSurveyed
	}
	chosen := delegs[i]
	res, err := p.Describe(ctx, sql, chosen.Canonical, delegationAuth(chosen), principal, path)
	if err != nil {
		return nil, fmt.Errorf("gateway: describe: %w", err)
	}
	switch res.Outcome {
	case pilot.Described:
	case pilot.Refused:
		// Its reasons and the target's own words are for the log, never
		// the agent.
		g.cfg.Logger.Warn("describe: the Pilot refused", "principal", principal, "target", target,
			"delegation", chosen.ID, "code", res.Code, "reasons", res.Reasons, "detail", res.Detail)
		return nil, &NotDescribedError{Code: NotDescribedRefused}
	default:
		return nil, errors.New("gateway: describe: the Pilot answered " + string(res.Outcome))
	}
	d := &Description{ParamTypes: res.ParamTypes}
	if res.Columns != nil {
		d.Columns, d.ColumnTypes = make([]string, len(res.Columns)), make([]uint32, len(res.Columns))
		for i, c := range res.Columns {
			d.Columns[i], d.ColumnTypes[i] = c.Name, c.Type
		}
	}
	return d, nil
}
