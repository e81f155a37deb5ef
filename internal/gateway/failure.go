package gateway

import (
	"context"
	"errors"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// FailureClass is what kind of failure a statement's error is, for the
// fronts: each renders a class in its own protocol (an HTTP status and
// code, an MCP tool error, a SQLSTATE), so that an agent learns the same
// thing of the same failure through every front (DESIGN.md invariant 10:
// the same error classes over every interface).
type FailureClass int

const (
	// FailureInternal is anything else: a server error whose text is for
	// the log, never for the agent (it can carry the target's own error
	// text). Nothing ran unless the request shows otherwise.
	FailureInternal FailureClass = iota
	// FailureUnparseable: the statement does not parse, or is empty
	// (*SQLError). Recorded as rejected.
	FailureUnparseable
	// FailureOverLimit: the statement is too large or too deep to parse
	// (*SQLError). Recorded as rejected.
	FailureOverLimit
	// FailureUnapprovable: no human could approve the statement (several
	// statements, DDL, a locking clause, a placeholder: *SQLError with
	// SQLError.Unapprovable). Recorded as rejected, not queued.
	FailureUnapprovable
	// FailureFlooded: the principal sends referrals too fast or has too
	// many waiting (*FloodError). Recorded as refused, not queued.
	FailureFlooded
	// FailureUnknownTarget: no such target (ErrUnknownTarget).
	FailureUnknownTarget
	// FailureNotFound: no such request for this principal (ErrNotFound).
	FailureNotFound
	// FailureLogUnavailable: the decision could not be recorded, so
	// nothing ran (ErrLogUnavailable).
	FailureLogUnavailable
	// FailureTooManyTransactions: too many client transactions are open
	// on the target (ErrTooManyTransactions).
	FailureTooManyTransactions
	// FailureNoTransactions: the target's Pilot holds no transactions
	// across statements (ErrNoTransactions).
	FailureNoTransactions
	// FailureCanceled: the caller's context ended (context.Canceled,
	// context.DeadlineExceeded).
	FailureCanceled
)

var failureNames = [...]string{"internal", "unparseable", "over_limit", "unapprovable", "flooded", "unknown_target",
	"not_found", "log_unavailable", "too_many_transactions", "no_transactions", "canceled"}

func (c FailureClass) String() string {
	if c < 0 || int(c) >= len(failureNames) {
		return "unknown"
	}
	return failureNames[c]
}

// Failure is an error of Submit (or of the calls beside it: WaitRequest,
// BeginTx) as the fronts answer it.
type Failure struct {
	Class FailureClass
	// RequestID is the request that records the statement, when Recorded.
	RequestID string
	// Code is the static check's code of a rejected statement
	// (sqlcheck.CodeParseError, ...) or the FloodError's code.
	Code string
	// Message is what the agent may read: the gateway's own words for a
	// recorded failure, and for FailureLogUnavailable; "" for the classes
	// whose words each front chooses (FailureInternal's error text is
	// never the agent's).
	Message string
	// Recorded: the request is in the logbook and the request ledger, as
	// rejected or refused; nothing of it ran and nothing was queued.
	Recorded bool
	// Err is the error classified.
	Err error
}

// MessageLogUnavailable is what an agent reads when its statement's
// decision could not be recorded.
const MessageLogUnavailable = "the decision could not be recorded, so nothing ran; try again later"

// Classify is the one place that sorts a statement's error into the class
// the fronts answer. err must not be nil.
func Classify(err error) Failure {
	f := Failure{Class: FailureInternal, Err: err}
	var sqlErr *SQLError
	var flood *FloodError
	switch {
	case errors.As(err, &sqlErr):
		f.Class, f.RequestID, f.Code, f.Message, f.Recorded = FailureUnparseable, sqlErr.RequestID, sqlErr.Code, sqlErr.Message, true
		switch {
		case sqlErr.Unapprovable():
			f.Class = FailureUnapprovable
		case sqlErr.Code == sqlcheck.CodeInputTooLarge || sqlErr.Code == sqlcheck.CodeInputTooDeep:
			f.Class = FailureOverLimit
		}
	case errors.As(err, &flood):
		f.Class, f.RequestID, f.Code, f.Message, f.Recorded = FailureFlooded, flood.RequestID, flood.Code, flood.Message, true
	case errors.Is(err, ErrLogUnavailable):
		f.Class, f.Message = FailureLogUnavailable, MessageLogUnavailable
	case errors.Is(err, ErrTooManyTransactions):
		f.Class = FailureTooManyTransactions
	case errors.Is(err, ErrNoTransactions):
		f.Class = FailureNoTransactions
	case errors.Is(err, ErrUnknownTarget):
		f.Class = FailureUnknownTarget
	case errors.Is(err, ErrNotFound):
		f.Class = FailureNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		f.Class = FailureCanceled
	}
	return f
}
