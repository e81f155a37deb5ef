package pgwire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestSubmitErrorByClass: each class of gateway.Classify is answered with
// its SQLSTATE and the wire front's words; a cancel request wins over all
// but a recorded or transaction failure; the text of anything else (the
// target's own error included) never reaches the client.
func TestSubmitErrorByClass(t *testing.T) {
	t.Parallel()
	c := &session{srv: &Server{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}, principal: "a", target: "shop"}
	sqlErr := func(code string) error { return &gateway.SQLError{RequestID: "req_1", Code: code, Message: "m"} }
	secret := errors.New(`pq: relation "secret_table" does not exist`)
	for _, tc := range []struct {
		name     string
		err      error
		canceled bool
		want     wireError
	}{
		{"parse error", sqlErr(sqlcheck.CodeParseError), false, wireError{Code: stateSyntax, Message: "m", Where: "req_1", Detail: "request req_1: parse_error"}},
		{"too large", sqlErr(sqlcheck.CodeInputTooLarge), false, wireError{Code: stateProgramLimit, Message: "m", Where: "req_1", Detail: "request req_1: input_too_large"}},
		{"too deep", sqlErr(sqlcheck.CodeInputTooDeep), true, wireError{Code: stateProgramLimit, Message: "m", Where: "req_1", Detail: "request req_1: input_too_deep"}},
		{"stacked", sqlErr(sqlcheck.CodeMultipleStatements), false, wireError{Code: stateFeature, Message: "m", Where: "req_1", Detail: "request req_1: multiple_statements"}},
		{"flood", &gateway.FloodError{RequestID: "req_2", Code: gateway.FloodTooManyWait, Message: "wait"}, false,
			wireError{Code: StateRefused, Message: "wait", Where: "req_2", Detail: "request req_2: recorded, not queued; nothing ran", Hint: "wait before sending statements that need a human"}},
		{"logbook", fmt.Errorf("x: %w", gateway.ErrLogUnavailable), true, wireError{Code: StateNotRecorded, Message: "the decision could not be recorded, so nothing ran; try again later"}},
		{"too many transactions", gateway.ErrTooManyTransactions, true, wireError{Code: stateTooManyTxns,
			Message: "too many transactions are open on this target at once: this statement did not run", Hint: "try again, or send it outside a transaction"}},
		{"no transactions", gateway.ErrNoTransactions, false, wireError{Code: stateFeature,
			Message: "transactions are not supported on this target: its Pilot runs in another process, and each statement runs in a transaction of its own",
			Hint:    "send each statement on its own, without BEGIN"}},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), true, wireError{Code: stateCanceled, Message: "canceling statement due to user request"}},
		{"unknown target, canceled", gateway.ErrUnknownTarget, true, wireError{Code: stateCanceled, Message: "canceling statement due to user request"}},
		{"unknown target", fmt.Errorf("gateway: %w: %q", gateway.ErrUnknownTarget, "shop"), false, wireError{Code: stateNoDatabase, Message: "the target is no longer configured"}},
		{"context ended, no cancel request", context.Canceled, false, wireError{Code: stateInternal,
			Message: "the statement could not be decided or executed; nothing ran unless its request shows otherwise"}},
		{"anything else", secret, false, wireError{Code: stateInternal,
			Message: "the statement could not be decided or executed; nothing ran unless its request shows otherwise"}},
	} {
		if got := c.submitError(tc.err, tc.canceled); got == nil || *got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
