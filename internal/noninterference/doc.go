// Package noninterference holds the property test of invariant 10
// (DESIGN.md section 2): nothing outside an agent's signed bound is
// observable. It has no code of its own; the test is the package.
//
// # The property
//
// Two targets that differ only in data outside an agent's bound give that
// agent identical observations. The test builds such twins on a real
// PostgreSQL and runs the whole system against each: two independent
// control planes (store, logbook, Pilot, gateway, HTTP API and MCP server,
// wired by gatewaytest), the same signed delegation in both, and the same
// random agent statements sent to both in the same order. Everything the
// agent can see must be the same on both sides: the HTTP status and the
// whole JSON body of every answer (outcome, reasons, rows, columns,
// rows_affected, truncated, path, delegation id, error bodies), every field
// of GET /v1/requests/{id} as the agent sees it, and the MCP tool results
// (run_sql and request_status, text and structured content), once per-run
// noise is normalized away: request, marque and judgment ids, timestamps
// and transaction ids. Nothing else is normalized.
//
// # The twins
//
// Each round draws a schema (two or three tables named by rules, one table
// no rule names), a delegation (select rules listing a subset of columns,
// with or without a fence on listed or unlisted columns; update, delete and
// insert rules with fences, checks and max_rows) and data:
//
//   - the region: rows with ids 1..N, the same in both targets in every
//     column that any rule lists or any fence or check reads. Columns that
//     nothing in the bound names ("free" columns) hold different values in
//     each target, in every row;
//   - outside the read fence: rows with ids from 100000 up, generated
//     independently for each target (different values, different counts),
//     each one outside the fence of its table's select rule (the fence is
//     not true on it). Only tables with a fenced select rule have them;
//   - the table no rule names: different contents in each target.
//
// The agent's own writes keep the region equal on both sides: an update or
// delete reaches only rows inside the read fence, which are equal, and an
// insert writes the same rows to both. After every round the test checks
// that the region is still equal and that no row outside it changed: a
// failure there is a broken premise (or a bound violation), not a
// difference in observations.
//
// # Limits designed around
//
// Some channels are outside the guarantee, and the generator stays clear
// of them so that a difference always means a leak:
//
//   - unique keys: an insert whose key collides with an invisible row fails
//     on one target only. Rows outside the fence have ids of 100000 and
//     more, generated inserts use ids below 50000, no statement sets id,
//     and there are no other unique constraints and no foreign keys;
//   - timing: answer times are measured and reported (t.Logf, per target
//     and per outcome), never asserted;
//   - row order the SQL does not fix: every generated SELECT orders by all
//     its output columns (ties are then identical rows), aggregates that
//     build strings or arrays order their input by the value itself, and
//     rows returned by a write (RETURNING, in the order the executor met
//     them) are compared as a multiset;
//   - values that differ on every run: no generated statement calls now(),
//     random() or gen_random_uuid(), or shows a session's identity.
//
// # Running it
//
// The default run fits in the normal test command. The seed is fixed and
// logged; the environment changes it and the length of the run:
//
//	HARBORMASTER_NONINTERFERENCE_SEED=<uint64>   another seed
//	HARBORMASTER_NONINTERFERENCE_PAIRS=10000     a long run (statement pairs)
//	HARBORMASTER_NONINTERFERENCE_VERBOSE=1       log every statement
//
// A difference fails the test, with the statement, both observations and a
// minimal diff; the summary at the end groups them into classes, one
// example each.
package noninterference
