package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestToolErrorByClass: each class of gateway.Classify is the tool error
// text MCP words it in; the text of anything else (the target's own error
// included) never reaches the model.
func TestToolErrorByClass(t *testing.T) {
	t.Parallel()
	tl := &tools{log: slog.New(slog.DiscardHandler)}
	sqlErr := func(code string) error { return &gateway.SQLError{RequestID: "req_1", Code: code, Message: "m"} }
	unauthorized := fmt.Errorf("%w (bad token)", ErrUnauthorized)
	api := &apiError{Status: 409, Code: "idempotency_in_progress", Message: "busy"}
	for _, tc := range []struct {
		name, tool, subject string
		err                 error
		want                string
	}{
		{"parse error", ToolRunSQL, "shop", sqlErr(sqlcheck.CodeParseError),
			"the statement cannot be checked, so nothing ran (parse_error): m. Request req_1 records it; fix the SQL and send it again"},
		{"too large", ToolRunSQL, "shop", sqlErr(sqlcheck.CodeInputTooLarge),
			"the statement cannot be checked, so nothing ran (input_too_large): m. Request req_1 records it; fix the SQL and send it again"},
		{"stacked", ToolRunSQL, "shop", sqlErr(sqlcheck.CodeMultipleStatements),
			"the statement cannot run here and no human could approve it, so nothing ran and it was not queued (multiple_statements): m. Request req_1 records it; send one SELECT, INSERT, UPDATE or DELETE with literal values"},
		{"flood", ToolRunSQL, "shop", &gateway.FloodError{RequestID: "req_2", Code: gateway.FloodReferralRate, Message: "slow"},
			"refused, not queued, nothing ran (referral_rate): slow. Request req_2 records it"},
		{"unknown target", ToolDescribeTables, "nope", fmt.Errorf("%w: x", gateway.ErrUnknownTarget),
			`unknown target "nope"; my_delegations lists the targets you have delegations on`},
		{"not found", ToolRequestStatus, "req_9", gateway.ErrNotFound, `no request "req_9" for this agent`},
		{"logbook", ToolRunSQL, "shop", gateway.ErrLogUnavailable, "the decision could not be recorded, so nothing ran; try again later"},
		{"canceled", ToolRunSQL, "shop", context.Canceled, context.Canceled.Error()},
		{"unauthorized", ToolMyDelegations, "", unauthorized, unauthorized.Error()},
		{"api error", ToolRunSQL, "shop", api, api.Error()},
		{"anything else, run_sql", ToolRunSQL, "shop", errors.New(`pq: relation "secret_table" does not exist`),
			"the statement could not be decided or executed; nothing ran unless request_status shows otherwise"},
		{"anything else, another tool", ToolDescribeTables, "", errors.New("secret"), "describe_tables failed on the server; try again later"},
	} {
		if got := tl.toolError(tc.tool, tc.subject, tc.err); got == nil || got.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
	}
}
