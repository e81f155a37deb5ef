// Package pilot is the only part of Harbormaster that holds the target's
// credentials. It trusts nothing the control plane says: for every
// statement it verifies the marque, the grantor's signature over the bound
// with its own signers file, and the bound itself, checks the statement
// again (sqlcheck, remembered per shape in a sqlcheck.Cache; shapes.go
// for its templates), and executes it under guards built from the
// signed bound (guard.go): fences as security-barrier views it owns
// (views.go), checks and the row cap (rowcap.go) as a hidden RETURNING
// column that raises on the row that breaks them, foreign key actions
// asked at run time (cascade.go), and a receipt keyed by the marque's id
// inserted in the same transaction, so a marque executes at most once
// (txn.go, fold.go).
//
// A statement on the surveyed path is rehearsed inside the signed bound
// for the panel (Pilot.Rehearse; its images show only what the agent may
// read and the values it writes). A referred statement is never run
// before a human approves it: Pilot.Preview reads, in a READ ONLY
// transaction, what it would do (preview.go), and ExecuteApproved
// (approved.go) runs it only on the preview the approval signed,
// recomputed in the statement's own snapshot.
//
// catalog.go reads the target's catalog; init.go holds target init, the
// schema the guards need. executor.go names what the control plane calls,
// in process or through internal/pilot/remote, as roles, each saying what
// it may do to the target: Runner writes, on a marque (and Sessions, a
// client transaction of them); Rehearser runs and rolls back, Describer
// prepares, Previewer reads in a READ ONLY transaction, all three
// evidence, never authority; Settler reads receipts and may burn a marque
// with a void receipt, never running a statement; Cataloger and Pinger do
// nothing to it. Executor is all of them, for the wiring that holds a
// target's Pilot; a caller that needs less takes its role (the ledger's
// reconciliation, Settler; the fronts and the console, Cataloger).
package pilot
