// Package ledger is the requests' lifecycle (DESIGN.md sections 3 and
// 11): every statement an agent sends is one Request, recorded in the
// control store's requests table and in the logbook, and moved from
// status to status only along one transition table (transitions,
// Allowed). Every change of status the ledger writes is checked against
// the table first; a move it does not list is refused (ErrForbidden)
// before anything is written.
//
// The statement path (internal/gateway) calls it in section 3's order:
// Decide records the decision, its logbook entry first with the request's
// row in the same commit (step 6), so a decision that cannot be recorded
// runs nothing; Executing records an approved statement's marque id
// before the Pilot may run it; Executed, or RecordLater while the agent
// is answered, records the outcome (step 9); Failed, Committed and
// RolledBack record the other ends. A state that commits with its entry
// is written inside the entry's own store transaction (logbook.Record's
// With and If): the ledger and the store are the only code that holds
// such a transaction for a request, so the statement path holds none.
//
// Invariants. A request moves only forward, and a marque executes at
// most once: a running request is settled from the target's receipt
// (Reconcile, ReconcileRunning), never re-executed, and only while the
// marque id read is still the one recorded, so a node slow to record its
// own marque (Executing) finds the request settled and runs nothing. A
// decision the logbook holds whose row a stop lost becomes a waiting
// request that did not run (reconcileOrphans); a denial or an expiry a
// stop interrupted is finished from the logbook (ReconcileDeciding).
// A request this node still has in flight (Flying, Landed) is left alone
// by reconciliation. Get answers another principal's request as not
// found before waiting for anything, so the time of the answer says
// nothing of it (invariant 10); the views that show a request, and what
// of it only humans see, are the gateway's.
package ledger
