package pgwire

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/shadow"
)

// rawText is a value already in PostgreSQL's text form (a shadow
// catalog's answer), sent as it is.
type rawText string

// errNoCatalog refuses catalog statements on a front without a shadow
// catalog (Config.Catalog nil).
var errNoCatalog = &wireError{Code: stateFeature,
	Message: "catalog queries (pg_catalog, information_schema) are not answered: the tables you may use are those your delegations name",
	Hint:    "list them with GET /v1/delegations or GET /v1/tables?target=NAME, or the MCP describe_tables tool"}

// catalogSpec is the session's bound as a shadow catalog holds it, after
// the statement's check.
func (c *session) catalogSpec(tree *pg.ParseResult) (*shadow.Spec, *wireError) {
	if c.srv.cfg.Catalog == nil {
		return nil, errNoCatalog
	}
	if err := shadow.Check(tree); err != nil {
		var r *shadow.RefusedError
		if errors.As(err, &r) {
			return nil, errorf(stateFeature, r.Reason)
		}
		return nil, errorf(stateFeature, err.Error())
	}
	spec := c.srv.gw.Scope(c.principal, c.target, c.srv.cfg.Clock())
	if spec == nil {
		return nil, errorf(stateNoDatabase, "the target's catalog is not available; try again later")
	}
	return spec, nil
}

// catalog answers a catalog statement from the shadow catalog of the
// session's bound: PostgreSQL's own answer over a catalog that holds
// exactly what the bound names. Nothing of the target is read, so it is
// neither decided nor recorded.
func (c *session) catalog(ctx context.Context, tree *pg.ParseResult, sql string) (*result, *wireError) {
	spec, werr := c.catalogSpec(tree)
	if werr != nil {
		return nil, werr
	}
	qctx, done := c.cancelable(ctx)
	out, err := c.srv.cfg.Catalog.Query(qctx, spec, sql)
	canceled := done()
	if err != nil {
		if canceled {
			return nil, errorf(stateCanceled, "canceling statement due to user request")
		}
		return nil, c.catalogError(err)
	}
	res := &result{hasRows: true, tag: out.Tag, cols: make([]column, len(out.Fields))}
	for i, f := range out.Fields {
		res.cols[i] = column{name: f.Name, oid: f.OID}
	}
	res.rows = make([][]any, len(out.Rows))
	for i, r := range out.Rows {
		row := make([]any, len(r))
		for j, v := range r {
			if v != nil {
				row[j] = rawText(v)
			}
		}
		res.rows[i] = row
	}
	return res, nil
}

// describeCatalog is a prepared catalog statement's parameter types and
// row description, from the shadow catalog.
func (c *session) describeCatalog(ctx context.Context, st *prepared) (*result, []uint32, *wireError) {
	spec, werr := c.catalogSpec(st.tree)
	if werr != nil {
		return nil, nil, werr
	}
	d, err := c.srv.cfg.Catalog.Describe(ctx, spec, st.sql)
	if err != nil {
		return nil, nil, c.catalogError(err)
	}
	res := &result{hasRows: true, cols: make([]column, len(d.Fields))}
	for i, f := range d.Fields {
		res.cols[i] = column{name: f.Name, oid: f.OID}
	}
	return res, d.Params, nil
}

// catalogError is a shadow catalog's error as the client reads it. The
// server's own text is passed on: the shadow holds only the bound.
func (c *session) catalogError(err error) *wireError {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return &wireError{Code: pgErr.Code, Message: pgErr.Message, Detail: pgErr.Detail, Hint: pgErr.Hint}
	case errors.Is(err, shadow.ErrTooLarge):
		return errorf(stateProgramLimit, "the catalog answer is too large: ask for fewer rows")
	case errors.Is(err, shadow.ErrBusy):
		return errorf(stateTooMany, "the catalog is busy; try again")
	}
	c.srv.cfg.Logger.Error("pgwire: catalog query", "principal", c.principal, "target", c.target, "err", err)
	return errorf(stateInternal, "the catalog query could not be answered")
}
