package pilot

import (
	"context"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// A Pilot is asked for different things by different callers, and each
// asks only for its role: what it may do to the target is then read from
// the type it holds. Every role that reaches the target verifies its
// authority itself (the marque, the signatures, the bound); none trusts
// its caller for it. Nothing that crosses a role is process-local:
// requests and results are plain values, and a target transaction never
// leaves the Pilot, so each is served in process (*Pilot) and through
// internal/pilot/remote alike.

// Cataloger names the target and holds its catalog as last read. It does
// nothing to the target: the catalog is in memory (a remote Pilot's is
// refreshed in the background). The fronts draw an agent's scope, and
// the console compiles bounds, from it.
type Cataloger interface {
	// Target is the target's name.
	Target() string
	// Catalog is the target's catalog as last read.
	Catalog() *sqlcheck.Catalog
}

// Pinger checks that the target answers: a round trip that reads and
// writes nothing (readiness).
type Pinger interface {
	// Ping checks that the target answers.
	Ping(ctx context.Context) error
}

// Runner writes: it runs statements under guards and commits them with
// their receipts, on a marque resting on a grantor's signature over the
// bound (Execute) or an approver's over the statement and its preview
// (ExecuteApproved). It is the only role that commits anything of an
// agent's. A client transaction held across statements is Sessions, a
// role a Runner may also have.
type Runner interface {
	// Execute verifies and runs one marque's statement under guards.
	Execute(ctx context.Context, req Request) (*Result, error)
	// ExecuteApproved verifies and runs a statement a human approved.
	ExecuteApproved(ctx context.Context, req ApprovedRequest) (*Result, error)
}

// Rehearser runs a statement inside a signed bound with its guards and
// rolls it back: the statement's writes never commit, and it reads only
// what the bound shows. Like Describer it may first create the fence
// views of the Pilot's own schema. Evidence for the Surveyor panel, never
// authority; it writes no receipt.
type Rehearser interface {
	// Rehearse runs sql as Execute would and rolls back. auth carries
	// the grantor's signature over the bound, which it verifies.
	Rehearse(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*Result, error)
}

// Describer types a statement without running it: it prepares the
// guarded text in a READ ONLY transaction that rolls back, and reads no
// row. The only thing it may write is what Execute would first: the fence
// views of the Pilot's own schema, if missing. The wire front's Describe
// of a prepared statement.
type Describer interface {
	// Describe types a statement's $1..$n and its result columns when
	// its NULL twin passes the check of a signed bound for path (auth
	// carries the grantor's signature, which it verifies).
	Describe(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*Result, error)
}

// Previewer reads, in a READ ONLY transaction, what a referred statement
// would reach and write, without running it, when a human asks: the
// approvers' evidence, never authority, and never shown to the agent
// (DESIGN.md invariant 10).
type Previewer interface {
	// Preview computes a referred statement's preview and its JSON.
	Preview(ctx context.Context, sql string) (*Preview, []byte, error)
}

// Settler settles marques whose outcome nobody recorded
// (reconciliation). It reads receipts and transaction status; the only
// thing it writes is a void receipt, which burns a marque so it can never
// run. It never runs a statement.
type Settler interface {
	// Receipt reports whether a marque's statement committed, and its rows.
	Receipt(ctx context.Context, marqueID string) (bool, int64, error)
	// VoidReceipt settles a marque nobody recorded an outcome for: it
	// reports that it committed, or burns it so it never can.
	VoidReceipt(ctx context.Context, marqueID, requestID, principal string) (executed bool, rows int64, err error)
	// XactStatus is pg_xact_status of a transaction id.
	XactStatus(ctx context.Context, txid string) (string, error)
	// PruneReceipts deletes the receipts of statements executed before a
	// time, never one younger than ReceiptFloor (retention).
	PruneReceipts(ctx context.Context, before time.Time) (int64, error)
}

// Executor is a Pilot wherever it runs: in the control plane's process
// (*Pilot) or in a process of its own next to its target (a client of
// `harbormaster pilot`). It is every role at once, for the wiring that
// holds a target's Pilot for everything (the gateway, the node, the
// remote server); a caller that needs less takes the role it uses.
type Executor interface {
	Cataloger
	Pinger
	Runner
	Rehearser
	Describer
	Previewer
	Settler
	// Close releases the Executor's connections.
	Close()
}

var _ Executor = (*Pilot)(nil)

// Sessions holds a target transaction for a client across several
// statements (the wire front's BEGIN ... COMMIT); it writes as a Runner
// does, each statement on its own marque. The Pilot in the node's process
// (Session) has it, and a remote Pilot, which holds the transaction on its
// side of the connection. It is not part of Executor: an Executor without
// it serves no client transactions (gateway.ErrNoTransactions).
type Sessions interface {
	Begin(ctx context.Context, o TxOptions) (TxSession, error)
}

// TxSession is a target transaction held for a client (Session).
type TxSession interface {
	// ID is the target transaction's id.
	ID() string
	// Execute runs one marque's statement in the transaction.
	Execute(ctx context.Context, req Request) (*Result, error)
	// Savepoint runs SAVEPOINT, RELEASE SAVEPOINT or ROLLBACK TO SAVEPOINT
	// ("savepoint", "release", "rollback to") of the client's name.
	Savepoint(ctx context.Context, verb, name string) error
	// Commit commits (an aborted transaction rolls back, and says so).
	Commit(ctx context.Context) error
	// Rollback rolls back and lets the transaction go.
	Rollback()
}

var (
	_ Sessions  = (*Pilot)(nil)
	_ TxSession = (*Session)(nil)
)
