package pgwire

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
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
	st, werr := newPrepared(m.Query, tree, m.ParameterOIDs)
	if werr != nil {
		return werr
	}
	if werr := heldLimit(c.stmts, m.Name, st.size(), (*prepared).size, "prepared statement"); werr != nil {
		return werr
	}
	c.stmts[m.Name] = st
	c.send(&pgproto3.ParseComplete{})
	return nil
}

// newPrepared is the prepared statement sql, parsed as tree, with the
// parameter types Parse declared.
func newPrepared(sql string, tree *pg.ParseResult, declared []uint32) (*prepared, *wireError) {
	info := params(tree)
	n := max(info.count, len(declared))
	if n > 65535 {
		return nil, errorf(stateProgramLimit, "a statement may have at most 65535 parameters")
	}
	oids, uses := make([]uint32, n), make([]int, n)
	for i := range oids {
		uses[i] = info.uses[i+1]
		if i < len(declared) && declared[i] != oidUnknownLit {
			oids[i] = declared[i]
		}
		if oids[i] == 0 {
			oids[i] = info.casts[i+1]
		}
	}
	return &prepared{sql: sql, tree: tree, oids: oids, uses: uses, treeSize: info.messages * treeBytesPerMessage}, nil
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
			read := st.oids[i]
			if read == 0 && i < len(st.described) {
				read = st.described[i]
			}
			s, werr := paramText(c.types, i, read, format, raw)
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
		if st.binds++; st.binds == 2 {
			st.splice = newSplice(st)
		}
		if text, ok := st.spliced(vals); ok {
			p.sql, p.tree, p.verb = text, nil, st.splice.verb
		} else {
			tree, err := inlinedTree(st, vals)
			if err != nil {
				return errorf(stateProtocol, err.Error())
			}
			text, err := pg.Deparse(tree)
			if err != nil {
				return errorf(stateSyntax, "the statement with its parameters cannot be rendered: "+err.Error())
			}
			p.sql, p.tree = text, tree
		}
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
		return c.describeStatement(ctx, st)
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

// describeStatement answers a Describe of a prepared statement: its
// parameters' types and its row description (or NoData), as Execute
// will send them. A statement the front answers is described here; a
// governed one by the gateway, without running it (describeGoverned).
func (c *session) describeStatement(ctx context.Context, st *prepared) *wireError {
	tree, err := nullBound(st)
	if err != nil {
		return errorf(stateProtocol, err.Error())
	}
	k := kindGoverned
	if tree != nil {
		k = classify(tree, st.sql)
	}
	var res *result
	switch k {
	case kindGoverned:
		return c.describeGoverned(ctx, st, tree)
	case kindShow, kindFront:
		// Answered here once bound, from the session alone: its result
		// with every value NULL has the columns it will have.
		var werr *wireError
		res, werr = c.answer(ctx, tree, st.sql)
		if werr == errNotAnswered {
			return c.describeGoverned(ctx, st, tree)
		}
		if werr != nil {
			return werr
		}
	case kindCatalog:
		if c.srv.cfg.Catalog == nil || st.tree == nil {
			// No shadow catalog: refused now, as Execute would.
			_, werr := c.statement(ctx, st.sql, st.sql, tree)
			return werr
		}
		// Its real description, from the shadow catalog; a parameter the
		// text does not type takes the type PostgreSQL infers there, and
		// the client binds by it from now on.
		var params []uint32
		var werr *wireError
		if res, params, werr = c.describeCatalog(ctx, st); werr != nil {
			return werr
		}
		for i := range st.oids {
			if st.oids[i] == 0 && i < len(params) {
				st.oids[i] = params[i]
			}
		}
	case kindCopy:
		// Refused whatever its values: refused now, as Execute would.
		_, werr := c.statement(ctx, st.sql, st.sql, tree)
		return werr
	case kindWait:
		res = &result{hasRows: true, cols: waitColumns}
	}
	// Parameters without a declared or cast type are reported as
	// unspecified (0): the client sends them as text.
	c.send(&pgproto3.ParameterDescription{ParameterOIDs: st.oids})
	if res != nil && res.hasRows {
		c.send(c.rowDescription(res, nil))
	} else {
		c.send(&pgproto3.NoData{})
	}
	return nil
}

// describeGoverned describes a statement of the statement path: the
// gateway's Describe, which checks it (with every value NULL) as a
// submission would and has the target describe it only when it would run
// at once, on the compiled path. Anything else is an error saying why,
// never NoData for a statement that returns rows. Nothing is recorded or
// queued.
func (c *session) describeGoverned(ctx context.Context, st *prepared, tree *pg.ParseResult) *wireError {
	if c.txn != nil && c.txn.failed {
		return errFailedTxn
	}
	text, err := describeText(st)
	if err != nil {
		return errorf(stateSyntax, "the statement cannot be rendered: "+err.Error())
	}
	verb, ok := quickVerb(st.sql)
	if tree != nil || !ok {
		verb = verbOf(tree)
	}
	dctx, done := c.inflightCtx(ctx)
	d, err := c.srv.gw.Describe(dctx, c.principal, c.target, text)
	if canceled := done(); err != nil {
		var nd *gateway.NotDescribedError
		rejected := errors.As(err, &nd) && nd.Code == gateway.NotDescribedRejected
		if !canceled && !rejected && !errors.Is(err, gateway.ErrUnknownTarget) && noRows(tree, st.sql) {
			// A write without RETURNING returns no rows whatever its
			// bound (or its Pilot's answer): NoData is its description,
			// and its Execute is decided (referred, recorded) as any
			// statement's.
			c.send(&pgproto3.ParameterDescription{ParameterOIDs: st.oids})
			c.send(&pgproto3.NoData{})
			return nil
		}
		return c.describeError(err, canceled)
	}
	params := make([]uint32, len(st.oids))
	described := make([]uint32, len(st.oids))
	for i, oid := range st.oids {
		params[i] = oid
		if oid == 0 && i < len(d.ParamTypes) {
			params[i] = describedParamType(d.ParamTypes[i])
			described[i] = params[i]
		}
	}
	st.described = described
	res := &result{cols: make([]column, len(d.Columns))}
	for i, name := range d.Columns {
		res.cols[i] = column{name: name, oid: columnType(d.ColumnTypes[i])}
	}
	c.send(&pgproto3.ParameterDescription{ParameterOIDs: params})
	if len(res.cols) > 0 || verb == "SELECT" {
		c.send(c.rowDescription(res, nil))
	} else {
		c.send(&pgproto3.NoData{})
	}
	return nil
}

// noRows reports a statement that returns no rows: one INSERT, UPDATE,
// DELETE or MERGE without RETURNING. tree is its parse, or nil for a text
// the front did not parse.
func noRows(tree *pg.ParseResult, sql string) bool {
	if tree == nil {
		t, err := parseText(sql)
		if err != nil {
			return false
		}
		tree = t
	}
	if len(tree.Stmts) != 1 {
		return false
	}
	switch n := tree.Stmts[0].Stmt.GetNode().(type) {
	case *pg.Node_InsertStmt:
		return len(n.InsertStmt.ReturningList) == 0
	case *pg.Node_UpdateStmt:
		return len(n.UpdateStmt.ReturningList) == 0
	case *pg.Node_DeleteStmt:
		return len(n.DeleteStmt.ReturningList) == 0
	case *pg.Node_MergeStmt:
		return len(n.MergeStmt.ReturningList) == 0
	}
	return false
}

// describeError is a statement the gateway did not describe, as an error
// that says why and what to do.
func (c *session) describeError(err error, canceled bool) *wireError {
	var nd *gateway.NotDescribedError
	switch {
	case errors.As(err, &nd):
		reasons := strings.Join(nd.Reasons, "; ")
		switch nd.Code {
		case gateway.NotDescribedRejected:
			code := stateFeature
			switch nd.Check {
			case sqlcheck.CodeInputTooLarge, sqlcheck.CodeInputTooDeep:
				code = stateProgramLimit
			case sqlcheck.CodeParseError, sqlcheck.CodeEmptyStatement:
				code = stateSyntax
			}
			return &wireError{Code: code, Message: "the statement cannot be described, and would not run: " + reasons}
		case gateway.NotDescribedReferred:
			// Without the check's reasons (gateway.NotDescribedError):
			// sending the statement gives them.
			return &wireError{Code: StateNotDescribed,
				Message: "the statement cannot be described: no delegation in force lets it run, so sent with its values it would be referred to a human, and a referred statement has no description",
				Hint:    "send it with its values inlined, over the simple query protocol (or a driver mode that does not describe statements), to have it decided and queued for a human with its reasons; only a statement inside your delegations' bound is described"}
		}
		return &wireError{Code: StateNotDescribed,
			Message: "the statement cannot be described: its Pilot refused to describe it",
			Hint:    "send it with its values inlined, over the simple query protocol, to have it decided: it runs or is referred to a human"}
	case canceled:
		return errorf(stateCanceled, "canceling statement due to user request")
	case errors.Is(err, gateway.ErrUnknownTarget):
		return errorf(stateNoDatabase, "the target is no longer configured")
	case errors.Is(err, pilot.ErrUnreachable):
		c.srv.cfg.Logger.Error("pgwire: describe: target unreachable", "target", c.target, "err", err)
		return &wireError{Code: StateNotDescribed, Message: "the statement cannot be described: the target could not be reached",
			Hint: "try again later; nothing ran"}
	}
	c.srv.cfg.Logger.Error("pgwire: describe failed", "principal", c.principal, "target", c.target, "err", err)
	return &wireError{Code: StateNotDescribed, Message: "the statement could not be described; nothing ran",
		Hint: "try again later, or send it with its values inlined over the simple query protocol"}
}
func (c *session) runPortal(ctx context.Context, p *portal) {
	if p.res != nil || p.err != nil {
		return
	}
	if p.verb != "" {
		// Bound by its splice: a statement no value can make one the
		// front answers (newSplice).
		if c.txn != nil && c.txn.failed {
			p.err = errFailedTxn
			return
		}
		p.res, p.err = c.governed(ctx, p.sql, p.verb)
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
