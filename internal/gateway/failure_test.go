package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestClassify: every error the statement path answers falls in its class,
// wrapped or not, with the request that records it and the words an agent
// may read; anything else is internal, and its text is not the agent's.
func TestClassify(t *testing.T) {
	t.Parallel()
	sqlErr := func(code string) error {
		return &gateway.SQLError{RequestID: "req_1", Code: code, Message: "m " + code}
	}
	flood := &gateway.FloodError{RequestID: "req_2", Code: gateway.FloodReferralRate, Message: "slow down"}
	for _, tc := range []struct {
		name      string
		err       error
		class     gateway.FailureClass
		requestID string
		code      string
		message   string
		recorded  bool
	}{
		{"parse error", sqlErr(sqlcheck.CodeParseError), gateway.FailureUnparseable, "req_1", sqlcheck.CodeParseError, "m parse_error", true},
		{"empty", sqlErr(sqlcheck.CodeEmptyStatement), gateway.FailureUnparseable, "req_1", sqlcheck.CodeEmptyStatement, "m empty_statement", true},
		{"too large", sqlErr(sqlcheck.CodeInputTooLarge), gateway.FailureOverLimit, "req_1", sqlcheck.CodeInputTooLarge, "m input_too_large", true},
		{"too deep", sqlErr(sqlcheck.CodeInputTooDeep), gateway.FailureOverLimit, "req_1", sqlcheck.CodeInputTooDeep, "m input_too_deep", true},
		{"stacked", sqlErr(sqlcheck.CodeMultipleStatements), gateway.FailureUnapprovable, "req_1", sqlcheck.CodeMultipleStatements, "m multiple_statements", true},
		{"ddl", sqlErr(sqlcheck.CodeStatementNotAllow), gateway.FailureUnapprovable, "req_1", sqlcheck.CodeStatementNotAllow, "m statement_not_allowed", true},
		{"placeholder wrapped", fmt.Errorf("front: %w", sqlErr(sqlcheck.CodeParamNotAllowed)), gateway.FailureUnapprovable, "req_1", sqlcheck.CodeParamNotAllowed, "m parameter_not_allowed", true},
		{"flood", flood, gateway.FailureFlooded, "req_2", gateway.FloodReferralRate, "slow down", true},
		{"flood wrapped", fmt.Errorf("x: %w", flood), gateway.FailureFlooded, "req_2", gateway.FloodReferralRate, "slow down", true},
		{"logbook", fmt.Errorf("gateway: decide: %w", gateway.ErrLogUnavailable), gateway.FailureLogUnavailable, "", "", gateway.MessageLogUnavailable, false},
		{"unknown target", fmt.Errorf("gateway: %w: %q", gateway.ErrUnknownTarget, "nope"), gateway.FailureUnknownTarget, "", "", "", false},
		{"not found", gateway.ErrNotFound, gateway.FailureNotFound, "", "", "", false},
		{"too many transactions", gateway.ErrTooManyTransactions, gateway.FailureTooManyTransactions, "", "", "", false},
		{"no transactions", fmt.Errorf("begin: %w", gateway.ErrNoTransactions), gateway.FailureNoTransactions, "", "", "", false},
		{"canceled", fmt.Errorf("pilot: %w", context.Canceled), gateway.FailureCanceled, "", "", "", false},
		{"deadline", context.DeadlineExceeded, gateway.FailureCanceled, "", "", "", false},
		{"anything else", errors.New(`pq: relation "secret_table" does not exist`), gateway.FailureInternal, "", "", "", false},
	} {
		f := gateway.Classify(tc.err)
		if f.Class != tc.class || f.RequestID != tc.requestID || f.Code != tc.code || f.Message != tc.message || f.Recorded != tc.recorded {
			t.Errorf("%s: Classify = %v %q %q %q recorded=%v, want %v %q %q %q recorded=%v", tc.name,
				f.Class, f.RequestID, f.Code, f.Message, f.Recorded, tc.class, tc.requestID, tc.code, tc.message, tc.recorded)
		}
		if f.Err != tc.err {
			t.Errorf("%s: Classify kept %v, not the error classified", tc.name, f.Err)
		}
	}
	for c := gateway.FailureInternal; c <= gateway.FailureCanceled; c++ {
		if c.String() == "unknown" || c.String() == "" {
			t.Errorf("class %d has no name", int(c))
		}
	}
	if got := gateway.FailureClass(-1).String(); got != "unknown" {
		t.Errorf("an out-of-range class is named %q", got)
	}
}
