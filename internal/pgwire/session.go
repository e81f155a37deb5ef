package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
)

// session is one authenticated connection.
type session struct {
	srv       *Server
	conn      net.Conn
	be        *pgproto3.Backend
	principal string
	target    string
	pid       uint32
	secret    []byte
	settings  *settings
	types     *pgtype.Map

	stmts   map[string]*prepared
	portals map[string]*portal
	// txn is the open transaction block (transactions.go), or nil.
	txn *txn
	// skip is set by an error in the extended protocol: messages are
	// discarded until Sync, as PostgreSQL does.
	skip bool

	mu       sync.Mutex
	inflight context.CancelFunc
	canceled bool
}

// prepared is a Parse message's statement.
type prepared struct {
	sql  string
	tree *pg.ParseResult // nil: not parsed here (quickVerb), it goes to the statement path
	oids []uint32        // effective type of each $n: declared, else a cast's, else 0
	uses []int           // how many times the text names each $n
	// described is the type a Describe told the client for each $n whose
	// oids entry is 0 (paramType): Bind reads a binary value of it with
	// that type, and still inlines it untyped, as it would have without
	// the Describe.
	described []uint32
	// treeSize estimates the tree's memory (treeBytesPerMessage).
	treeSize int
	// binds counts its Binds; the second builds splice (nil: it has
	// none), which renders the later ones.
	binds  int
	splice *splice
}

// portal is a Bind message's statement, with its result once it ran.
type portal struct {
	sql  string // the text with every parameter inlined
	src  string // the text the tree was parsed from
	tree *pg.ParseResult
	// verb, when set, is the command's verb of a statement bound by its
	// splice: it goes to the statement path, unparsed here.
	verb string
	// treeSize estimates the tree's memory: the prepared statement's.
	treeSize int
	formats  []int16
	res      *result
	err      *wireError
	sent     int // rows sent so far (Execute with a row limit)
	done     bool
}

// column is one result column.
type column struct {
	name string
	oid  uint32
}

// result is what one statement answered.
type result struct {
	cols     []column
	rows     [][]any
	hasRows  bool // a row description goes out (a read, or RETURNING)
	tag      string
	empty    bool
	statuses []*pgproto3.ParameterStatus
}

func (c *session) greet() error {
	c.types = pgtype.NewMap()
	c.be.SetMaxBodyLen(c.srv.cfg.MaxMessage)
	c.be.Send(&pgproto3.AuthenticationOk{})
	for _, ps := range c.settings.statuses() {
		c.be.Send(ps)
	}
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret})
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return c.be.Flush()
}

func (c *session) cancelInflight() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight != nil {
		c.canceled = true
		c.inflight()
	}
}

// run reads messages until the client goes away.
func (c *session) run(ctx context.Context) {
	defer c.rollbackOnClose(ctx)
	for {
		idle := time.Duration(0)
		if c.txn != nil && c.conn != nil {
			idle = c.idleLimit()
		}
		if idle > 0 {
			_ = c.conn.SetReadDeadline(time.Now().Add(idle))
		}
		msg, err := c.be.Receive()
		if idle > 0 {
			_ = c.conn.SetReadDeadline(time.Time{})
		}
		var nerr net.Error
		if err != nil && idle > 0 && errors.As(err, &nerr) && nerr.Timeout() {
			c.rollbackOnClose(ctx)
			c.send(fatal(stateIdleInTxn, "terminating connection due to idle-in-transaction timeout").response())
			_ = c.be.Flush()
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			var tooBig *pgproto3.ExceededMaxBodyLenErr
			if errors.As(err, &tooBig) {
				c.send(fatal(stateProgramLimit, fmt.Sprintf("a message of %d bytes is over this server's limit of %d bytes", tooBig.ActualBodyLen, c.srv.cfg.MaxMessage)).response())
			} else {
				c.send(fatal(stateProtocol, "invalid message: "+err.Error()).response())
			}
			_ = c.be.Flush()
			return
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return
		}
		// Past TransactionMax the target transaction ends now, whatever
		// the message: one the front answers itself keeps it no longer.
		c.expireTxn(ctx)
		if c.skip {
			if _, ok := msg.(*pgproto3.Sync); !ok {
				continue
			}
		}
		if !c.dispatch(ctx, msg) {
			return
		}
	}
}

func (c *session) send(m pgproto3.BackendMessage) { c.be.Send(m) }

// dispatch handles one message; false ends the connection.
func (c *session) dispatch(ctx context.Context, msg pgproto3.FrontendMessage) bool {
	switch m := msg.(type) {
	case *pgproto3.Query:
		c.simple(ctx, m.String)
		c.send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus()})
		return c.be.Flush() == nil
	case *pgproto3.Parse:
		c.extendedErr(c.parse(ctx, m))
	case *pgproto3.Bind:
		c.extendedErr(c.bind(m))
	case *pgproto3.Describe:
		c.extendedErr(c.describe(ctx, m))
	case *pgproto3.Execute:
		c.extendedErr(c.execute(ctx, m))
	case *pgproto3.Close:
		if m.ObjectType == 'S' {
			delete(c.stmts, m.Name)
		} else {
			delete(c.portals, m.Name)
		}
		c.send(&pgproto3.CloseComplete{})
	case *pgproto3.Sync:
		// Sync ends the implicit transaction, and with it every portal,
		// as in PostgreSQL outside a transaction block: no result outlives
		// its pipeline. Inside one, portals live until it ends.
		c.skip = false
		if c.txn == nil {
			clear(c.portals)
		}
		c.send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus()})
		return c.be.Flush() == nil
	case *pgproto3.Flush:
		return c.be.Flush() == nil
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		// Outside a COPY, which this front never starts: ignored, as
		// PostgreSQL ignores them.
	case *pgproto3.FunctionCall:
		c.sendError(errorf(stateFeature, "the fast-path function call protocol is not supported"))
		c.send(&pgproto3.ReadyForQuery{TxStatus: c.txStatus()})
		return c.be.Flush() == nil
	default:
		c.send(fatal(stateProtocol, fmt.Sprintf("unexpected message %T", msg)).response())
		_ = c.be.Flush()
		return false
	}
	return true
}

// extendedErr reports an error of the extended protocol and discards
// what follows until Sync. The error goes out at once, as PostgreSQL
// flushes every error: a client that sent Flush, not Sync, behind its
// message (postgres.js's Parse, Describe, Flush) waits for it before it
// sends Sync, and the Flush itself is discarded.
func (c *session) extendedErr(e *wireError) {
	if e != nil {
		c.sendError(e)
		c.skip = true
		_ = c.be.Flush()
	}
}

// simple runs a Query message: one text, any number of statements.
func (c *session) simple(ctx context.Context, sql string) {
	if verb, ok := quickVerb(sql); ok && (c.txn == nil || !c.txn.failed) {
		res, werr := c.governed(ctx, sql, verb)
		if werr != nil {
			c.sendError(werr)
			return
		}
		if _, _, werr := c.sendResult(res, nil, false, 0, -1); werr != nil {
			c.sendError(werr)
		}
		return
	}
	tree, perr := parseText(sql)
	if c.txn != nil && c.txn.failed && !exits(tree) {
		c.sendError(errFailedTxn)
		return
	}
	if perr != nil {
		tree = nil // the statement path rejects it, recorded
	} else {
		switch classify(tree, sql) {
		case kindEmpty:
			c.send(&pgproto3.EmptyQueryResponse{})
			return
		case kindBatch:
			c.simpleBatch(ctx, tree, sql)
			return
		}
	}
	res, werr := c.statement(ctx, sql, sql, tree)
	if werr != nil {
		c.sendError(werr)
		return
	}
	if _, _, werr := c.sendResult(res, nil, false, 0, -1); werr != nil {
		c.sendError(werr)
	}
}

// simpleBatch answers a Query of several statements, each answered here,
// as PostgreSQL runs one: a result for each, in order; at the first error
// the rest do not run and the settings the earlier ones changed are
// undone (their implicit transaction rolls back), and the ParameterStatus
// of what changed goes out only once all succeeded.
func (c *session) simpleBatch(ctx context.Context, tree *pg.ParseResult, sql string) {
	results, werr := c.batch(ctx, tree, sql)
	var statuses []*pgproto3.ParameterStatus
	for _, r := range results {
		statuses = append(statuses, r.statuses...)
		r.statuses = nil
		if _, _, err := c.sendResult(r, nil, false, 0, -1); err != nil {
			c.sendError(err)
			return
		}
	}
	if werr != nil {
		c.sendError(werr)
		return
	}
	for _, ps := range statuses {
		c.send(ps)
	}
}

// batch runs the statements of a kindBatch text: the results of those
// that ran, and the error that stopped the rest.
func (c *session) batch(ctx context.Context, tree *pg.ParseResult, sql string) ([]*result, *wireError) {
	before := maps.Clone(c.settings.vals)
	var out []*result
	for _, st := range tree.Stmts {
		one := &pg.ParseResult{Version: tree.Version, Stmts: []*pg.RawStmt{st}}
		var res *result
		var werr *wireError
		if d := st.Stmt.GetDiscardStmt(); d != nil && d.Target == pg.DiscardMode_DISCARD_ALL {
			werr = errorf(stateActiveTransaction, "DISCARD ALL cannot run inside a transaction block")
		} else {
			res, werr = c.answer(ctx, one, sql)
		}
		if werr != nil {
			c.settings.vals = before
			return out, werr
		}
		out = append(out, res)
	}
	return out, nil
}

// sendResult writes a result's rows (from row sent, at most limit when
// limit >= 0) and its completion.
func (c *session) sendResult(res *result, formats []int16, extended bool, from, limit int) (sent int, suspended bool, werr *wireError) {
	if res.empty {
		c.send(&pgproto3.EmptyQueryResponse{})
		return 0, false, nil
	}
	if !extended && res.hasRows {
		// The simple protocol: the description goes with the rows.
		c.send(c.rowDescription(res, nil))
	}
	fmts := c.resultFormats(res, formats)
	rows := res.rows[from:]
	if limit > 0 && len(rows) > limit {
		rows, suspended = rows[:limit], true
	}
	for _, r := range rows {
		dr := &pgproto3.DataRow{Values: make([][]byte, len(r))}
		for i, v := range r {
			s, ok := textValue(res.cols[i].oid, v)
			if !ok {
				continue
			}
			if fmts[i] == pgtype.BinaryFormatCode {
				b, ok := binaryValue(c.types, res.cols[i].oid, s)
				if !ok {
					// Never another value (NULL) in its place.
					c.srv.cfg.Logger.Error("pgwire: a value has no binary form", "oid", res.cols[i].oid)
					return 0, false, errorf(stateInternal, fmt.Sprintf("column %q has a value this server cannot send in binary format: ask for it in text format", res.cols[i].name))
				}
				dr.Values[i] = b
				continue
			}
			dr.Values[i] = []byte(s)
		}
		c.send(dr)
	}
	if suspended {
		c.send(&pgproto3.PortalSuspended{})
		return len(rows), true, nil
	}
	for _, ps := range res.statuses {
		c.send(ps)
	}
	c.send(&pgproto3.CommandComplete{CommandTag: []byte(res.tag)})
	return len(rows), false, nil
}

// resultFormats are the format of each column: as Bind asked (none: all
// text; one: for all), text where pgtype has no binary codec.
func (c *session) resultFormats(res *result, asked []int16) []int16 {
	out := make([]int16, len(res.cols))
	for i := range out {
		switch {
		case len(asked) == 1:
			out[i] = asked[0]
		case i < len(asked):
			out[i] = asked[i]
		}
		if out[i] == pgtype.BinaryFormatCode && !canBinary(c.types, res.cols[i].oid) {
			out[i] = pgtype.TextFormatCode
		}
	}
	return out
}

func (c *session) rowDescription(res *result, formats []int16) *pgproto3.RowDescription {
	fmts := c.resultFormats(res, formats)
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(res.cols))}
	for i, col := range res.cols {
		size := int16(-1)
		switch col.oid {
		case oidBool:
			size = 1
		case oidInt2:
			size = 2
		case oidInt4, oidFloat4, oidDate:
			size = 4
		case oidInt8, oidFloat8, oidTimestamp, oidTimestamptz, oidTime:
			size = 8
		case oidUUID:
			size = 16
		case oidName:
			size = 64
		}
		rd.Fields[i] = pgproto3.FieldDescription{Name: []byte(col.name), DataTypeOID: col.oid, DataTypeSize: size,
			TypeModifier: -1, Format: fmts[i]}
	}
	return rd
}

// statement runs one text: answered here, or on the statement path. src
// is the text the tree was parsed from (its locations point into it),
// which for a bound portal is not the inlined sql.
func (c *session) statement(ctx context.Context, sql, src string, tree *pg.ParseResult) (*result, *wireError) {
	if c.txn != nil && c.txn.failed && !exits(tree) {
		return nil, errFailedTxn
	}
	if tree == nil {
		verb, ok := quickVerb(sql)
		if !ok {
			verb = "SELECT"
		}
		return c.governed(ctx, sql, verb)
	}
	switch classify(tree, src) {
	case kindEmpty:
		return &result{empty: true}, nil
	case kindBatch:
		// Several statements in one Parse: the last one's result, with
		// what every one changed reported.
		results, werr := c.batch(ctx, tree, src)
		if werr != nil {
			return nil, werr
		}
		var statuses []*pgproto3.ParameterStatus
		for _, r := range results {
			statuses = append(statuses, r.statuses...)
		}
		last := results[len(results)-1]
		last.statuses = statuses
		return last, nil
	case kindCopy:
		return nil, errorf(stateFeature, "COPY is not supported: send INSERT or SELECT statements")
	case kindCatalog:
		return c.catalog(ctx, tree, sql)
	case kindWait:
		a, _ := waitCall(tree.Stmts[0].Stmt.GetSelectStmt())
		return c.wait(ctx, a)
	case kindGoverned:
		return c.governed(ctx, sql, verbOf(tree))
	}
	res, werr := c.answer(ctx, tree, src)
	if werr == errNotAnswered {
		return c.governed(ctx, sql, verbOf(tree))
	}
	return res, werr
}

// answer answers one statement the front answers from the session alone
// (a batchable kind): never from the target, never queued, not recorded.
func (c *session) answer(ctx context.Context, tree *pg.ParseResult, src string) (*result, *wireError) {
	n := tree.Stmts[0].Stmt
	switch classify(tree, src) {
	case kindTxn:
		return c.transaction(ctx, n.GetTransactionStmt())
	case kindSet:
		return c.set(tree)
	case kindShow:
		return c.settings.show(n.GetVariableShowStmt())
	case kindFront:
		return frontSelect(n.GetSelectStmt(), c.env(src))
	case kindDeallocate:
		d := n.GetDeallocateStmt()
		if d.Isall {
			clear(c.stmts)
			return &result{tag: "DEALLOCATE ALL"}, nil
		}
		if _, ok := c.stmts[d.Name]; !ok {
			return nil, errorf(stateUndefinedPrepared, fmt.Sprintf("prepared statement %q does not exist", d.Name))
		}
		delete(c.stmts, d.Name)
		return &result{tag: "DEALLOCATE"}, nil
	case kindDiscard:
		switch n.GetDiscardStmt().Target {
		case pg.DiscardMode_DISCARD_ALL:
			// DISCARD ALL is RESET ALL, DEALLOCATE ALL, CLOSE ALL,
			// UNLISTEN * and the rest, which hold nothing here.
			clear(c.stmts)
			clear(c.portals)
			res := c.settings.resetAll()
			res.tag = "DISCARD ALL"
			return res, nil
		case pg.DiscardMode_DISCARD_PLANS:
			return &result{tag: "DISCARD PLANS"}, nil
		case pg.DiscardMode_DISCARD_SEQUENCES:
			return &result{tag: "DISCARD SEQUENCES"}, nil
		}
		return &result{tag: "DISCARD TEMP"}, nil
	case kindClose:
		// The session's cursors are its portals.
		name := n.GetClosePortalStmt().Portalname
		if name == "" {
			clear(c.portals)
			return &result{tag: "CLOSE CURSOR ALL"}, nil
		}
		if _, ok := c.portals[name]; !ok {
			return nil, errorf(stateUndefinedPortal, fmt.Sprintf("cursor %q does not exist", name))
		}
		delete(c.portals, name)
		return &result{tag: "CLOSE CURSOR"}, nil
	case kindUnlisten:
		return &result{tag: "UNLISTEN"}, nil
	case kindResetDo:
		return &result{tag: "DO"}, nil
	}
	return nil, errNotAnswered
}

// env is what an answer at the front reads.
func (c *session) env(src string) *frontEnv {
	return &frontEnv{facts: c.settings.facts, now: c.srv.cfg.Clock(), sql: src}
}

// firstNormalOID is PostgreSQL's FirstNormalObjectId. A type OID from it
// on was assigned by the target (an enum, a domain, a composite, an
// extension's type) from a counter every object created in the target
// advances, inside the agent's bound or not: two targets that differ only
// outside the bound give the same type different OIDs. Such a column is
// described as text, which its values are rendered as (DESIGN.md
// invariant 10). Built-in OIDs are fixed by PostgreSQL itself.
const firstNormalOID = 16384

// columnType is the type OID a result column of a governed statement is
// described with, executed (governed) or described (describeGoverned)
// alike: its own below firstNormalOID, else text.
func columnType(oid uint32) uint32 {
	if oid >= firstNormalOID {
		return oidText
	}
	return oid
}

// describedParamType is the type OID a governed statement's parameter is
// described with: columnType's, and text for a type the front does not
// take as a parameter (paramTypes), whose value goes in as an untyped
// string.
func describedParamType(oid uint32) uint32 {
	oid = columnType(oid)
	if _, ok := paramTypes[oid]; !ok && oid != 0 {
		return oidText
	}
	return oid
}

// inflightCtx is the context of a call to the gateway: a statement in
// flight finishes when the server stops (Serve waits for it), as an HTTP
// request does; only a cancel request cancels it. done ends it and says
// whether a cancel request came.
func (c *session) inflightCtx(ctx context.Context) (_ context.Context, done func() (canceled bool)) {
	return c.cancelable(context.WithoutCancel(ctx))
}

// cancelable is a context a cancel request ends, under ctx (which the
// server's stop ends too); done says whether a cancel request came.
func (c *session) cancelable(ctx context.Context) (_ context.Context, done func() (canceled bool)) {
	sctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.inflight, c.canceled = cancel, false
	c.mu.Unlock()
	return sctx, func() bool {
		c.mu.Lock()
		c.inflight = nil
		canceled := c.canceled
		c.mu.Unlock()
		cancel()
		return canceled
	}
}

// governed takes a statement the path of POST /v1/statements.
func (c *session) governed(ctx context.Context, sql, verb string) (*result, *wireError) {
	sctx, done := c.inflightCtx(ctx)
	var resp *gateway.Response
	var err error
	if c.txn != nil {
		if c.txn.readOnly && verb != "SELECT" {
			done()
			return nil, errorf(stateReadOnlyTxn, fmt.Sprintf("cannot execute %s in a read-only transaction", verb))
		}
		if werr := c.txnTimedOut(ctx); werr != nil {
			done()
			return nil, werr
		}
		c.txn.touched = true
		resp, err = c.txn.tx.Submit(sctx, sql)
	} else {
		resp, err = c.srv.gw.Submit(sctx, c.principal, c.target, sql)
	}
	if canceled := done(); err != nil {
		return nil, c.submitError(err, canceled)
	}
	if resp.Outcome == gateway.OutcomeReferred {
		return nil, referral(resp)
	}
	// Columns and values go out in the target's order, as it named them:
	// two columns may share a name, as they do from PostgreSQL itself.
	res := &result{cols: make([]column, len(resp.Columns))}
	for i, col := range resp.Columns {
		res.cols[i] = column{name: col.Name, oid: oidText}
		if col.Type != 0 {
			res.cols[i].oid = columnType(col.Type)
		}
	}
	isSelect := verb == "SELECT"
	res.hasRows = len(res.cols) > 0 || isSelect
	for _, row := range resp.Rows {
		if len(row) != len(res.cols) {
			return nil, errorf(stateInternal, "the answer's rows do not match its columns")
		}
		res.rows = append(res.rows, row)
	}
	n := resp.RowsAffected
	if isSelect {
		n = int64(len(res.rows))
	}
	res.tag = commandTag(verb, n)
	return res, nil
}

// referral is a referred statement as an error a program can handle.
func referral(resp *gateway.Response) *wireError {
	reasons := strings.Join(resp.Reasons, "; ")
	return &wireError{Code: StateReferred, Where: resp.RequestID,
		Message: "the statement was referred to a human, who decides whether it runs (request " + resp.RequestID + ")",
		Detail:  "request " + resp.RequestID + ": " + reasons,
		Hint:    "wait for the decision with SELECT harbormaster_wait('" + resp.RequestID + "'), or GET /v1/requests/" + resp.RequestID + "?wait=30s"}
}

// submitError answers a statement's error: its class (gateway.Classify)
// as a SQLSTATE. canceled: a cancel request ended the call.
func (c *session) submitError(err error, canceled bool) *wireError {
	f := gateway.Classify(err)
	switch f.Class {
	case gateway.FailureTooManyTransactions:
		return &wireError{Code: stateTooManyTxns, Message: "too many transactions are open on this target at once: this statement did not run",
			Hint: "try again, or send it outside a transaction"}
	case gateway.FailureNoTransactions:
		return &wireError{Code: stateFeature, Message: "transactions are not supported on this target: its Pilot runs in another process, and each statement runs in a transaction of its own",
			Hint: "send each statement on its own, without BEGIN"}
	case gateway.FailureUnparseable, gateway.FailureOverLimit, gateway.FailureUnapprovable:
		code := stateSyntax
		switch f.Class {
		case gateway.FailureUnapprovable:
			// Several statements, DDL, a locking clause...: no human
			// could approve it, so it was recorded and not queued.
			code = stateFeature
		case gateway.FailureOverLimit:
			code = stateProgramLimit
		}
		return &wireError{Code: code, Message: f.Message, Where: f.RequestID, Detail: "request " + f.RequestID + ": " + f.Code}
	case gateway.FailureFlooded:
		return &wireError{Code: StateRefused, Message: f.Message, Where: f.RequestID,
			Detail: "request " + f.RequestID + ": recorded, not queued; nothing ran", Hint: "wait before sending statements that need a human"}
	case gateway.FailureLogUnavailable:
		c.srv.cfg.Logger.Error("pgwire: logbook unavailable", "err", err)
		return errorf(StateNotRecorded, f.Message)
	}
	switch {
	case canceled:
		return errorf(stateCanceled, "canceling statement due to user request")
	case f.Class == gateway.FailureUnknownTarget:
		return errorf(stateNoDatabase, "the target is no longer configured")
	}
	c.srv.cfg.Logger.Error("pgwire: statement failed", "principal", c.principal, "target", c.target, "err", err)
	return errorf(stateInternal, "the statement could not be decided or executed; nothing ran unless its request shows otherwise")
}

// waitColumns are the columns of harbormaster_wait's row.
var waitColumns = []column{{"request_id", oidText}, {"status", oidText},
	{"outcome", oidText}, {"rows_affected", oidInt8}, {"reasons", oidText}}

// wait answers SELECT harbormaster_wait('req_...' [, seconds]): the
// request's state once a human decided it, or when the wait is over.
func (c *session) wait(ctx context.Context, a waitArgs) (*result, *wireError) {
	if !strings.HasPrefix(a.id, "req_") {
		return nil, errorf(stateInvalidParameter, "harbormaster_wait takes a request id ('req_...') and, optionally, the seconds to wait")
	}
	d := c.srv.cfg.DefaultWait
	if a.seconds > 0 {
		d = time.Duration(a.seconds * float64(time.Second))
	}
	d = min(d, c.srv.cfg.MaxWait)
	wctx, done := c.cancelable(ctx)
	v, err := c.srv.gw.WaitRequest(wctx, a.id, c.principal, d)
	if done() {
		return nil, errorf(stateCanceled, "canceling statement due to user request")
	}
	if errors.Is(err, gateway.ErrNotFound) {
		return nil, errorf(stateUndefinedObject, "no request "+a.id+" for this agent")
	}
	if err != nil {
		c.srv.cfg.Logger.Error("pgwire: request lookup", "err", err)
		return nil, errorf(stateInternal, "the request could not be read")
	}
	res := &result{hasRows: true, tag: "SELECT 1", cols: waitColumns}
	res.rows = [][]any{{v.ID, string(v.Status), v.Outcome, v.RowsAffected, strings.Join(v.Reasons, "; ")}}
	return res, nil
}
