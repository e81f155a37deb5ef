package pgwire

import (
	"context"
	"errors"
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

// A session holds at most maxHeld prepared statements, and as many
// portals, whose texts total at most maxHeldBytes each: the front's
// memory is shared by every agent, and one must not exhaust it by
// preparing without closing.
const (
	maxHeld      = 1000
	maxHeldBytes = 16 << 20
)

// heldLimit refuses a new statement or portal of n bytes past the caps;
// size is what one held weighs.
func heldLimit[T any](held map[string]T, name string, n int, size func(T) int, what string) *wireError {
	total := n
	for k, v := range held {
		if k != name {
			total += size(v)
		}
	}
	_, replaces := held[name]
	if !replaces && len(held) >= maxHeld || total > maxHeldBytes {
		return &wireError{Code: stateProgramLimit, Message: fmt.Sprintf("this session holds the most %ss it may (%d, or %d MiB of text and parse trees)", what, maxHeld, maxHeldBytes>>20),
			Hint: "close the ones it no longer needs (Close, DEALLOCATE, DISCARD ALL)"}
	}
	return nil
}

// treeBytesPerMessage is about what one message of a parse tree takes in
// memory (measured: 80 to 90 bytes). A tree can be 240 times its text (a
// select list of plain columns), so what a session holds is weighed by
// its trees as well as its texts.
const treeBytesPerMessage = 96

func (p *prepared) size() int { return len(p.sql) + p.treeSize }

func (p *portal) size() int { return len(p.sql) + p.treeSize }

func (c *session) parse(ctx context.Context, m *pgproto3.Parse) *wireError {
	if c.txn != nil && c.txn.failed {
		if tree, _ := parseText(m.Query); !exits(tree) {
			return errFailedTxn
		}
	}
	if _, dup := c.stmts[m.Name]; dup && m.Name != "" {
		return errorf(stateDuplicatePrepared, fmt.Sprintf("prepared statement %q already exists", m.Name))
	}
	if werr := heldLimit(c.stmts, m.Name, len(m.Query), (*prepared).size, "prepared statement"); werr != nil {
		return werr
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
	tree, err := parseText(m.Query)
	if err != nil {
		// It does not parse, or is past the limits: the statement path
		// records and rejects it, as it does over HTTP.
		_, werr := c.governed(ctx, m.Query, "SELECT")
		if werr == nil {
			code := stateSyntax
			if errors.Is(err, errPastLimits) {
				code = stateProgramLimit
			}
			werr = errorf(code, err.Error())
		}
		return werr
	}
	info := params(tree)
	n := max(info.count, len(m.ParameterOIDs))
	if n > 65535 {
		return errorf(stateProgramLimit, "a statement may have at most 65535 parameters")
	}
	oids, uses := make([]uint32, n), make([]int, n)
	for i := range oids {
		uses[i] = info.uses[i+1]
		if i < len(m.ParameterOIDs) && m.ParameterOIDs[i] != oidUnknownLit {
			oids[i] = m.ParameterOIDs[i]
		}
		if oids[i] == 0 {
			oids[i] = info.casts[i+1]
		}
	}
	st := &prepared{sql: m.Query, tree: tree, oids: oids, uses: uses, treeSize: info.messages * treeBytesPerMessage}
	if werr := heldLimit(c.stmts, m.Name, st.size(), (*prepared).size, "prepared statement"); werr != nil {
		return werr
	}
	c.stmts[m.Name] = st
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
	p := &portal{sql: st.sql, src: st.sql, tree: st.tree, formats: m.ResultFormatCodes, treeSize: st.treeSize}
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
		// Each use of $n is a copy of its value in the inlined text. The
		// statement path refuses a text past its limit, so one past it
		// is refused here, before it is built: a value used thousands of
		// times would otherwise make gigabytes of text from one Bind.
		inlined := 0
		for i, v := range vals {
			inlined += st.uses[i] * len(v.text)
		}
		if inlined > limits.MaxBytes {
			return &wireError{Code: stateProgramLimit, Message: fmt.Sprintf("the statement with its parameters inlined would be over %d bytes, the statement path's limit", limits.MaxBytes),
				Hint: "send smaller values, or name each parameter fewer times"}
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
	if werr := heldLimit(c.portals, m.DestinationPortal, p.size(), (*portal).size, "portal"); werr != nil {
		return werr
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
		// types their constants from context. The rows of a statement
		// answered here are known now; a governed statement's are
		// described when the portal is.
		res, werr := c.describeAnswer(st)
		if werr != nil {
			return werr
		}
		oids := st.oids
		if res == nil && st.tree != nil && classify(st.tree, st.sql) == kindCatalog {
			// A catalog statement: its real description, from the
			// shadow catalog; a parameter the text does not type takes
			// the type PostgreSQL infers there.
			var params []uint32
			if res, params, werr = c.describeCatalog(ctx, st); werr != nil {
				return werr
			}
			// The client binds by the types described: they are the
			// statement's from now on.
			for i := range st.oids {
				if st.oids[i] == 0 && i < len(params) {
					st.oids[i] = params[i]
				}
			}
		}
		c.send(&pgproto3.ParameterDescription{ParameterOIDs: oids})
		if res != nil && res.hasRows {
			c.send(c.rowDescription(res, nil))
		} else {
			c.send(&pgproto3.NoData{})
		}
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

// describeAnswer is the result of a prepared statement that reads a
// session value answered here (a SHOW, a SELECT of answers.go), computed
// without changing anything; nil for any other.
func (c *session) describeAnswer(st *prepared) (*result, *wireError) {
	if st.tree == nil || len(st.oids) > 0 {
		return nil, nil
	}
	switch classify(st.tree, st.sql) {
	case kindShow:
		return c.settings.show(st.tree.Stmts[0].Stmt.GetVariableShowStmt())
	case kindFront:
		res, werr := frontSelect(st.tree.Stmts[0].Stmt.GetSelectStmt(), c.env(st.sql))
		if werr == errNotAnswered {
			return nil, nil
		}
		return res, werr
	}
	return nil, nil
}

func (c *session) runPortal(ctx context.Context, p *portal) {
	if p.res != nil || p.err != nil {
		return
	}
	p.res, p.err = c.statement(ctx, p.sql, p.src, p.tree)
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
	n, suspended, werr := c.sendResult(p.res, p.formats, true, p.sent, int(m.MaxRows))
	if werr != nil {
		p.err = werr
		return werr
	}
	p.sent += n
	p.done = !suspended
	return nil
}
