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
//   - outside the bound: rows with ids from 100000 up, generated
//     independently for each target (different values, different counts,
//     sometimes none), each one outside every fence that can reach it: the
//     fence of its table's select rule, and those of the update and delete
//     rules (a write that reads nothing of its target, such as DELETE FROM
//     t, reaches the rows of its write fence, readable or not: those rows
//     are inside the bound). Only tables whose select rule and write rules
//     are all fenced have them;
//   - the table no rule names: different contents in each target.
//
// Values are drawn to make leaks loud. The region's values are mild (text
// of its column's flavor, integers from 10 up, json whose k is a number),
// with a poison value (0, a word where a number or a date was expected)
// in about one in fifty; rows outside the bound are nasty, poison in half
// their values, on one side or both. Statements are full of expressions
// that raise on poison: evaluated where they should be, they mostly
// succeed or fail alike on both sides; evaluated on a row outside the
// bound, they fail on one side only.
//
// The agent's own writes keep the region equal on both sides: an update or
// delete reaches only rows of a fence, which are equal, and an insert
// writes the same rows to both. After every round the test checks that
// the region is still equal and that no row outside the bound changed: a
// failure there is a broken premise or a write beyond every fence, not a
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
//	HARBORMASTER_NONINTERFERENCE_ROUND=<n>       round n alone (100 statements)
//	HARBORMASTER_NONINTERFERENCE_VERBOSE=1       log every statement
//
// Each round has its own random stream, so round n of a seed is the same
// alone as in a whole run. A difference fails the test, with the
// statement, both observations and a minimal diff, and then what only
// humans may see, to explain it: the target's error text, the guarded SQL
// the Pilot ran, and its plan on both targets. Plans are worth the look:
// the planner's statistics count every row of a table, those outside the
// fence too, so a plan that differs between the twins is a way for them
// to reach the agent (whether an expression that raises is evaluated at
// all, which guard trips first). Such differences are classed "[plans
// differ]". The summary at the end groups differences into classes, one
// example each.
//
// TestNonInterferenceFindings replays what the property test found, each
// finding minimized to crafted twins and a statement, through the same
// machinery. A finding fails until the difference it shows is gone.
package noninterference
