package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// Client transactions (the wire front's BEGIN ... COMMIT). Every statement
// inside one takes the statement path as one sent alone: parsed, checked,
// routed, its decision durable before it runs, its marque verified by the
// Pilot, guarded, given a receipt. What differs is where it runs: in one
// target transaction the Pilot holds for the client (pilot.Session), so
// the statements commit or roll back together. Their outcomes are
// recorded when the transaction ends (executed at COMMIT, rolled back at
// ROLLBACK), each naming the transaction; until then each request stays
// running with the transaction's id, which a reconciler leaves alone while
// that transaction is in progress, and after a crash settles from the
// receipts, which committed with the statements or not at all.
//
// A statement the surveyed path would take is referred: the panel judges
// a statement against a rehearsal in a snapshot of its own. A referred
// statement runs nothing; the client's transaction is aborted as by any
// error, and a human's later approval runs the statement on its own.

// Reasons added inside a transaction.
const (
	ReasonSurveyedInTx = "only a rule with a residual clause covers this statement, which the Surveyor judges only when it is sent on its own, not inside a transaction, so a human decides"
	ReasonReferredInTx = "it was sent inside a transaction, which a referral aborts: if a human approves it, it runs on its own, outside that transaction"
)

// ErrTooManyTransactions: the target has as many client transactions open
// as Config.MaxTransactions allows.
var ErrTooManyTransactions = errors.New("too many client transactions are open on this target")

// ErrNoTransactions: the target's Pilot runs in another process, and
// holds no transaction across statements.
var ErrNoTransactions = errors.New("this target's Pilot runs in another process and does not hold transactions across statements")

// Tx is one client transaction, for one principal on one target. It is
// used by one client session at a time.
type Tx struct {
	g         *Gateway
	principal string
	target    string
	opts      pilot.TxOptions

	mu   sync.Mutex
	sess pilot.TxSession // nil until the first statement that goes to the gateway
	// ran are the statements that executed in it, in order, each marked
	// in flight until their outcome is recorded.
	ran []ranInTx
	// marks are the client's savepoints: its name and len(ran) then.
	marks []txMark
	ended bool
}

type ranInTx struct {
	req *ledger.Request
	res *pilot.Result
}

type txMark struct {
	name string
	n    int
}

// BeginTx starts a client transaction. Nothing reaches the target until
// a statement in it does.
func (g *Gateway) BeginTx(principal, target string, o pilot.TxOptions) (*Tx, error) {
	if _, ok := g.targets[target]; !ok {
		return nil, fmt.Errorf("gateway: %w: %q", ErrUnknownTarget, target)
	}
	return &Tx{g: g, principal: principal, target: target, opts: o}, nil
}

// SetIsolation changes the isolation level of a transaction that has not
// reached the target yet (SET TRANSACTION); false once it has.
func (tx *Tx) SetIsolation(level string) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.sess != nil {
		return false
	}
	tx.opts.Isolation = level
	return true
}

// open opens the target transaction on the first statement that needs it.
func (tx *Tx) open(ctx context.Context) (pilot.TxSession, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.ended {
		return nil, errors.New("gateway: the transaction has ended")
	}
	if tx.sess != nil {
		return tx.sess, nil
	}
	p := tx.g.targets[tx.target]
	ps, ok := p.(pilot.Sessions)
	if !ok {
		return nil, ErrNoTransactions
	}
	if !tx.g.takeTxSlot(tx.target) {
		return nil, ErrTooManyTransactions
	}
	sess, err := ps.Begin(ctx, tx.opts)
	if err != nil {
		tx.g.giveTxSlot(tx.target)
		return nil, err
	}
	tx.sess = sess
	return sess, nil
}

// takeTxSlot counts one more open transaction on target, if one may open.
func (g *Gateway) takeTxSlot(target string) bool {
	g.txMu.Lock()
	defer g.txMu.Unlock()
	if g.txOpen == nil {
		g.txOpen = map[string]int{}
	}
	if g.txOpen[target] >= g.cfg.MaxTransactions {
		return false
	}
	g.txOpen[target]++
	return true
}

func (g *Gateway) giveTxSlot(target string) {
	g.txMu.Lock()
	defer g.txMu.Unlock()
	g.txOpen[target]--
}

// Submit runs one statement inside the transaction (Gateway.Submit's
// path). The target transaction opens first: if it cannot, nothing is
// decided or recorded and the error says why.
func (tx *Tx) Submit(ctx context.Context, sql string) (*Response, error) {
	if _, err := tx.open(ctx); err != nil {
		return nil, err
	}
	return tx.g.submit(ctx, tx.principal, tx.target, sql, tx)
}

// session is the open target transaction.
func (tx *Tx) session() pilot.TxSession {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.sess
}

// executedIn notes a statement that executed in the transaction; it stays
// in flight (and its request running) until the transaction ends.
func (tx *Tx) executedIn(req *ledger.Request, res *pilot.Result) {
	tx.g.led.Flying(req.ID)
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.ran = append(tx.ran, ranInTx{req, res})
}

// Savepoint, Release and RollbackTo run the client's SAVEPOINT, RELEASE
// SAVEPOINT and ROLLBACK TO SAVEPOINT in the target transaction (opening
// it for SAVEPOINT). ROLLBACK TO records the statements run since the
// savepoint as rolled back.
func (tx *Tx) Savepoint(ctx context.Context, name string) error {
	sess, err := tx.open(ctx)
	if err != nil {
		return err
	}
	if err := sess.Savepoint(ctx, "savepoint", name); err != nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.marks = append(tx.marks, txMark{name, len(tx.ran)})
	return nil
}

// Release is RELEASE SAVEPOINT name.
func (tx *Tx) Release(ctx context.Context, name string) error {
	sess, i, err := tx.mark(name)
	if err != nil {
		return err
	}
	if err := sess.Savepoint(ctx, "release", name); err != nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.marks = tx.marks[:i]
	return nil
}

// RollbackTo is ROLLBACK TO SAVEPOINT name.
func (tx *Tx) RollbackTo(ctx context.Context, name string) error {
	sess, i, err := tx.mark(name)
	if err != nil {
		return err
	}
	if err := sess.Savepoint(ctx, "rollback to", name); err != nil {
		return err
	}
	tx.mu.Lock()
	undone := append([]ranInTx(nil), tx.ran[tx.marks[i].n:]...)
	tx.ran = tx.ran[:tx.marks[i].n]
	tx.marks = tx.marks[:i+1] // the savepoint itself stays
	tx.mu.Unlock()
	return tx.g.rolledBack(ctx, undone, sess.ID(), "rolled back to savepoint "+name)
}

// mark finds the latest savepoint of that name, as PostgreSQL does.
func (tx *Tx) mark(name string) (pilot.TxSession, int, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for i := len(tx.marks) - 1; i >= 0; i-- {
		if tx.marks[i].name == name {
			return tx.sess, i, nil
		}
	}
	return nil, 0, &pilot.SavepointError{Code: "3B001", Message: fmt.Sprintf("savepoint %q does not exist", name)}
}

// end marks the transaction ended and returns what it ran.
func (tx *Tx) end() (pilot.TxSession, []ranInTx) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.ended {
		return nil, nil
	}
	tx.ended = true
	sess, ran := tx.sess, tx.ran
	tx.ran = nil
	return sess, ran
}

// Commit commits the transaction and records each statement that ran in
// it as executed. An error means it did not commit (its statements are
// recorded as rolled back), or, wrapping pilot.ErrCommitUnknown, that
// nobody knows: those requests stay running until reconciliation reads
// their receipts.
func (tx *Tx) Commit(ctx context.Context) error {
	sess, ran := tx.end()
	if sess == nil {
		return nil
	}
	defer tx.g.giveTxSlot(tx.target)
	err := sess.Commit(ctx)
	ctx = context.WithoutCancel(ctx)
	switch {
	case err == nil:
		// The entries are appended together, so they share one commit.
		errs := make([]error, len(ran))
		var wg sync.WaitGroup
		for i, r := range ran {
			wg.Go(func() {
				defer tx.g.led.Landed(r.req.ID)
				errs[i] = tx.g.led.Committed(ctx, r.req, r.res, sess.ID(), len(ran))
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			// It committed; Reconcile records what could not be, from the
			// receipts.
			tx.g.cfg.Logger.Error("transaction outcome entries", "txid", sess.ID(), "err", err)
		}
		return nil
	case errors.Is(err, pilot.ErrCommitUnknown):
		tx.g.cfg.Logger.Error("transaction commit outcome unknown", "txid", sess.ID(), "err", err)
		for _, r := range ran {
			tx.g.led.Landed(r.req.ID)
		}
		return err
	}
	if rerr := tx.g.rolledBack(ctx, ran, sess.ID(), "its COMMIT failed"); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// Rollback rolls the transaction back and records each statement that ran
// in it as rolled back. Ending a client's session in a transaction calls
// it too.
func (tx *Tx) Rollback(ctx context.Context) error {
	sess, ran := tx.end()
	if sess == nil {
		return nil
	}
	defer tx.g.giveTxSlot(tx.target)
	sess.Rollback()
	return tx.g.rolledBack(context.WithoutCancel(ctx), ran, sess.ID(), "ROLLBACK")
}

// lose rolls back a transaction whose state on the target is unknown.
func (tx *Tx) lose(ctx context.Context) {
	if err := tx.Rollback(ctx); err != nil {
		tx.g.cfg.Logger.Error("transaction rollback entries", "err", err)
	}
}

// rolledBack records statements undone by a rollback.
func (g *Gateway) rolledBack(ctx context.Context, ran []ranInTx, txid, why string) error {
	errs := make([]error, len(ran))
	var wg sync.WaitGroup
	for i, r := range ran {
		wg.Go(func() {
			defer g.led.Landed(r.req.ID)
			errs[i] = g.led.RolledBack(ctx, r.req, txid, why)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
