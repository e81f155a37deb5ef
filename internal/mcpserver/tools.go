package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// MaxWait caps request_status's wait_seconds, as the HTTP API caps its
// long-poll.
const MaxWait = gateway.MaxWait

// Tool names.
const (
	ToolRunSQL         = "run_sql"
	ToolRequestStatus  = "request_status"
	ToolMyDelegations  = "my_delegations"
	ToolDescribeTables = "describe_tables"
)

const instructions = `Harbormaster is the gateway between you and PostgreSQL databases ("targets"). ` +
	`A human signed delegations that say what you may do on your own; run_sql runs statements inside them at once. ` +
	`Anything outside them is not refused: it is referred to a human approver, and run_sql answers "referred" with a request id; ` +
	`request_status (with wait_seconds) tells you what the human decided. ` +
	`Call my_delegations and describe_tables first to see your scope, and write statements that stay inside it.`

const runSQLDescription = `Run one PostgreSQL statement (SELECT, INSERT, UPDATE or DELETE) on a target database, as the agent this connection authenticates.

Harbormaster checks the statement against the delegations a human signed for you (see my_delegations and describe_tables):
- Inside them, it runs at once. The result has outcome "executed", rows (for SELECT or RETURNING), rows_affected, and truncated (true when a SELECT matched more rows than its rule's max_rows, so only the first max_rows rows are returned).
- Outside them, it does NOT fail: it is referred to a human approver and has not run (yet). The result has outcome "referred", the reasons (which column, rule, fence or row cap it exceeded) and a request_id. To learn what the human decided, call request_status with that request_id and wait_seconds (up to 60), again while its status is still "waiting". Or rewrite the statement to stay inside your scope.

Send exactly one statement per call, with literal values. A statement that does not parse is an error, and nothing runs. So is one that no human could approve, which is answered as an error at once instead of being referred: several statements in one call, anything but SELECT, INSERT, UPDATE or DELETE (DDL, SET, COPY, transactions), SELECT INTO, FOR UPDATE, or a $1 placeholder.`

const requestStatusDescription = `Read the status of a request you made with run_sql, usually one that was referred to a human.

status is "waiting" while the request waits for a human approver; "executed" once it has run (rows_affected says how many rows it changed); "denied" (a human refused it), "expired" (nobody decided in time) or "failed" (approved, but it could not run), with reasons. With wait_seconds (0 to 60) the call waits until the status changes or the time is up, so you can wait for a human's decision without polling fast; call it again while the status is still "waiting". You can only see your own requests.`

const myDelegationsDescription = `List the delegations in force for you, in plain language: for each, the sentence a human signed (the task you were given), its tier (A: every rule is checked mechanically; B: some rules also need a conformance judgment, and until that is switched on such statements are referred to a human), its target database, its expiry, and what each rule lets you do: which columns of which table, the row fence (which rows), the check (what changed rows must satisfy) and the row cap per statement.

Statements inside these rules run at once. Anything else you send with run_sql is referred to a human approver rather than failing.`

const describeTablesDescription = `Describe the tables your delegations cover, so you can write statements that stay inside your scope: for each table, its columns and types; for each column whether you may read it and/or write it, and under which rule; and each rule's fence (the rows it can reach), check (what new or changed rows must satisfy) and max_rows (the most rows one statement may return or change).

A statement runs at once only if every column it mentions (select list, WHERE, JOIN, ORDER BY, also in UPDATE and DELETE) is readable under a select rule, every column it sets is writable under a rule of that operation, and the rows it changes are inside the fence and no more than max_rows. Anything else is referred to a human approver, not refused. A rule whose route is "residual" needs a conformance judgment, so statements that rely on it are referred too. target (optional) limits the answer to one target database.`

type runSQLInput struct {
	Target string `json:"target" jsonschema:"the target database, as named in your delegations (for example shop)"`
	SQL    string `json:"sql" jsonschema:"exactly one PostgreSQL statement"`
}

type requestStatusInput struct {
	RequestID   string `json:"request_id"`
	WaitSeconds int    `json:"wait_seconds,omitempty"`
}

type noInput struct{}

type describeTablesInput struct {
	Target string `json:"target,omitempty" jsonschema:"only this target database; all targets when absent"`
}

// delegationsOutput is GET /v1/delegations's body, active delegations only.
type delegationsOutput struct {
	Delegations []scope.DelegationView `json:"delegations"`
}

// backendFunc returns the backend for one tool call: the principal behind
// the call's bearer token in process, the HTTP API client in stdio mode.
type backendFunc func(req *mcp.CallToolRequest) (backend, error)

// tools serves the four tools over whichever backend a call gets.
type tools struct {
	backend backendFunc
	log     *slog.Logger
}

func ptr[T any](v T) *T { return &v }

// newServer builds the MCP server with the four tools.
func newServer(version string, backend backendFunc, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "harbormaster", Title: "Harbormaster", Version: version},
		&mcp.ServerOptions{Instructions: instructions, Logger: sdkLogger(log),
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	t := &tools{backend: backend, log: log}
	closedWorld := ptr(false)
	mcp.AddTool(s, &mcp.Tool{Name: ToolRunSQL, Title: "Run SQL", Description: runSQLDescription, InputSchema: runSQLInputSchema, OutputSchema: runSQLOutputSchema,
		Annotations: &mcp.ToolAnnotations{Title: "Run SQL", DestructiveHint: ptr(true), OpenWorldHint: closedWorld}}, t.runSQL)
	mcp.AddTool(s, &mcp.Tool{Name: ToolRequestStatus, Title: "Request status", Description: requestStatusDescription,
		InputSchema: requestStatusInputSchema, OutputSchema: requestStatusOutputSchema,
		Annotations: &mcp.ToolAnnotations{Title: "Request status", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld}}, t.requestStatus)
	mcp.AddTool(s, &mcp.Tool{Name: ToolMyDelegations, Title: "My delegations", Description: myDelegationsDescription, InputSchema: noInputSchema, OutputSchema: delegationsOutputSchema,
		Annotations: &mcp.ToolAnnotations{Title: "My delegations", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld}}, t.myDelegations)
	mcp.AddTool(s, &mcp.Tool{Name: ToolDescribeTables, Title: "Describe tables", Description: describeTablesDescription, InputSchema: describeTablesInputSchema, OutputSchema: tablesOutputSchema,
		Annotations: &mcp.ToolAnnotations{Title: "Describe tables", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: closedWorld}}, t.describeTables)
	return s
}

// principalOf is the authenticated principal of an HTTP call, or "" (stdio:
// the server behind the API knows it).
func principalOf(req *mcp.CallToolRequest) string {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return ""
	}
	return req.Extra.TokenInfo.UserID
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func (t *tools) runSQL(ctx context.Context, req *mcp.CallToolRequest, in runSQLInput) (*mcp.CallToolResult, *gateway.Response, error) {
	if strings.TrimSpace(in.Target) == "" || strings.TrimSpace(in.SQL) == "" {
		return nil, nil, errors.New(`both "target" and "sql" are required`)
	}
	b, err := t.backend(req)
	if err != nil {
		return nil, nil, err
	}
	resp, err := b.Submit(ctx, in.Target, in.SQL)
	if err != nil {
		return nil, nil, t.toolError(ToolRunSQL, in.Target, err)
	}
	t.log.Info("mcp tool", "tool", ToolRunSQL, "principal", principalOf(req), "target", in.Target,
		"request", resp.RequestID, "outcome", resp.Outcome, "path", resp.Path)
	return &mcp.CallToolResult{Content: text(responseText(resp))}, resp, nil
}

func (t *tools) requestStatus(ctx context.Context, req *mcp.CallToolRequest, in requestStatusInput) (*mcp.CallToolResult, *gateway.RequestView, error) {
	if strings.TrimSpace(in.RequestID) == "" {
		return nil, nil, errors.New(`"request_id" is required`)
	}
	wait := time.Duration(in.WaitSeconds) * time.Second
	if wait < 0 || wait > MaxWait {
		return nil, nil, fmt.Errorf(`"wait_seconds" must be between 0 and %d`, int(MaxWait.Seconds()))
	}
	b, err := t.backend(req)
	if err != nil {
		return nil, nil, err
	}
	v, err := b.WaitRequest(ctx, in.RequestID, wait)
	if err != nil {
		return nil, nil, t.toolError(ToolRequestStatus, in.RequestID, err)
	}
	return &mcp.CallToolResult{Content: text(requestText(v))}, v, nil
}

func (t *tools) myDelegations(ctx context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, *delegationsOutput, error) {
	b, err := t.backend(req)
	if err != nil {
		return nil, nil, err
	}
	ds, err := b.Delegations(ctx)
	if err != nil {
		return nil, nil, t.toolError(ToolMyDelegations, "", err)
	}
	return &mcp.CallToolResult{Content: text(delegationsText(ds))}, &delegationsOutput{Delegations: ds}, nil
}

func (t *tools) describeTables(ctx context.Context, req *mcp.CallToolRequest, in describeTablesInput) (*mcp.CallToolResult, *scope.TablesView, error) {
	b, err := t.backend(req)
	if err != nil {
		return nil, nil, err
	}
	v, err := b.Tables(ctx, strings.TrimSpace(in.Target))
	if err != nil {
		return nil, nil, t.toolError(ToolDescribeTables, in.Target, err)
	}
	return &mcp.CallToolResult{Content: text(tablesText(v))}, v, nil
}

// toolError turns a backend error into the text a model reads (a tool
// result with isError, not a protocol error). subject is what the call
// named: the target or the request id.
func (t *tools) toolError(tool, subject string, err error) error {
	f := gateway.Classify(err)
	switch f.Class {
	case gateway.FailureFlooded:
		return fmt.Errorf("refused, not queued, nothing ran (%s): %s. Request %s records it", f.Code, f.Message, f.RequestID)
	case gateway.FailureUnapprovable:
		return fmt.Errorf("the statement cannot run here and no human could approve it, so nothing ran and it was not queued (%s): %s. Request %s records it; send one SELECT, INSERT, UPDATE or DELETE with literal values",
			f.Code, f.Message, f.RequestID)
	case gateway.FailureUnparseable, gateway.FailureOverLimit:
		return fmt.Errorf("the statement cannot be checked, so nothing ran (%s): %s. Request %s records it; fix the SQL and send it again",
			f.Code, f.Message, f.RequestID)
	case gateway.FailureUnknownTarget:
		return fmt.Errorf("unknown target %q; my_delegations lists the targets you have delegations on", subject)
	case gateway.FailureNotFound:
		return fmt.Errorf("no request %q for this agent", subject)
	case gateway.FailureLogUnavailable:
		return errors.New(f.Message)
	case gateway.FailureCanceled:
		return err
	}
	var api *apiError
	if errors.Is(err, ErrUnauthorized) || errors.As(err, &api) {
		return err
	}
	t.log.Error("mcp tool failed", "tool", tool, "err", err)
	if tool == ToolRunSQL {
		return errors.New("the statement could not be decided or executed; nothing ran unless request_status shows otherwise")
	}
	return fmt.Errorf("%s failed on the server; try again later", tool)
}

// responseText is run_sql's answer in words.
func responseText(r *gateway.Response) string {
	var b strings.Builder
	switch r.Outcome {
	case gateway.OutcomeExecuted:
		fmt.Fprintf(&b, "Executed (request %s, %s path).", r.RequestID, r.Path)
		if len(r.Columns) > 0 || len(r.Rows) > 0 {
			fmt.Fprintf(&b, " %d row(s) returned", len(r.Rows))
			if r.Truncated {
				b.WriteString("; more rows matched, but the rule's max_rows caps what one statement may read, so only these are returned")
			}
			b.WriteString(".")
			keys := r.Keys()
			if len(keys) > 0 {
				fmt.Fprintf(&b, "\ncolumns: %s", strings.Join(keys, ", "))
			}
			for _, row := range r.Rows {
				b.WriteString("\n")
				b.WriteString(rowJSON(keys, row))
			}
		} else {
			fmt.Fprintf(&b, " %d row(s) affected.", r.RowsAffected)
		}
	case gateway.OutcomeReferred:
		fmt.Fprintf(&b, "Referred to a human approver (request %s). This is not an error: the statement is outside what your delegations let you do on your own, so it has not run; it waits for a human to approve or deny it.", r.RequestID)
		if len(r.Reasons) > 0 {
			b.WriteString("\nWhy:")
			for _, why := range r.Reasons {
				fmt.Fprintf(&b, "\n- %s", why)
			}
		}
		fmt.Fprintf(&b, "\nTo learn the decision, call request_status with request_id %q and wait_seconds up to %d; call again while the status is still \"waiting\". Or rewrite the statement to stay inside your scope (describe_tables).",
			r.RequestID, int(MaxWait.Seconds()))
	default:
		fmt.Fprintf(&b, "Request %s: %s.", r.RequestID, r.Outcome)
		for _, why := range r.Reasons {
			fmt.Fprintf(&b, "\n- %s", why)
		}
	}
	return b.String()
}

// rowJSON renders a row as a JSON object with its keys (the answer's
// column keys, gateway.Response.Keys) in column order.
func rowJSON(keys []string, row []any) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kj, _ := json.Marshal(k)
		var v any
		if i < len(row) {
			v = row[i]
		}
		vj, err := json.Marshal(v)
		if err != nil {
			vj = []byte(`"?"`)
		}
		b.Write(kj)
		b.WriteString(": ")
		b.Write(vj)
	}
	b.WriteByte('}')
	return b.String()
}

// requestText is request_status's answer in words.
func requestText(v *gateway.RequestView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Request %s on target %s: status %s", v.ID, v.Target, v.Status)
	switch v.Status {
	case gateway.StatusWaiting:
		b.WriteString(" (waiting for a human approver; it has not run). Call request_status again, with wait_seconds, to keep waiting.")
	case gateway.StatusRunning:
		b.WriteString(" (running now).")
	case gateway.StatusExecuted:
		fmt.Fprintf(&b, " (it ran: %d row(s) affected).", v.RowsAffected)
	case gateway.StatusDenied:
		b.WriteString(" (a human denied it; it did not run).")
	case gateway.StatusExpired:
		b.WriteString(" (nobody decided in time; it did not run).")
	case gateway.StatusFailed:
		b.WriteString(" (approved, but it could not be executed; it did not run).")
	case gateway.StatusRejected:
		b.WriteString(" (the statement could not be checked, so it never ran).")
	default:
		b.WriteString(".")
	}
	if v.DecidedBy != "" {
		fmt.Fprintf(&b, "\nDecided by %s.", v.DecidedBy)
	}
	if len(v.Reasons) > 0 {
		b.WriteString("\nReasons:")
		for _, why := range v.Reasons {
			fmt.Fprintf(&b, "\n- %s", why)
		}
	}
	fmt.Fprintf(&b, "\nStatement: %s", v.SQL)
	return b.String()
}

// delegationsText is my_delegations's answer in words.
func delegationsText(ds []scope.DelegationView) string {
	if len(ds) == 0 {
		return "You have no delegation in force. Every statement you send with run_sql will be referred to a human approver."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You have %d delegation(s) in force. Statements inside these rules run at once; anything else is referred to a human approver.", len(ds))
	for _, d := range ds {
		fmt.Fprintf(&b, "\n\nDelegation %s on target %s, tier %s, expires %s, signed by %s:\n  %q", d.ID, d.Target, d.Tier, d.Expires, d.Signer, d.Sentence)
		if d.NotBefore != "" {
			fmt.Fprintf(&b, "\n  not before %s", d.NotBefore)
		}
		for _, r := range d.Rules {
			route := "runs at once"
			if r.Route == "residual" {
				route = "needs a conformance judgment, so referred to a human while that is switched off"
			}
			fmt.Fprintf(&b, "\n  rule %d (%s, %s): you may %s", r.Index, r.Op, route, r.Summary)
		}
		if d.Fallback != "" {
			fmt.Fprintf(&b, "\n  %s", d.Fallback)
		}
	}
	return b.String()
}

// tablesText is describe_tables's answer in words.
func tablesText(v *scope.TablesView) string {
	if len(v.Tables) == 0 {
		return "No delegation in force covers any table for you. Every statement you send with run_sql will be referred to a human approver."
	}
	var b strings.Builder
	for i, t := range v.Tables {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Target %s, table %s", t.Target, t.Table)
		if t.Note != "" {
			fmt.Fprintf(&b, " (%s)", t.Note)
		}
		b.WriteString("\nrules:")
		for _, r := range t.Rules {
			fmt.Fprintf(&b, "\n  %s rule %d: %s %s", r.DelegationID, r.Rule, r.Op, strings.Join(quoted(r.Columns), ", "))
			if r.Fence != "" {
				fmt.Fprintf(&b, "; fence: %s", r.Fence)
			}
			if r.Check != "" {
				fmt.Fprintf(&b, "; check: %s", r.Check)
			}
			fmt.Fprintf(&b, "; max_rows: %d", r.MaxRows)
			if r.Route == "residual" {
				fmt.Fprintf(&b, "; residual (referred while the Surveyor is off): %s", r.Residual)
			}
		}
		b.WriteString("\ncolumns:")
		for _, c := range t.Columns {
			var may []string
			if c.Read {
				may = append(may, "read ("+refs(c.ReadBy)+")")
			}
			if c.Write {
				may = append(may, "write ("+refs(c.WriteBy)+")")
			}
			if len(may) == 0 {
				may = []string{"not covered: a statement that mentions it is referred to a human"}
			}
			fmt.Fprintf(&b, "\n  %s %s: %s", sqlcheck.QuoteIdent(c.Name), c.Type, strings.Join(may, ", "))
		}
	}
	return b.String()
}

// quoted is column names as a statement must write them (a reserved word
// such as "end" or "order", or a name with capitals, in double quotes).
func quoted(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = sqlcheck.QuoteIdent(c)
	}
	return out
}

func refs(rs []scope.RuleRef) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s rule %d %s", r.DelegationID, r.Rule, r.Op)
		if r.Route == "residual" {
			out[i] += ", residual"
		}
	}
	return strings.Join(out, "; ")
}
