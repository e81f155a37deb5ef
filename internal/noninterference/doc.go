// Package noninterference holds the property test of invariant 10
// (DESIGN.md section 2): nothing outside an agent's signed bound is
// observable. It has no code of its own; the test is the package.
//
// # The property
//
// Two targets that differ only in data outside an agent's bound give that
// agent identical observations. The test builds such twins on a real
// PostgreSQL and runs the whole system against each: two independent
// control planes (store, logbook, Pilot, gateway, HTTP API, MCP server and
// wire front, wired by gatewaytest), the same signed delegation in both,
// and the same
// random agent statements sent to both in the same order. Everything the
// agent can see must be the same on both sides: the HTTP status and the
// whole JSON body of every answer (outcome, reasons, rows, columns,
// rows_affected, truncated, path, delegation id, error bodies), every field
// of GET /v1/requests/{id} as the agent sees it, the MCP tool results
// (run_sql and request_status, text and structured content) and what a
// client of the PostgreSQL wire front reads (row description, rows,
// command tag, every field of an error), once per-run
// noise is normalized away: request, marque and judgment ids, timestamps
// and transaction ids. Nothing else is normalized.
//
// # Side channels
//
// An answer is not all an agent learns from a statement: whatever the
// system does with it, while answering or afterwards, can show in what the
// agent does next. After each hostile statement (drawn to step outside the
// bound, referred or not) an observer (observer_test.go) runs short
// in-bound probes on both twins, as the agent, and compares them as it
// compares answers: an UPDATE of the rows of a probe table the statement
// could have locked, under a short lock_timeout (200ms: a held row
// answers "timeout", referred), also run at fixed times while a statement
// drawn to lock is being answered, since a lock is only held while what
// takes it runs; an INSERT ... RETURNING id into that table, whose id is
// a bigserial, compared as the delta from the previous probe; and the
// agent's reachable surface (GET /metrics, /debug/pprof/ and /debug/vars,
// the humans' routes with the agent's token, its own request again). The
// probe table, notes, is the same on both twins and named by rules of its
// own; its rows and sequence are part of the region checked after every
// round. A share of each round's statements (sideGen,
// sidechannel_test.go) are drawn for these channels: referred statements
// whose effect, were anything to run them, would depend on hidden data
// (a predicate over the table no rule names, or over unlisted columns,
// choosing which rows of the probe table an UPDATE or DELETE locks and,
// with a slow RETURNING, for how long; the row count of an INSERT ...
// SELECT from generate_series bounded by a hidden value; a 30 MB value or
// none; a slow statement or not). Before issue 22 every referred
// statement was rehearsed, unfenced, on the real target, in a transaction
// that rolled back, and /metrics was on the agents' listener: the
// observer found both classes there (row locks and sequences), and
// /metrics after every hostile statement. TestReferralIsNotAnOracle
// replays the issue's own statements, one per class, with controls that
// plant each difference on one twin by hand. Both control planes of a
// round share one process, so the process's own counters (the Go
// runtime's allocations) cannot tell the twins apart here: the surface
// probe checks that no such endpoint answers the agent at all.
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
// Each round has its own random streams (one for the side channel
// statements), so round n of a seed is the same alone as in a whole run
// (what runs in the background can still shift the heap's layout from
// one run to the next). A difference fails the test, with the statement,
// both observations and a minimal diff, and then what only humans may
// see, to explain it: the target's error text, whether the region's rows
// lie in the same physical order on both targets, and the evidence on
// the plan, below. The summary at the end groups differences into
// classes, one example each.
//
// # The plan channel
//
// The planner's statistics count every row of a table, those outside the
// fence too, so the plan of a statement can differ between the twins, and
// the plan decides which rows inside the fence an expression meets and in
// what order: whether an expression that raises is evaluated at all (a
// hash join against a nested loop whose outer side is empty), which guard
// trips first (an index scan against a sequential scan). That channel is
// outside the guarantee (docs/security.md, "The plan"). A difference is
// put down to it only on evidence (attribution_test.go): the statement's
// guarded SQL, built as the Pilot builds it (pilot.BuildGuards) and
// checked against the text the Pilot ran, is run again on both twins
// through an admin connection, in transactions that roll back (creating
// any fence view a twin lacks inside them), with the Pilot's session
// settings, once with the twins' own plans and then under 32 settings
// that pin the plan's shape with SET LOCAL: every join method (nested
// loop, hash, merge, any) against every scan method (sequential, index,
// bitmap, any), with and without hashed aggregation, the join order fixed
// (join_collapse_limit and from_collapse_limit 1), no parallel plans, no
// memoize, no JIT. Plans are compared as EXPLAIN (COSTS OFF) text;
// outcomes as the rows and count of a success, or the class of an error
// (the guard's HM001 fence or check, a timeout, or the SQLSTATE class). A
// difference is explained by the plan only if
//
//  1. the region is still the same on both twins, and the guarded SQL is
//     the one the Pilot ran;
//  2. the twins' own plans differ, and their outcomes are what the agent
//     saw on each side over HTTP and, where the statement ran again, over
//     MCP (outcome class, and the count of a success), which differ: a
//     difference that is not the statement's outcome is never the plan's;
//  3. on each twin, its own plan with the rows outside the bound deleted
//     (in the transaction, so the statistics and the plan stay; the plan
//     is checked) gives the same outcome: those rows chose the plan, and
//     none of them decided the outcome by being evaluated;
//  4. some pinned setting gives both twins the same plan and the same
//     outcome;
//  5. no pinned setting gives both twins one twin's own plan and different
//     outcomes.
//
// An explained difference is counted and logged with its evidence, and
// the summary reports it as the plan channel, a known limit; it does not
// fail the test. Every other difference fails it, as does one where the
// plans do not differ at all. A pinned setting under which both twins
// have a plan neither chose and different outcomes does not stop the
// attribution, since it is not how the agent's answers came about, but
// the log notes it: the same plan can meet the same rows in a different
// order on each side where the heap's layout decides (a bitmap heap scan
// meets a row updated in place, a HOT update, at its old place, and one
// moved to another page at its new one, and whether there was room on
// the page depends on the rows outside the fence). Were the twins to
// choose such a plan, the test would see the difference with the plans
// the same, and fail.
//
// TestNonInterferenceFindings replays what the property test found, each
// finding minimized to crafted twins and a statement, through the same
// machinery; it is the regression of the attribution. A case fails if its
// twins give the agent identical observations (the channel it shows is
// gone, or the case no longer exercises it: the docs need another look)
// and if any difference it shows is one the plan does not explain.
// TestPlanAttributionCatchesALeak is the attribution's negative control:
// guarded SQL that reads past a fence, on twins whose plans differ, is
// never put down to the plan.
package noninterference
