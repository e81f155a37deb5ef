package pilot

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Describe tells the types of a statement's $1..$n and the columns it
// returns, without running it: what a PostgreSQL Describe of a prepared
// statement answers (the wire front's). sql holds the placeholders.
//
// It rests on a signed bound, as Rehearse does: the grantor's signature
// over canonicalBound (auth) is verified here, and the statement's NULL
// twin (sqlcheck.NullTwin) must pass the Pilot's own check of the bound
// for path, as Execute's statement must (the compiled path: conforms;
// the surveyed path: conforms or survey). Only then is anything sent to
// the target: the fence views the guards read through, if missing (as
// Execute would create them), then the twin's guarded text, the text
// Execute runs once the values are inlined, and the same text with its
// placeholders back, each prepared (Parse and Describe: parsed, names
// and types resolved, nothing planned or executed) on a pooled
// connection in a READ ONLY transaction with the pinned settings, which
// rolls back. A statement outside the bound is refused before the target
// sees it, so what a description shows is drawn from the bound (DESIGN.md
// invariant 10): the columns of the guarded text are those the rules
// list.
//
// Its Result is Described, with Columns, their names as the target gives
// them and their types (none for a write without RETURNING) and ParamTypes (nil when the target could not
// type the placeholders in their context), or Refused.
func (p *Pilot) Describe(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*Result, error) {
	pb, res := p.verifyBound(canonicalBound, auth, principal, p.cfg.Clock())
	if res != nil {
		return res, nil
	}
	twin, orig, _, err := sqlcheck.NullTwin(sql, sqlcheck.Limits{})
	if err != nil {
		return refused(RefusedCheck, "%v", err), nil
	}
	g, res := p.guard(twin, pb, path, false)
	if res != nil {
		return res, nil
	}
	// The same guards around the placeholders: the target types each from
	// its context in the text that runs. Without it (the trees do not
	// correspond), the description has no parameter types.
	var withParams string
	cat := p.scope(pb)
	if a := sqlcheck.Analyze(twin, cat, sqlcheck.Limits{}); a.Tree != nil {
		if d, r := p.check(a, pb, path); r == nil && sqlcheck.RestoreParams(orig, a.Tree) == nil {
			if gp, err := BuildGuards(a, d, pb.b, cat, WithExprCache(&p.exprs)); err == nil {
				withParams = gp.SQL
			}
		}
	}
	if err := p.ensureViews(ctx, g.Views); err != nil {
		return nil, err
	}
	t, err := p.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer t.Close() // rolls back: nothing to commit
	b := &pgx.Batch{}
	b.Queue(`SET LOCAL transaction_read_only = on`)
	if p.cfg.Role != "" {
		b.Queue(`SELECT set_config('role', $1, true)`, p.cfg.Role)
	}
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("pilot: describe: session settings: %w", err)
	}
	pc := t.conn.Conn().PgConn()
	sd, err := pc.Prepare(ctx, "", g.SQL, nil)
	if err != nil {
		p.forgetViews(err)
		return statementRefusal(err)
	}
	res = &Result{Outcome: Described, ExecutedSQL: g.SQL}
	if g.Returning || g.Kind == sqlcheck.OpSelect {
		n := len(sd.Fields)
		if g.Hidden {
			n--
		}
		res.Columns = make([]Column, n)
		for i := 0; i < n; i++ {
			res.Columns[i] = Column{Name: sd.Fields[i].Name, Type: sd.Fields[i].DataTypeOID}
		}
	}
	if withParams != "" {
		sp, err := pc.Prepare(ctx, "", withParams, nil)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			res.ParamTypes = sp.ParamOIDs
		case errors.As(err, &pgErr):
			// A placeholder whose type its context does not settle
			// (SELECT $1): its value goes in untyped, as it always may.
		default:
			return nil, fmt.Errorf("pilot: describe: %w", err)
		}
	}
	return res, nil
}
