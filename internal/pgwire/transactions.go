package pgwire

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// Transactions (BEGIN ... COMMIT), with PostgreSQL's semantics as a client
// sees them: ReadyForQuery says idle, in a transaction or in a failed one;
// an error inside a transaction fails it, and every statement but COMMIT,
// ROLLBACK and ROLLBACK TO SAVEPOINT is then refused with 25P02; COMMIT of
// a failed transaction rolls back. The statements that go to the
// statement path run in one target transaction the Pilot holds
// (gateway.Tx), opened by the first of them: a transaction of session
// queries alone never reaches the target. Settings changed inside are
// undone by ROLLBACK, and SET LOCAL ones at either end.

const (
	stateInFailedTxn    = "25P02"
	stateReadOnlyTxn    = "25006"
	stateNoActiveTxn    = "25P01"
	stateIdleInTxn      = "25P03"
	stateTxnTimeout     = "25P04"
	stateTooManyTxns    = "53300"
	stateInvalidTxnInit = "0B000"
)

// txn is a session's transaction block.
type txn struct {
	tx       txPath
	failed   bool
	readOnly bool
	started  time.Time
	// before are the settings at BEGIN; local, those SET LOCAL changed.
	before map[string]string
	local  map[string]bool
	// touched: a statement has gone to the target (SET TRANSACTION must
	// come before).
	touched bool
	// expired: open past TransactionMax, it was rolled back.
	expired bool
}

// txStatus is ReadyForQuery's transaction status.
func (c *session) txStatus() byte {
	switch {
	case c.txn == nil:
		return 'I'
	case c.txn.failed:
		return 'E'
	}
	return 'T'
}

// failTxn marks the transaction failed after an error.
func (c *session) failTxn() {
	if c.txn != nil {
		c.txn.failed = true
	}
}

// sendError sends an error response; inside a transaction it fails it.
func (c *session) sendError(e *wireError) {
	c.send(e.response())
	c.failTxn()
}

// exits reports a statement that ends or repairs a failed transaction.
func exits(tree *pg.ParseResult) bool {
	if tree == nil || len(tree.Stmts) != 1 {
		return false
	}
	t := tree.Stmts[0].Stmt.GetTransactionStmt()
	if t == nil {
		return false
	}
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT, pg.TransactionStmtKind_TRANS_STMT_ROLLBACK,
		pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO, pg.TransactionStmtKind_TRANS_STMT_PREPARE:
		return true
	}
	return false
}

// errFailedTxn is every statement in a failed transaction but an exit.
var errFailedTxn = errorf(stateInFailedTxn, "current transaction is aborted, commands ignored until end of transaction block")

// transaction answers BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE and
// ROLLBACK TO.
func (c *session) transaction(ctx context.Context, t *pg.TransactionStmt) (*result, *wireError) {
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_BEGIN, pg.TransactionStmtKind_TRANS_STMT_START:
		if c.txn != nil {
			// PostgreSQL warns and carries on.
			c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: stateActiveTransaction,
				Message: "there is already a transaction in progress"})
			return &result{tag: "BEGIN"}, nil
		}
		opts, readOnly, werr := txOptions(t.Options)
		if werr != nil {
			return nil, werr
		}
		tx, err := c.srv.gw.BeginTx(c.principal, c.target, opts)
		if err != nil {
			return nil, c.submitError(err, false)
		}
		c.txn = &txn{tx: tx, readOnly: readOnly, started: c.srv.cfg.Clock(), before: maps.Clone(c.settings.vals), local: map[string]bool{}}
		c.settings.vals["transaction_isolation"] = isolationText(opts.Isolation)
		c.settings.vals["transaction_read_only"] = onOff(readOnly)
		return &result{tag: "BEGIN"}, nil
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT:
		if c.txn == nil {
			c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: stateNoActiveTxn,
				Message: "there is no transaction in progress"})
			return &result{tag: "COMMIT"}, nil
		}
		if c.txn.failed || c.expireTxn(ctx) {
			// Past TransactionMax it was rolled back: COMMIT says so.
			return c.endTxn(ctx, false)
		}
		return c.endTxn(ctx, true)
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		if c.txn == nil {
			c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: stateNoActiveTxn,
				Message: "there is no transaction in progress"})
			return &result{tag: "ROLLBACK"}, nil
		}
		return c.endTxn(ctx, false)
	case pg.TransactionStmtKind_TRANS_STMT_SAVEPOINT, pg.TransactionStmtKind_TRANS_STMT_RELEASE,
		pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		return c.savepoint(ctx, t)
	}
	return nil, errorf(stateFeature, "two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED) is not supported")
}

// savepoint runs SAVEPOINT, RELEASE and ROLLBACK TO in the target
// transaction.
func (c *session) savepoint(ctx context.Context, t *pg.TransactionStmt) (*result, *wireError) {
	if c.txn == nil {
		verb := map[pg.TransactionStmtKind]string{pg.TransactionStmtKind_TRANS_STMT_SAVEPOINT: "SAVEPOINT",
			pg.TransactionStmtKind_TRANS_STMT_RELEASE: "RELEASE SAVEPOINT", pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO: "ROLLBACK TO SAVEPOINT"}[t.Kind]
		return nil, errorf(stateNoActiveTxn, verb+" can only be used in transaction blocks")
	}
	if werr := c.txnTimedOut(ctx); werr != nil {
		return nil, werr
	}
	name := t.SavepointName
	var err error
	tag := "SAVEPOINT"
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		c.txn.touched = true
		err = c.txn.tx.Savepoint(ctx, name)
	case pg.TransactionStmtKind_TRANS_STMT_RELEASE:
		tag = "RELEASE"
		err = c.txn.tx.Release(ctx, name)
	default:
		tag = "ROLLBACK"
		err = c.txn.tx.RollbackTo(ctx, name)
		if err == nil {
			c.txn.failed = false
		}
	}
	if err != nil {
		var spErr *pilot.SavepointError
		if errors.As(err, &spErr) {
			return nil, errorf(spErr.Code, spErr.Message)
		}
		if errors.Is(err, pilot.ErrSessionBroken) || errors.Is(err, pilot.ErrSessionAborted) {
			return nil, errFailedTxn
		}
		return nil, c.submitError(err, false)
	}
	return &result{tag: tag}, nil
}

// endTxn commits (commit) or rolls back the transaction, and undoes the
// settings a rollback (or SET LOCAL) undoes.
func (c *session) endTxn(ctx context.Context, commit bool) (*result, *wireError) {
	t := c.txn
	c.txn = nil
	// The portals end with the transaction at the next Sync, not here: a
	// COMMIT sent as a portal (psycopg 3, the extended protocol) is
	// described and executed after it has run.
	restore := maps.Keys(t.local)
	if !commit {
		restore = maps.Keys(t.before)
	}
	res := &result{tag: "ROLLBACK"}
	for k := range restore {
		if v, ok := t.before[k]; ok && c.settings.vals[k] != v {
			c.settings.vals[k] = v
			if c.settings.reported[k] {
				res.statuses = append(res.statuses, &pgproto3.ParameterStatus{Name: statusName(k), Value: v})
			}
		}
	}
	c.settings.vals["transaction_isolation"] = c.settings.defaults["transaction_isolation"]
	c.settings.vals["transaction_read_only"] = c.settings.defaults["transaction_read_only"]
	if !commit {
		if err := t.tx.Rollback(ctx); err != nil {
			c.srv.cfg.Logger.Error("pgwire: rollback entries", "err", err)
		}
		return res, nil
	}
	err := t.tx.Commit(ctx)
	switch {
	case err == nil:
		res.tag = "COMMIT"
		return res, nil
	case errors.Is(err, pilot.ErrCommitUnknown):
		return nil, &wireError{Code: "08007", Message: "the outcome of COMMIT is unknown: the connection to the target failed as it committed",
			Hint: "the requests of its statements say whether it committed once reconciliation has read their receipts"}
	}
	c.srv.cfg.Logger.Info("pgwire: commit refused", "principal", c.principal, "err", err)
	// The target's own text can quote rows (a deferred constraint's
	// message): the agent gets the class.
	return nil, errorf("40000", "the transaction could not commit (the target refused its COMMIT): it rolled back, and nothing of it remains")
}

// rollbackOnClose rolls back a transaction the client left open.
func (c *session) rollbackOnClose(ctx context.Context) {
	if c.txn != nil {
		_, _ = c.endTxn(context.WithoutCancel(ctx), false)
	}
}

// txnTimedOut ends a transaction open past the front's limit.
func (c *session) txnTimedOut(ctx context.Context) *wireError {
	if !c.expireTxn(ctx) {
		return nil
	}
	c.txn.failed = true
	return errorf(stateTxnTimeout, fmt.Sprintf("the transaction was open longer than %s and was rolled back: end it with ROLLBACK", c.srv.cfg.TransactionMax))
}

// expireTxn rolls back a transaction open past the front's limit (its
// target transaction, row locks and Pilot connection with it) and
// reports whether it is past the limit. Its next statement is told.
func (c *session) expireTxn(ctx context.Context) bool {
	max := c.srv.cfg.TransactionMax
	if c.txn == nil || max <= 0 || c.srv.cfg.Clock().Sub(c.txn.started) <= max {
		return false
	}
	if !c.txn.expired {
		c.txn.expired = true
		if err := c.txn.tx.Rollback(ctx); err != nil {
			c.srv.cfg.Logger.Error("pgwire: rollback entries", "err", err)
		}
	}
	return true
}

// idleLimit is how long the session may wait for a message inside a
// transaction: the session's idle_in_transaction_session_timeout when
// set (it only tightens the operator's), else the front's.
func (c *session) idleLimit() time.Duration {
	d := c.srv.cfg.TransactionIdle
	if ms, werr := parseMillis("idle_in_transaction_session_timeout", c.settings.vals["idle_in_transaction_session_timeout"]); werr == nil && ms > 0 {
		if s := time.Duration(ms) * time.Millisecond; d <= 0 || s < d {
			d = s
		}
	}
	return d
}

// setTransaction is SET TRANSACTION (and SET SESSION CHARACTERISTICS AS
// TRANSACTION, which keeps the defaults only).
func (c *session) setTransaction(v *pg.VariableSetStmt) (*result, *wireError) {
	opts, readOnly, werr := txOptions(v.Args)
	if werr != nil {
		return nil, werr
	}
	if strings.EqualFold(v.Name, "session characteristics") {
		if opts.Isolation != "" && opts.Isolation != "read committed" || readOnly {
			return nil, errorf(stateFeature, "the session's default transaction characteristics stay READ COMMITTED, READ WRITE: set them per transaction (BEGIN ISOLATION LEVEL ..., BEGIN READ ONLY)")
		}
		return &result{tag: "SET"}, nil
	}
	if c.txn == nil {
		c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: stateNoActiveTxn,
			Message: "SET TRANSACTION can only be used in transaction blocks"})
		return &result{tag: "SET"}, nil
	}
	if opts.Isolation != "" {
		if c.txn.touched || !c.txn.tx.SetIsolation(opts.Isolation) {
			return nil, errorf(stateActiveTransaction, "SET TRANSACTION ISOLATION LEVEL must be called before any query")
		}
		c.settings.vals["transaction_isolation"] = isolationText(opts.Isolation)
	}
	if readOnly {
		c.txn.readOnly = true
		c.settings.vals["transaction_read_only"] = "on"
	} else if hasOption(v.Args, "transaction_read_only") && c.txn.readOnly {
		if c.txn.touched {
			return nil, errorf(stateActiveTransaction, "transaction read-write mode must be set before any query")
		}
		c.txn.readOnly = false
		c.settings.vals["transaction_read_only"] = "off"
	}
	return &result{tag: "SET"}, nil
}

// txOptions reads BEGIN's (or SET TRANSACTION's) options.
func txOptions(opts []*pg.Node) (pilot.TxOptions, bool, *wireError) {
	var o pilot.TxOptions
	readOnly := false
	for _, n := range opts {
		d := n.GetDefElem()
		if d == nil {
			continue
		}
		switch d.Defname {
		case "transaction_isolation":
			level := strings.ToLower(constString(d.Arg))
			switch level {
			case "read uncommitted":
				// As in PostgreSQL, read uncommitted is read committed.
				level = "read committed"
			case "read committed", "repeatable read", "serializable":
			default:
				return o, false, errorf(stateInvalidParameter, fmt.Sprintf("unknown isolation level %q", level))
			}
			o.Isolation = level
		case "transaction_read_only":
			readOnly = boolArg(d.Arg)
		case "transaction_deferrable":
			// Only meaningful for a serializable read-only transaction;
			// accepted as PostgreSQL accepts it.
		default:
			return o, false, errorf(stateSyntax, "unknown transaction option "+d.Defname)
		}
	}
	return o, readOnly, nil
}

func hasOption(opts []*pg.Node, name string) bool {
	for _, n := range opts {
		if d := n.GetDefElem(); d != nil && d.Defname == name {
			return true
		}
	}
	return false
}

func boolArg(n *pg.Node) bool {
	if c := n.GetAConst(); c != nil {
		if c.GetIval() != nil {
			return c.GetIval().Ival != 0
		}
		if c.GetBoolval() != nil {
			return c.GetBoolval().Boolval
		}
	}
	return strings.EqualFold(constString(n), "on") || strings.EqualFold(constString(n), "true")
}

func isolationText(level string) string {
	if level == "" {
		return isolationLevel
	}
	return level
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// set is SET and RESET: SET TRANSACTION here, SET LOCAL remembered so the
// transaction's end undoes it, the rest in the session's settings.
func (c *session) set(tree *pg.ParseResult) (*result, *wireError) {
	v := tree.Stmts[0].Stmt.GetVariableSetStmt()
	if v.Kind == pg.VariableSetKind_VAR_SET_MULTI {
		if strings.EqualFold(v.Name, "transaction snapshot") {
			return nil, errorf(stateFeature, "SET TRANSACTION SNAPSHOT is not supported")
		}
		return c.setTransaction(v)
	}
	if v.IsLocal {
		if c.txn == nil {
			// PostgreSQL warns, and the setting does not change.
			c.send(&pgproto3.NoticeResponse{Severity: "WARNING", SeverityUnlocalized: "WARNING", Code: stateNoActiveTxn,
				Message: "SET LOCAL can only be used in transaction blocks"})
			return &result{tag: "SET"}, nil
		}
		c.txn.local[strings.ToLower(v.Name)] = true
	}
	return c.settings.set(tree)
}
