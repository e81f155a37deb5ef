// Package bench is the load generator of the honest benchmark: what a
// Harbormaster node adds to the demo's single-row UPDATE, against the same
// statements sent straight to PostgreSQL. `harbormaster bench` and the
// gateway's BenchmarkHonestGovernedVsDirect both run it; it talks to the
// node only over the HTTP API and to the target only with pgx.
//
// What makes it honest:
//
//   - Every statement is a new text. The workload is
//     UPDATE orders SET updated_at = now() WHERE id = N AND total_cents <> L
//     with a new L every statement (larger than any total, so it changes
//     neither the row reached nor the decision): the gateway parses and
//     checks each one afresh and PostgreSQL parses and plans each one, as
//     for an agent whose statements differ in their literals. Reading
//     total_cents also keeps the demo's own delegations from covering it, so
//     the benchmark's delegation (Delegation) decides it.
//   - The direct run sends the same kind of text with pgconn's ExecParams:
//     the extended protocol, an unnamed statement, one round trip, no
//     statement cache (pgx's Exec without arguments would fall back to the
//     simple protocol; its default mode would prepare every new text).
//   - Clients work on disjoint rows (Workload), so none waits on another's
//     row lock.
//   - At one client, direct and governed statements are interleaved
//     (alternating which goes first), so both see the same machine state;
//     the many-client phases run back to back, direct then governed.
//   - Every governed statement must come back executed with one row
//     affected, and every direct one must affect one row; anything else
//     fails the run with the reason.
//
// CPU. Each many-client phase reads the CPU time (utime+stime, /proc/PID/stat)
// of three sets of processes before and after: PostgreSQL (the postmaster
// and its live children, plus the children that exited, which the
// postmaster's cutime+cstime holds once it has reaped them), the
// Harbormaster node (Config.NodePID) and this process, the clients. Each
// is divided by the phase's statements. The whole machine's busy time from
// /proc/stat is the cross-check; what it has beyond the three ("other") is
// everything else running on the machine. Clock ticks are 10 ms, so short
// phases give coarse figures. Off Linux there is no CPU split.
package bench
