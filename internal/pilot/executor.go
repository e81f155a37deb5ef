package pilot

import (
	"context"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Executor is a Pilot wherever it runs: in the control plane's process
// (*Pilot) or in a process of its own next to its target (a client of
// `harbormaster pilot`). It is all the statement path asks of a target.
// Every method that runs anything verifies the marque, the signatures and
// the bound itself; an Executor never trusts its caller for authority.
// Nothing that crosses it is process-local: requests and results are plain
// values, and a target transaction never leaves the Pilot.
type Executor interface {
	// Target is the target's name.
	Target() string
	// Catalog is the target's catalog as last read.
	Catalog() *sqlcheck.Catalog
	// Ping checks that the target answers.
	Ping(ctx context.Context) error
	// Execute verifies and runs one marque's statement under guards.
	Execute(ctx context.Context, req Request) (*Result, error)
	// ExecuteApproved verifies and runs a statement a human approved.
	ExecuteApproved(ctx context.Context, req ApprovedRequest) (*Result, error)
	// Rehearse runs a statement inside a signed bound with its guards and
	// rolls back: evidence for the Surveyor, never authority. auth carries
	// the grantor's signature over the bound, which it verifies.
	Rehearse(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*Result, error)
	// Describe types a statement's $1..$n and its result columns without
	// running it, when its NULL twin passes the check of a signed bound
	// for path (auth carries the grantor's signature, which it
	// verifies): the wire front's Describe of a prepared statement.
	Describe(ctx context.Context, sql string, canonicalBound []byte, auth marque.Auth, principal, path string) (*Result, error)
	// Preview reads what a referred statement would reach and write,
	// without running it, when a human asks: the approver's evidence.
	Preview(ctx context.Context, sql string) (*Preview, []byte, error)
	// Receipt reports whether a marque's statement committed, and its rows.
	Receipt(ctx context.Context, marqueID string) (bool, int64, error)
	// VoidReceipt settles a marque nobody recorded an outcome for: it
	// reports that it committed, or burns it so it never can.
	VoidReceipt(ctx context.Context, marqueID, requestID, principal string) (executed bool, rows int64, err error)
	// XactStatus is pg_xact_status of a transaction id.
	XactStatus(ctx context.Context, txid string) (string, error)
	// Close releases the Executor's connections.
	Close()
}

var _ Executor = (*Pilot)(nil)

// Sessions is an Executor that holds a target transaction for a client
// across several statements (the wire front's BEGIN ... COMMIT): the
// Pilot in the node's process (Session), or a remote Pilot, which holds
// it on its side of the connection.
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
