// Package gateway is the statement path of DESIGN.md section 3, between
// the fronts (HTTP, MCP, the wire front) and the Pilot, and the desk for
// the humans' acts on it.
//
// Gateway.Submit takes one statement from an authenticated principal and
// walks the numbered steps in order, one method each (path.go, in the
// order submit calls them): parse with the real PostgreSQL
// parser (a statement that does not parse, or that no human could
// approve, is rejected at once: sqlcheck.Analysis.Rejected); check it
// against each delegation in force for the principal and target, in the
// catalog its bound sees (sqlcheck, remembered per shape in a
// sqlcheck.Cache, checks.go);
// route it once (route.Decide, reading its facts through routeFacts: the
// compiled path, the surveyed path of surveyed.go, or refer); record the
// decision in the logbook before any authorization leaves; authorize
// (a value for a Pilot in this process, a signed marque for one in
// another); have the Pilot verify everything again and execute under
// guards; record the outcome; answer the agent. The request's lifecycle (its row, its moves
// along one transition table, its entries, reconciliation after a crash)
// is internal/ledger's: the gateway calls it at steps 6 and 9, holds no
// store transaction, and draws the views it shows from ledger.Request
// (request.go).
//
// A referred statement is only queued: nothing of it runs before a human
// asks, and then only its read-only preview. Admitting a referral (the
// flood rules), announcing it (the webhook) and previewing it are the
// referral service's (internal/referrals; Gateway.Preview forwards to
// it); the queue of waiting requests is in queue.go. The humans' signed
// acts (delegations, approvals, denials, revocations, enablements,
// reviews) go through one mechanism (acts.go); an approval binds the
// preview's digest, and the Pilot runs the statement only if it still
// reaches and writes what the preview showed. The delegations in force,
// their staleness and refresh, and the clock skew their expiries are
// decided with are the registry's (internal/registry, Gateway.Registry);
// adding a delegation (its compilation, signature and logbook entry) is
// in delegations.go, revoking one and logging expiries in queue.go, and
// the background services (reconciliation, refresh, expiry, the clock)
// in services.go.
//
// What the agent can observe through this package is bounded by
// invariant 10: a request's preview, detail and digests are shown to
// humans only (Gateway.Request), and a refusal reaches the agent as a
// fixed text per class, the target's own words going to the humans.
package gateway
