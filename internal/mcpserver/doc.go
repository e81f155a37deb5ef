// Package mcpserver serves Harbormaster's agent tools over MCP (the
// official Go SDK): run_sql, request_status, my_delegations and
// describe_tables.
//
// Two ways in:
//
//   - Streamable HTTP at /mcp on the API's own HTTP server (Register). The
//     agent authenticates with the same bearer token as /v1; a request
//     without a valid token gets 401 before the MCP handler runs. The
//     handler is stateless: every HTTP request carries its token, so the
//     principal is re-established per request, no session can be taken over
//     by another caller, and any control-plane node can answer any request.
//   - stdio (ServeStdio, the `harbormaster mcp` command): a process an MCP
//     client launches. It holds one agent token and forwards every tool
//     call to a running server's HTTP API; it has no authority of its own.
//
// Invariants:
//
//   - The principal comes only from the bearer token, never from a tool
//     argument; it reaches the tools as the SDK's auth.TokenInfo.UserID.
//     Every tool acts as that principal and sees only its own requests and
//     delegations.
//   - run_sql takes the same path as POST /v1/statements (gateway.Submit):
//     nothing here decides anything. A referral is a normal tool result
//     (not an error) with the request id and the reasons, so a model can
//     tell "a human will decide" from "this failed".
//   - Statement text, reasons and row values are untrusted data: they are
//     returned as JSON (structured content) or quoted in text, never
//     interpreted.
package mcpserver
