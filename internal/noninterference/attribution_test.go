package noninterference_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Attributing a difference to the plan.
//
// The planner's statistics count the rows outside the fence too, so the
// plan of a statement can differ between the twins, and the plan decides
// whether an expression that raises is evaluated at all and which guard
// trips first. That channel is outside the guarantee (docs/security.md,
// "The plan"), but a difference is put down to it only on evidence: the
// statement's guarded SQL is run again on both twins, through an admin
// connection, in transactions that roll back, with the twins' own plans
// and under settings that pin the plan's shape (SET LOCAL). It is the
// plan's doing only if all of these hold:
//
//  1. the region is still the same on both twins (the re-runs compare
//     twins), and the guarded SQL built here is the one the Pilot ran;
//  2. the twins' own plans differ, and their outcomes reproduce what the
//     agent saw on each side (over HTTP and, where the statement ran
//     again, over MCP), which differ;
//  3. on each twin, its own plan with the rows outside the bound deleted
//     (in the transaction: the statistics, so the plan, stay; the plan is
//     checked) gives the same outcome: those rows chose the plan and
//     nothing else, none of them decided the outcome by being evaluated;
//  4. some pinned setting gives both twins the same plan with the same
//     outcome (the same rows and count, or the same error class: the
//     guard's HM001 fence or check, or the SQLSTATE class);
//  5. no pinned setting that gives both twins one twin's own plan gives
//     them different outcomes.
//
// A pinned setting under which both twins have a plan that neither chose
// and different outcomes does not stop the attribution (it is not how the
// agent's answers came about; were the twins to choose that plan, the
// property test would see the difference with the plans the same, and
// fail) but it is counted and reported: the same plan can meet the same
// rows in a different order on each side, where the heap's layout, which
// the rows outside the fence shape, decides it.

// pinning is a set of planner settings that pins a plan's shape.
type pinning struct {
	name string
	set  []string
}

// pinnings are the settings tried, every join method against every scan
// method, with and without hashed aggregation. Each also fixes the join
// order to the statement's and turns off what the planner picks by
// estimated size alone (parallel plans, memoize). The scan variants
// matter for writes: which row a seq scan and an index scan meet first
// decides which guard trips (a row lock or a HOT update moves a row in
// physical order, not in the index).
var pinnings = func() []pinning {
	// jit = off: a disabled node's cost takes the plan past
	// jit_above_cost, and compiling it costs a tenth of a second a run.
	common := []string{"join_collapse_limit = 1", "from_collapse_limit = 1", "geqo = off",
		"max_parallel_workers_per_gather = 0", "enable_memoize = off", "jit = off"}
	joins := []pinning{
		{"any join", nil},
		{"nested loops", []string{"enable_hashjoin = off", "enable_mergejoin = off"}},
		{"hash joins", []string{"enable_nestloop = off", "enable_mergejoin = off"}},
		{"merge joins", []string{"enable_nestloop = off", "enable_hashjoin = off"}},
	}
	scans := []pinning{
		{"any scan", nil},
		{"seq scans", []string{"enable_indexscan = off", "enable_indexonlyscan = off", "enable_bitmapscan = off", "enable_tidscan = off"}},
		{"index scans", []string{"enable_seqscan = off", "enable_bitmapscan = off", "enable_indexonlyscan = off"}},
		{"bitmap scans", []string{"enable_seqscan = off", "enable_indexscan = off", "enable_indexonlyscan = off"}},
	}
	aggs := []pinning{
		{"any aggregation", nil},
		{"sorted aggregation", []string{"enable_hashagg = off"}},
	}
	var out []pinning
	for _, a := range aggs {
		for _, j := range joins {
			for _, s := range scans {
				set := slices.Concat(common, j.set, s.set, a.set)
				out = append(out, pinning{j.name + ", " + s.name + ", " + a.name, set})
			}
		}
	}
	return out
}()

// outcome is what running the guarded SQL gave, at the precision the
// comparison needs: the Pilot's outcome code, the SQLSTATE class of a
// target error, and for a success the count, truncation and rows.
type outcome struct {
	code      string // executed, or the Pilot's refusal code
	state     string // HM001 fence, HM001 check, or the SQLSTATE class
	n         int64
	truncated bool
	rows      []string
	detail    string // the target's error text, for the log only
}

func (o outcome) String() string {
	switch o.code {
	case "executed":
		s := fmt.Sprintf("executed, %d rows", o.n)
		if o.truncated {
			s += " (truncated)"
		}
		return s
	case pilot.RefusedMaxRows:
		return fmt.Sprintf("%s (%d rows)", o.code, o.n)
	}
	return fmt.Sprintf("%s (%s: %s)", o.code, o.state, o.detail)
}

// same compares two outcomes: code, error class, count, rows.
func (o outcome) same(p outcome) bool {
	return o.code == p.code && o.state == p.state && o.n == p.n && o.truncated == p.truncated && slices.Equal(o.rows, p.rows)
}

// agentLevel is the part of an outcome an agent's answer shows: the code,
// and for a success the count.
func (o outcome) agentLevel() string {
	if o.code == "executed" {
		return fmt.Sprintf("executed, %d rows", o.n)
	}
	return o.code
}

// refusalCodes maps the fixed message of a refusal whose cause lies in the
// target's rows to its code.
var refusalCodes = map[string]string{
	pilot.MessageFence:    pilot.RefusedFence,
	pilot.MessageCheckRow: pilot.RefusedCheckRow,
	pilot.MessageMaxRows:  pilot.RefusedMaxRows,
	pilot.MessageDatabase: pilot.RefusedDatabase,
	pilot.MessageTimeout:  pilot.RefusedTimeout,
}

// agentSaw is the outcome of the Pilot's run as the agent's answer to
// POST /v1/statements shows it, at agentLevel's precision; false when the
// answer is not an outcome of running the statement (a referral by the
// static check, an error), or when the statement's second run, over MCP,
// showed another.
func agentSaw(a answer) (string, bool) {
	ex, _ := a.obs["http POST /v1/statements"].(exchange)
	body, _ := ex.Body.(map[string]any)
	if ex.Status != http.StatusOK {
		return "", false
	}
	saw, ok := shownOutcome(body)
	if !ok {
		return "", false
	}
	if run, ran := a.obs["mcp run_sql"].(map[string]any); ran {
		sc, _ := run["structured"].(map[string]any)
		if again, ok := shownOutcome(sc); !ok || again != saw {
			return "", false
		}
	}
	return saw, true
}

// shownOutcome reads the outcome of the Pilot's run from a statement's
// answer (the HTTP body, run_sql's structured content).
func shownOutcome(body map[string]any) (string, bool) {
	if path, _ := body["path"].(string); path == "" {
		return "", false
	}
	switch body["outcome"] {
	case "executed":
		n, ok := body["rows_affected"].(json.Number)
		if !ok {
			return "", false
		}
		return fmt.Sprintf("executed, %s rows", n), true
	case "referred":
		reasons, _ := body["reasons"].([]any)
		if len(reasons) == 0 {
			return "", false
		}
		first, _ := reasons[0].(string)
		code, ok := refusalCodes[first]
		return code, ok
	}
	return "", false
}

// attribution is the verdict on one difference.
type attribution struct {
	// plansDiffer: the twins' own plans of the guarded SQL differ.
	plansDiffer bool
	// explained: the difference is the plan's doing (see above).
	explained bool
	// otherPlanDiffers counts the pinned settings under which a plan
	// neither twin chose is the same on both and gives different outcomes.
	otherPlanDiffers int
	// why says, in one line, why it is or is not explained.
	why string
	// report is the evidence, for the log.
	report string
}

// attribute re-runs the statement's guarded SQL on both twins with their
// own plans and under every pinning, and decides whether the plan
// explains the difference. executed is the guarded SQL each Pilot ran, ""
// where it ran none to the end.
func (r *round) attribute(t *testing.T, answers [2]answer, executed [2]string) attribution {
	t.Helper()
	no := func(why string) attribution { return attribution{why: why, report: "attribution to the plan: " + why} }
	g := r.guard(t, answers[0].sql)
	if g == nil {
		return no("not explained: the Pilot would not run this statement, so no plan of it")
	}
	for k, sql := range executed {
		if sql != "" && sql != g.SQL && sql != r.template(t, k, answers[0].sql) {
			return no(fmt.Sprintf("not explained: the guarded SQL built here is not the one the Pilot ran on %s:\n    built: %s\n    ran:   %s",
				r.sides[k].name, g.SQL, sql))
		}
	}
	var saw [2]agentView
	for k, a := range answers {
		saw[k].outcome, saw[k].ok = agentSaw(a)
		saw[k].verdict = verdict(a)
	}
	return r.attributeGuarded(t, g, saw)
}

// agentView is the outcome of the Pilot's run as an agent's answer shows
// it (agentSaw); ok is false when the answer is not such an outcome.
type agentView struct {
	outcome string
	ok      bool
	verdict string
}

// attributeGuarded is attribute's evidence for the guarded SQL g, where
// the agent saw saw.
func (r *round) attributeGuarded(t *testing.T, g *pilot.Guarded, saw [2]agentView) attribution {
	t.Helper()
	ctx := t.Context()
	at := attribution{}
	var rep strings.Builder
	done := func(why string) attribution {
		at.why = why
		at.report = "attribution to the plan: " + why + rep.String()
		return at
	}
	if diff := r.regionDiff(t); diff != "" {
		return done("not explained: the region differs between the twins now (" + diff + "), so re-runs would not compare twins")
	}
	var conns [2]*pgx.Conn
	for k, s := range r.sides {
		c, err := pgx.Connect(ctx, s.dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.WithoutCancel(ctx))
		conns[k] = c
	}
	fmt.Fprintf(&rep, "\n  guarded SQL: %s", g.SQL)
	rerunOn := func(k int, set []string, withoutOutside bool) (string, outcome) {
		var drop []string
		if withoutOutside {
			for _, tb := range r.w.tables {
				drop = append(drop, tb.name)
			}
		}
		plan, out, err := rerun(ctx, conns[k], g, set, drop)
		if err != nil {
			t.Fatalf("noninterference: re-running the guarded SQL on %s: %v", r.sides[k].name, err)
		}
		return plan, out
	}
	run := func(set []string) (plans [2]string, outs [2]outcome) {
		for k := range conns {
			plans[k], outs[k] = rerunOn(k, set, false)
		}
		return plans, outs
	}

	// The twins' own plans.
	plans, outs := run(nil)
	if plans[0] == plans[1] {
		fmt.Fprintf(&rep, "\n  the same plan on both twins:\n      %s", indent(plans[0]))
		return done("not explained: the twins' own plans are the same")
	}
	at.plansDiffer = true
	fmt.Fprintf(&rep, "\n  the twins' own plans:\n    A:\n      %s\n    B:\n      %s\n  their outcomes: A %s; B %s",
		indent(plans[0]), indent(plans[1]), outs[0], outs[1])
	for k, v := range saw {
		if !v.ok {
			return done(fmt.Sprintf("not explained: the agent's answers on %s (%s) are not one outcome of running the statement (over HTTP and over MCP alike)", r.sides[k].name, v.verdict))
		}
	}
	if saw[0].outcome == saw[1].outcome {
		return done(fmt.Sprintf("not explained: the agent's answers on both twins have the same outcome (%s), so the difference is not the statement's outcome", saw[0].outcome))
	}
	for k := range outs {
		if outs[k].agentLevel() != saw[k].outcome {
			return done(fmt.Sprintf("not explained: the twins' own plans do not reproduce what the agent saw on %s (it saw %s, the re-run gives %s)",
				r.sides[k].name, saw[k].outcome, outs[k].agentLevel()))
		}
	}

	// Each twin's own plan without the rows outside the bound.
	for k := range conns {
		plan, out := rerunOn(k, nil, true)
		switch {
		case plan != plans[k]:
			fmt.Fprintf(&rep, "\n  on %s without the rows outside the bound, another plan:\n      %s", r.sides[k].name, indent(plan))
			return done(fmt.Sprintf("not explained: without the rows outside the bound %s's plan changes, so they cannot be shown to have chosen the plan alone", r.sides[k].name))
		case !out.same(outs[k]):
			fmt.Fprintf(&rep, "\n  on %s without the rows outside the bound, its own plan gives %s", r.sides[k].name, out)
			return done(fmt.Sprintf("not explained: on %s the rows outside the bound decide the outcome of its own plan (%s with them, %s without)", r.sides[k].name, outs[k], out))
		}
	}
	fmt.Fprintf(&rep, "\n  without the rows outside the bound, each twin's own plan gives it the same outcome")

	// Pinned plans: each twin's own plan given to both, with the outcome
	// it gave that twin on both, is the counterfactual that puts the
	// difference down to the plan.
	own := plans
	ownOut := outs
	var reproduced [2]int
	same := 0
	var contradict, other []string
	var table strings.Builder
	for _, p := range pinnings {
		plans, outs := run(p.set)
		whose := -1
		for k := range own {
			if plans[0] == own[k] {
				whose = k
			}
		}
		var line string
		switch {
		case plans[0] != plans[1]:
			line = "plans differ"
		case outs[0].same(outs[1]) && whose >= 0:
			same++
			if outs[0].same(ownOut[whose]) {
				reproduced[whose]++
			}
			line = fmt.Sprintf("%s's own plan on both, the same outcome: %s", r.sides[whose].name, outs[0])
		case outs[0].same(outs[1]):
			same++
			line = "another plan, the same on both, the same outcome: " + outs[0].String()
		case whose >= 0:
			line = fmt.Sprintf("%s's own plan on both, but A %s; B %s", r.sides[whose].name, outs[0], outs[1])
			contradict = append(contradict, fmt.Sprintf("\n  pinned to %s (%s), %s's own plan on both twins:\n      %s\n    but A %s; B %s",
				p.name, strings.Join(p.set, ", "), r.sides[whose].name, indent(plans[0]), outs[0], outs[1]))
		default:
			line = fmt.Sprintf("another plan, the same on both, but A %s; B %s", outs[0], outs[1])
			other = append(other, fmt.Sprintf("\n  pinned to %s (%s), a plan neither twin chose, the same on both:\n      %s\n    but A %s; B %s",
				p.name, strings.Join(p.set, ", "), indent(plans[0]), outs[0], outs[1]))
		}
		fmt.Fprintf(&table, "\n    %s: %s", p.name, line)
	}
	rep.WriteString("\n  pinned settings:" + table.String())
	rep.WriteString(strings.Join(contradict, ""))
	if len(other) > 0 {
		at.otherPlanDiffers = len(other)
		fmt.Fprintf(&rep, "\n  note: under %d pinned settings a plan neither twin chose is the same on both and gives them different outcomes "+
			"(not how the agent's answers came about, but worth a look: the heap's layout, which the rows outside the fence shape, "+
			"can decide the order in which the same plan meets the same rows), e.g.%s", len(other), other[0])
	}
	switch {
	case len(contradict) > 0:
		return done(fmt.Sprintf("not explained: under %d pinned settings a twin's own plan, given to both, gives them different outcomes", len(contradict)))
	case same == 0:
		return done("not explained: no pinned setting gives both twins the same plan with the same outcome")
	}
	at.explained = true
	return done(fmt.Sprintf("explained by the plan: the twins' own plans differ and reproduce the agent's outcomes (A %s; B %s), "+
		"the rows outside the bound decide neither twin's outcome beyond its plan, and %d pinned settings give both twins the same plan "+
		"with the same outcome (A's own plan with A's outcome under %d, B's with B's under %d), none a twin's own plan with different outcomes",
		saw[0].outcome, saw[1].outcome, same, reproduced[0], reproduced[1]))
}

func indent(plan string) string { return strings.ReplaceAll(plan, "\n", "\n      ") }

// rerun runs g's SQL once on conn, as the Pilot runs it (READ COMMITTED,
// its pinned session settings, read-only for a read), with the planner
// settings set, and rolls back. It creates, inside the transaction, any
// fence view the target lacks, and first deletes the rows outside the
// bound (ids from outsideIDs) of the tables in drop: a deletion in the
// transaction moves no row and changes no statistics, so the plan stays
// (the caller compares it). It
// returns the plan (EXPLAIN (COSTS OFF), normalized) and the outcome; an
// error is one of the connection, not of the statement.
func rerun(ctx context.Context, conn *pgx.Conn, g *pilot.Guarded, set, drop []string) (string, outcome, error) {
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED"); err != nil {
		return "", outcome{}, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") }()
	path := make([]string, len(sqlcheck.DefaultSearchPath))
	for i, s := range sqlcheck.DefaultSearchPath {
		path[i] = sqlcheck.QuoteIdent(s)
	}
	if _, err := conn.Exec(ctx, `SELECT set_config('search_path', $1, true), set_config('statement_timeout', '5000ms', true),
		set_config('lock_timeout', $2, true), set_config('standard_conforming_strings', 'on', true)`,
		strings.Join(path, ", "), fmt.Sprintf("%dms", probeLockTimeout.Milliseconds())); err != nil {
		return "", outcome{}, err
	}
	for _, v := range g.Views {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pilot.ViewSchema+"."+v.Name).Scan(&exists); err != nil {
			return "", outcome{}, err
		}
		if !exists {
			if _, err := conn.Exec(ctx, v.Create); err != nil {
				return "", outcome{}, fmt.Errorf("fence view %s: %w", v.Name, err)
			}
		}
	}
	for _, tb := range drop {
		if _, err := conn.Exec(ctx, fmt.Sprintf("DELETE FROM public.%s WHERE id >= %d", tb, outsideIDs)); err != nil {
			return "", outcome{}, err
		}
	}
	for _, s := range set {
		if _, err := conn.Exec(ctx, "SET LOCAL "+s); err != nil {
			return "", outcome{}, err
		}
	}
	if g.Kind == sqlcheck.OpSelect {
		if _, err := conn.Exec(ctx, "SET LOCAL transaction_read_only = on"); err != nil {
			return "", outcome{}, err
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) "+g.SQL, pgx.QueryExecModeSimpleProtocol)
	var lines []string
	if err == nil {
		lines, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		// Planning itself can raise (a constant folded at plan time):
		// then that is the plan, and the outcome.
		o, ok := failure(err)
		if !ok {
			return "", outcome{}, err
		}
		return "planning failed: " + o.state, o, nil
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	plan := strings.Join(lines, "\n")
	o, err := runGuarded(ctx, conn, g)
	return plan, o, err
}

// runGuarded runs the guarded SQL and reads its rows as the Pilot does
// (pilot.Pilot.statement): a read up to max_rows and one more to mark
// truncation, a write to the end, so every check guard runs.
func runGuarded(ctx context.Context, conn *pgx.Conn, g *pilot.Guarded) (outcome, error) {
	rows, err := conn.Query(ctx, g.SQL, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		if o, ok := failure(err); ok {
			return o, nil
		}
		return outcome{}, err
	}
	o := outcome{code: "executed"}
	var count int64
	for rows.Next() {
		count++
		if g.Kind == sqlcheck.OpSelect && count > g.MaxRows {
			o.truncated = true
			break
		}
		var cells []string
		for _, v := range rows.RawValues() {
			if v == nil {
				cells = append(cells, "NULL")
			} else {
				cells = append(cells, fmt.Sprintf("%q", v))
			}
		}
		o.rows = append(o.rows, strings.Join(cells, ","))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		if f, ok := failure(err); ok {
			return f, nil
		}
		return outcome{}, err
	}
	if g.Kind == sqlcheck.OpSelect {
		o.n = int64(len(o.rows))
		return o, nil
	}
	// A write's RETURNING rows come in the executor's order.
	slices.Sort(o.rows)
	o.n = rows.CommandTag().RowsAffected()
	if o.n > g.MaxRows {
		return outcome{code: pilot.RefusedMaxRows, n: o.n}, nil
	}
	return o, nil
}

// failure classes a statement's error as the Pilot does
// (pilot.statementRefusal), keeping the SQLSTATE class of a target error.
func failure(err error) (outcome, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return outcome{}, false
	}
	o := outcome{detail: pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"}
	switch {
	case pgErr.Code == pilot.ViolationSQLState && strings.Contains(pgErr.Message, "check"):
		o.code, o.state = pilot.RefusedCheckRow, "HM001 check"
	case pgErr.Code == pilot.ViolationSQLState:
		o.code, o.state = pilot.RefusedFence, "HM001 fence"
	case pgErr.Code == pilot.MaxRowsSQLState:
		// The row cap, as the write's (max_rows+1)-th row is written.
		o.code, o.state = pilot.RefusedMaxRows, "HM002"
	case pgErr.Code == "57014" || pgErr.Code == "55P03":
		o.code, o.state = pilot.RefusedTimeout, pgErr.Code
	default:
		o.code, o.state = pilot.RefusedDatabase, "class "+pgErr.Code[:2]
	}
	return o, true
}

// TestPlanAttributionCatchesALeak is the attribution's negative control:
// guarded SQL that reads a fenced table past its fence (as a broken Pilot
// might), on twins whose plans differ with the rows outside the fence, is
// never put down to the plan. With no row outside the fence, A scans the
// table and the cast meets only the region's dates; B, with 2000 rows
// outside it, takes the primary key and the cast meets its words.
func TestPlanAttributionCatchesALeak(t *testing.T) {
	srv := shared.Server(t)
	tb := &table{name: "t0", region: 30, cols: []column{
		{name: "id", typ: "bigint"}, {name: "s1", typ: "text", flavor: "date"}, {name: "g2", typ: "bigint"}}}
	tb.rules = map[string]*rule{"select": {Op: "select", Table: "public.t0", Columns: []string{"id", "s1"},
		Fence: "g2 > 10", MaxRows: 100, reads: []string{"g2"}}}
	markFree(tb)
	hidden := &table{name: "ledger", cols: []column{{name: "id", typ: "bigint"}, {name: "i1", typ: "integer"}}}
	w := &world{tables: []*table{tb}, hidden: hidden}
	var region, outside []rowValues
	for i := 1; i <= tb.region; i++ {
		region = append(region, rowValues{strconv.Itoa(i), quote(fmt.Sprintf("2022-03-%02d", i)), strconv.Itoa(20 + i)})
	}
	for i := range 2000 {
		outside = append(outside, rowValues{strconv.Itoa(outsideIDs + i), quote("abc"), "0"})
	}
	w.rows[0] = []string{insertSQL(tb, region)}
	w.rows[1] = []string{insertSQL(tb, region), insertSQL(tb, outside)}
	dsns := newTwins(t, srv, ddl(w.tables, w.hidden))
	r := &round{w: w, dsns: dsns}
	for i, dsn := range dsns {
		loadRows(t, dsn, w.rows[i])
		r.sides[i] = &side{name: []string{"A", "B"}[i], dsn: dsn}
	}
	leak := &pilot.Guarded{Kind: sqlcheck.OpSelect, MaxRows: 100,
		SQL: fmt.Sprintf("SELECT id FROM public.t0 WHERE id < %d AND s1::date > '2000-01-01' ORDER BY id LIMIT 101", outsideIDs+50)}
	at := r.attributeGuarded(t, leak, [2]agentView{{outcome: "executed, 30 rows", ok: true}, {outcome: pilot.RefusedDatabase, ok: true}})
	t.Log(at.report)
	if !at.plansDiffer {
		t.Fatalf("the control no longer exercises the attribution: the twins' plans of the leaky SQL are the same")
	}
	if at.explained {
		t.Fatalf("a read past the fence was put down to the plan")
	}
	if !strings.Contains(at.why, "the rows outside the bound decide the outcome") {
		t.Errorf("the leak was not explained, but not for the reason expected (the rows outside the bound decide B's outcome): %s", at.why)
	}
}
