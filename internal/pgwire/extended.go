package pgwire

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
)

// The extended query protocol. A statement runs once its parameters are
// bound, at the portal's Describe or Execute, whichever comes first: the
// row description is only known once the Pilot has answered, and drivers
// (pgx, node-postgres) describe the portal right before executing it.

func (c *session) parse(ctx context.Context, m *pgproto3.Parse) *wireError {
	if _, dup := c.stmts[m.Name]; dup && m.Name != "" {
		return errorf(stateDuplicatePrepared, fmt.Sprintf("prepared statement %q already exists", m.Name))
	}
	for i, oid := range m.ParameterOIDs {
		if oid == oidUnknown || oid == oidUnknownLit {
			continue
		}
		if _, ok := paramTypes[oid]; !ok {
			return &wireError{Code: stateDatatypeMismatch, Message: fmt.Sprintf("parameter $%d is declared with type OID %d, which this server does not take", i+1, oid),
				Hint: "declare a common built-in type (int2, int4, int8, numeric, float4, float8, text, varchar, bool, date, timestamp, timestamptz, uuid, bytea, json, jsonb, or an array of one), or leave it untyped (0)"}
		}
	}
	if _, ok := quickVerb(m.Query); ok && len(m.ParameterOIDs) == 0 {
		// No parameters and nothing the front answers: no parse here.
		c.stmts[m.Name] = &prepared{sql: m.Query}
		c.send(&pgproto3.ParseComplete{})
		return nil
	}
	tree, err := pg.Parse(m.Query)
	if err != nil {
		// It does not parse: the statement path records and rejects it,
		// as it does over HTTP.
		_, werr := c.governed(ctx, m.Query, "SELECT")
		if werr == nil {
			werr = errorf(stateSyntax, err.Error())
		}
		return werr
	}
	info := params(tree)
	n := max(info.count, len(m.ParameterOIDs))
	if n > 65535 {
		return errorf(stateProgramLimit, "a statement may have at most 65535 parameters")
	}
	oids := make([]uint32, n)
	for i := range oids {
		if i < len(m.ParameterOIDs) && m.ParameterOIDs[i] != oidUnknownLit {
			oids[i] = m.ParameterOIDs[i]
		}
		if oids[i] == 0 {
			oids[i] = info.casts[i+1]
		}
	}
	c.stmts[m.Name] = &prepared{sql: m.Query, tree: tree, oids: oids}
	c.send(&pgproto3.ParseComplete{})
	return nil
}

func (c *session) bind(m *pgproto3.Bind) *wireError {
	st, ok := c.stmts[m.PreparedStatement]
	if !ok {
		return errorf(stateUndefinedPrepared, fmt.Sprintf("prepared statement %q does not exist", m.PreparedStatement))
	}
	if _, dup := c.portals[m.DestinationPortal]; dup && m.DestinationPortal != "" {
		return errorf("42P03", fmt.Sprintf("portal %q already exists", m.DestinationPortal))
	}
	if len(m.Parameters) != len(st.oids) {
		return errorf(stateProtocol, fmt.Sprintf("bind message supplies %d parameters, but prepared statement %q requires %d", len(m.Parameters), m.PreparedStatement, len(st.oids)))
	}
	nf := len(m.ParameterFormatCodes)
	if nf > 1 && nf != len(m.Parameters) {
		return errorf(stateProtocol, fmt.Sprintf("bind message has %d parameter formats but %d parameters", nf, len(m.Parameters)))
	}
	p := &portal{sql: st.sql, tree: st.tree, formats: m.ResultFormatCodes}
	for _, f := range m.ResultFormatCodes {
		if f != pgtype.TextFormatCode && f != pgtype.BinaryFormatCode {
			return errorf(stateProtocol, fmt.Sprintf("unsupported format code: %d", f))
		}
	}
	if len(st.oids) > 0 {
		vals := make([]boundParam, len(m.Parameters))
		for i, raw := range m.Parameters {
			format := int16(pgtype.TextFormatCode)
			switch {
			case nf == 1:
				format = m.ParameterFormatCodes[0]
			case nf > 1:
				format = m.ParameterFormatCodes[i]
			}
			if format != pgtype.TextFormatCode && format != pgtype.BinaryFormatCode {
				return errorf(stateProtocol, fmt.Sprintf("unsupported format code: %d", format))
			}
			vals[i].oid = st.oids[i]
			if raw == nil {
				vals[i].null = true
				continue
			}
			s, werr := paramText(c.types, i, st.oids[i], format, raw)
			if werr != nil {
				return werr
			}
			vals[i].text = s
		}
		tree := proto.Clone(st.tree).(*pg.ParseResult)
		if err := inline(tree, vals); err != nil {
			return errorf(stateProtocol, err.Error())
		}
		text, err := pg.Deparse(tree)
		if err != nil {
			return errorf(stateSyntax, "the statement with its parameters cannot be rendered: "+err.Error())
		}
		p.sql, p.tree = text, tree
	}
	c.portals[m.DestinationPortal] = p
	c.send(&pgproto3.BindComplete{})
	return nil
}

func (c *session) describe(ctx context.Context, m *pgproto3.Describe) *wireError {
	if m.ObjectType == 'S' {
		st, ok := c.stmts[m.Name]
		if !ok {
			return errorf(stateUndefinedPrepared, fmt.Sprintf("prepared statement %q does not exist", m.Name))
		}
		// Parameters without a declared or cast type are reported as
		// unspecified (0): the client sends them as text, and PostgreSQL
		// types their constants from context. The rows are described
		// when the portal is.
		c.send(&pgproto3.ParameterDescription{ParameterOIDs: st.oids})
		c.send(&pgproto3.NoData{})
		return nil
	}
	p, ok := c.portals[m.Name]
	if !ok {
		return errorf(stateUndefinedPortal, fmt.Sprintf("portal %q does not exist", m.Name))
	}
	c.runPortal(ctx, p)
	if p.err != nil {
		return p.err
	}
	if p.res.hasRows {
		c.send(c.rowDescription(p.res, p.formats))
	} else {
		c.send(&pgproto3.NoData{})
	}
	return nil
}

func (c *session) runPortal(ctx context.Context, p *portal) {
	if p.res != nil || p.err != nil {
		return
	}
	p.res, p.err = c.statement(ctx, p.sql, p.tree)
}

func (c *session) execute(ctx context.Context, m *pgproto3.Execute) *wireError {
	p, ok := c.portals[m.Portal]
	if !ok {
		return errorf(stateUndefinedPortal, fmt.Sprintf("portal %q does not exist", m.Portal))
	}
	c.runPortal(ctx, p)
	if p.err != nil {
		return p.err
	}
	if p.done {
		// A portal runs once; executing it again returns no more rows.
		c.send(&pgproto3.CommandComplete{CommandTag: []byte(p.res.tag)})
		return nil
	}
	n, suspended := c.sendResult(p.res, p.formats, true, p.sent, int(m.MaxRows))
	p.sent += n
	p.done = !suspended
	return nil
}
