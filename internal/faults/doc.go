// Package faults is Harbormaster's fault-injection suite (docs/faults.md):
// each scenario breaks one component of a real deployment while agents
// send statements, lets it come back, and then checks the invariants of
// DESIGN.md section 2 over what is left (Check), not only that nothing
// crashed:
//
//   - the logbook verifies;
//   - every request has exactly one final outcome once reconciliation has
//     run (none left running);
//   - nothing ran twice: at most one receipt per request in the target,
//     and the target's rows agree with the executed requests;
//   - nothing ran without its decision: every receipt's request has its
//     decision entry (and an approved one its approval entry) written
//     before the receipt's transaction began;
//   - no agent was told "executed" for a statement that did not run.
//
// The scenarios are tests of this package: kill -9 of a serve process at
// random points (kill_test.go), the target PostgreSQL stopped abruptly
// mid-transaction (target_test.go), the logbook's disk full (disk_test.go),
// the Surveyor's providers failing mid-judgment (providers_test.go), the
// control store locked by another process (store_test.go), kill -9 of the
// remote Pilot process (pilot_test.go) and the PostgreSQL control store
// of two nodes crashed, locked or paused (storedown_test.go). Their short
// versions run in go test ./...; -faults.long (or HARBORMASTER_FAULTS_LONG=1)
// runs the long ones, and -faults.seed replays a run's random choices. Each
// logs one line per scenario,
//
//	fault scenario=kill-node runs=5 violations=0 ...
//
// which docs/performance.md quotes. A new scenario is added the same way:
// a test that drives the fault, a Check at each recovery, a scoreboard for
// the line (deploy_test.go moves a servetest deployment to a remote Pilot
// or a PostgreSQL store).
package faults
