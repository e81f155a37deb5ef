package ledger

import (
	"errors"
	"fmt"
)

// Status is a request's state in the store. A request moves only forward,
// along the transition table (transitions): rejected and refused are
// final at once; waiting becomes running (approved) or deciding (a denial
// or an expiry being recorded); running becomes executed, failed, rolled
// back or, when it did not run, waiting again; deciding becomes denied,
// expired, or waiting again when the act could not be recorded.
type Status string

// Request statuses.
const (
	// StatusNew is a request not yet recorded: the state a decision
	// moves from.
	StatusNew      Status = ""
	StatusRejected Status = "rejected" // did not parse: nothing to decide
	StatusWaiting  Status = "waiting"  // referred: waiting for a human
	StatusRunning  Status = "running"  // marque minted (fast path or approved), not yet resolved
	StatusExecuted Status = "executed" // on the fast path, or approved and executed
	StatusFailed   Status = "failed"   // approved, but the Pilot refused or failed
	StatusDenied   Status = "denied"   // a human denied it
	StatusExpired  Status = "expired"  // nobody answered within the queue's time-to-live
	StatusDeciding Status = "deciding" // a denial or expiry is being recorded
	// StatusRefused: a referral past the principal's rate or waiting cap,
	// recorded and never queued.
	StatusRefused Status = "refused"
	// StatusRolledBack is a statement that ran inside a client
	// transaction that rolled back (or was rolled back to a savepoint
	// before it): nothing of it remains.
	StatusRolledBack Status = "rolled_back"
)

// Outcome is what a request's row says happened to it, as its agent reads
// it. OutcomeRun is the decision's own, never shown: the agent of a
// statement decided to run reads executed or referred.
type Outcome string

// Outcomes of a request.
const (
	OutcomeExecuted   Outcome = "executed"
	OutcomeReferred   Outcome = "referred"
	OutcomeRejected   Outcome = "rejected"
	OutcomeRefused    Outcome = "refused"
	OutcomeRolledBack Outcome = "rolled_back"
	OutcomeRun        Outcome = "run"
)

// transitions is the one table of the moves a request's status may make;
// every change of status the ledger writes is checked against it first
// (transit), and a move it does not list is refused before anything is
// written.
var transitions = map[Status][]Status{
	// A decision records the request: rejected or refused at once,
	// referred (waiting), or decided to run (running).
	StatusNew: {StatusRejected, StatusRefused, StatusWaiting, StatusRunning},
	// A human's approval claims it (running); a denial or an expiry is
	// being recorded (deciding).
	StatusWaiting: {StatusRunning, StatusDeciding},
	// The Pilot's outcome, or reconciliation's from the receipt: it ran,
	// or it was refused for good, or rolled back with its transaction,
	// or it did not run and waits for a human (again).
	StatusRunning: {StatusExecuted, StatusFailed, StatusRolledBack, StatusWaiting},
	// The act was recorded, or it could not be and the request waits again.
	StatusDeciding: {StatusDenied, StatusExpired, StatusWaiting},
}

// Allowed reports whether the transition table lets a request move from
// one status to another.
func Allowed(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether a status has no move out of it.
func Final(s Status) bool { return len(transitions[s]) == 0 }

// ErrForbidden: the transition table does not let the request make that
// move; nothing was written.
var ErrForbidden = errors.New("the request cannot make that move")

// transit checks one move against the table.
func (l *Ledger) transit(from, to Status) error {
	if !Allowed(from, to) {
		return fmt.Errorf("ledger: %w: from %q to %q", ErrForbidden, from, to)
	}
	if l.seen != nil {
		l.seen(from, to)
	}
	return nil
}
