// Package pgwire is the PostgreSQL wire protocol front (docs/pgwire.md):
// agents connect with any PostgreSQL client, the database name being the
// target, the user the agent principal and the password its token.
//
// # What it is, and is not
//
// A front, like the HTTP API and the MCP server: every statement it does
// not answer itself goes to gateway.Submit, the call POST /v1/statements
// makes, with the session's principal and target. The front holds no
// authority: it decides nothing about a statement's scope, opens nothing
// on the target, and keeps no state a statement's outcome depends on. What
// it answers itself (session settings drivers send, the session queries
// and pool resets of answers.go, harbormaster_wait, the refusals of
// transactions, COPY and catalog queries) is decided from the statement's
// parse tree alone and answered from what the session knows (the front's
// version, the principal, the target's name, the search path and limits
// the operator pins, the clock), never from the target, so it is the same
// for every target (DESIGN.md invariant 10). It is neither decided nor
// recorded: it is not a statement on the target.
//
// # Invariants
//
//   - The Pilot runs exactly the checked text (invariant 4). Bound
//     parameters are inlined as constants into the parsed tree before the
//     statement path sees it: a typed parameter becomes
//     'value'::pg_catalog.TYPE, an untyped one an untyped literal, and the
//     tree is deparsed. The gateway then parses and checks that text; it
//     never sees a placeholder. A declared parameter type outside a fixed
//     list of built-in types is refused at Parse.
//   - Tokens are never stored and never cross the network in clear: an
//     agent with a SCRAM-SHA-256 verifier (derived from its token) uses
//     SCRAM; one without may only send its token inside TLS. Unknown users
//     go through a stand-in SCRAM exchange, so they look like wrong tokens.
//     Failed logins are rate limited per source address and per user.
//   - Referrals are errors a program can handle: SQLSTATE HM001 with the
//     request id alone in the Where field; the reasons are the statement
//     path's, the same an HTTP client reads. The target's own error text
//     never reaches the agent: the statement path already withholds it.
//   - Untrusted input never takes the server down: message bodies are
//     capped, a malformed message ends its connection with an error, and a
//     panic in a session is recovered and logged (FuzzSession holds the
//     message handling to this).
//   - A cancel request cancels only the session whose key and secret it
//     carries; a statement the Pilot has committed is not undone.
package pgwire
