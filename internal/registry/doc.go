// Package registry holds a node's delegations in force (DESIGN.md section
// 4): every signed delegation the control store holds, which of them are
// revoked, how fresh that knowledge is, and how far this node's clock may
// be trusted to decide their expiry. The statement path (internal/gateway)
// asks it which delegations are in force for (principal, target) at an
// instant, and nothing else decides that.
//
// What it does not do: compile a delegation, verify a grantor's signature
// or a revocation's, or write the logbook. Those are the gateway's, which
// hands the registry a delegation already verified and recorded (Add), or
// a revocation to apply with the step that records it (Revoke).
//
// # Invariants
//
//   - A signed delegation never changes. The registry holds it as read,
//     oldest first; nothing is ever removed, and one revoked stays revoked
//     (Refresh applies a revocation recorded since, never the reverse).
//   - Revocation is under the registry's lock from the check to the store
//     write: while a revocation is being recorded, no statement reads the
//     delegations in force, so every statement decided after Revoke
//     returns sees it, and two revocations of one delegation cannot both
//     succeed.
//   - Staleness fails closed. While the refresh service runs (Watch),
//     Stale says why the delegations are too old to run anything on once
//     the last good read is older than Config.Stale: a revocation made
//     through another node takes effect here within that bound, or the
//     fast path stops.
//   - Expiry holds at both clocks. Several nodes decide expiries with their
//     own clocks. MeasureClock reads the store's (Config.StoreClock, the one
//     every node shares); while the two differ by more than
//     Config.ClockLeeway, a delegation is in force only if it is in force
//     at both instants, and an approval's expiry (ExpiredAt) has passed if
//     it has passed at either: never less strict than either clock. The
//     offset is in the metrics (harbormaster_clock_skew_seconds,
//     harbormaster_clock_skew_beyond_leeway), and a node beyond the leeway
//     logs a warning.
package registry
