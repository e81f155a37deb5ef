package noninterference_test

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

var shared pgtmptest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

const (
	defaultSeed  = 20261201
	defaultPairs = 1200
	// perRound is the number of statements of one round: one schema, one
	// delegation, one pair of targets and control planes.
	perRound = 100
	// mcpShare is the percentage of statements also sent over MCP.
	mcpShare = 30
	// maxReported caps the differences printed in full.
	maxReported = 10
	// sideStream seeds the side channel statements' stream (with the seed).
	sideStream = 0x51de
)

type config struct {
	seed  uint64
	pairs int
	// only, when not negative, runs that round alone (its statements are
	// the same as in a whole run: each round has its own stream).
	only    int
	verbose bool
}

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{seed: defaultSeed, pairs: defaultPairs, only: -1, verbose: os.Getenv("HARBORMASTER_NONINTERFERENCE_VERBOSE") != ""}
	if s := os.Getenv("HARBORMASTER_NONINTERFERENCE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HARBORMASTER_NONINTERFERENCE_SEED: %v", err)
		}
		c.seed = v
	}
	if s := os.Getenv("HARBORMASTER_NONINTERFERENCE_PAIRS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("HARBORMASTER_NONINTERFERENCE_PAIRS: want a positive number, have %q", s)
		}
		c.pairs = v
	}
	if s := os.Getenv("HARBORMASTER_NONINTERFERENCE_ROUND"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			t.Fatalf("HARBORMASTER_NONINTERFERENCE_ROUND: want a round number, have %q", s)
		}
		c.only = v
	}
	return c
}

// TestNonInterference checks invariant 10 end to end: twin targets that
// differ only outside the agent's bound, two whole control planes, the
// same statements, identical observations. See the package doc.
func TestNonInterference(t *testing.T) {
	cfg := loadConfig(t)
	if testing.Short() {
		cfg.pairs = min(cfg.pairs, perRound)
	}
	// A round is one schema, one delegation, one pair of targets and
	// control planes, and its own random stream: round r of a seed is the
	// same whether it runs alone or in a whole run.
	type plan struct{ round, n int }
	var plans []plan
	for r := 0; r*perRound < cfg.pairs; r++ {
		plans = append(plans, plan{r, min(perRound, cfg.pairs-r*perRound)})
	}
	if cfg.only >= 0 {
		plans = []plan{{cfg.only, perRound}}
	}
	t.Logf("seed %d (HARBORMASTER_NONINTERFERENCE_SEED=%d to repeat), %d statement pairs in %d rounds (HARBORMASTER_NONINTERFERENCE_PAIRS, HARBORMASTER_NONINTERFERENCE_ROUND)",
		cfg.seed, cfg.seed, cfg.pairs, len(plans))
	srv := shared.Server(t)
	keys := gatewaytest.NewKeys(t)
	tl := newTally()
	start := time.Now()
	for _, p := range plans {
		t.Run(fmt.Sprintf("round%03d", p.round), func(t *testing.T) {
			runRound(t, cfg, srv, keys, p.round, p.n, tl)
		})
	}
	tl.report(t, time.Since(start))
	if tl.sideDifferences > 0 {
		t.Errorf("after %d of %d hostile statements the observer's probes (row locks, sequences, the agent's surface) differed between the twins (classes above)",
			tl.sideDifferences, tl.observed)
	}
	if tl.differences > 0 {
		t.Errorf("%d of %d statement pairs gave the agent different observations on the two targets that the plan does not explain (%d classes above); "+
			"repeat one round with HARBORMASTER_NONINTERFERENCE_SEED=%d HARBORMASTER_NONINTERFERENCE_ROUND=<round> HARBORMASTER_NONINTERFERENCE_VERBOSE=1",
			tl.differences, tl.pairs, len(tl.classes), cfg.seed)
	}
}

// round is one round's twins: the world, and a side for each target.
type round struct {
	cfg   config
	w     *world
	dsns  [2]string
	sides [2]*side
	// outside holds, per side, the digest of every row outside the bound
	// and of the hidden table when the round starts.
	outside [2]string
}

func runRound(t *testing.T, cfg config, srv *pgtmp.Server, keys *gatewaytest.Keys, idx, n int, tl *tally) {
	ctx := t.Context()
	rng := mrand.New(mrand.NewPCG(cfg.seed, uint64(idx)))
	tables, hidden := drawSchema(rng)
	schema := ddl(tables, hidden) + notesDDL
	dsns := newTwins(t, srv, schema)
	admin, err := pgx.Connect(ctx, dsns[0])
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pilot.LoadCatalog(ctx, admin, sqlcheck.DefaultSearchPath)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, rng, admin, cat, tables, hidden, time.Now().Add(48*time.Hour).Truncate(time.Hour))
	admin.Close(ctx)
	r := startRound(t, cfg, keys, tl, w, dsns, schema)
	g := &stmtGen{rng: rng, w: w}
	// The side channel statements have a stream of their own.
	sg := &sideGen{rng: mrand.New(mrand.NewPCG(cfg.seed^sideStream, uint64(idx))), w: w}
	for i := range n {
		var st stmt
		if sg.rng.IntN(100) < sideShare {
			st = sg.next()
		} else {
			st = g.next()
		}
		viaMCP := rng.IntN(100) < mcpShare
		r.pair(t, tl, fmt.Sprintf("round %d", idx), i, st, viaMCP)
	}
	r.finish(t)
}

// newTwins creates two databases with the same schema, initialized as
// targets.
func newTwins(t *testing.T, srv *pgtmp.Server, schema string) [2]string {
	t.Helper()
	dsns := [2]string{pgtmptest.NewDatabase(t, srv), pgtmptest.NewDatabase(t, srv)}
	for _, dsn := range dsns {
		loadSchema(t, dsn, schema)
	}
	return dsns
}

// startRound loads each twin's rows, checks the premise, starts a control
// plane for each, gives both the delegation, signed once, and compares
// what the agent can learn of its scope.
func startRound(t *testing.T, cfg config, keys *gatewaytest.Keys, tl *tally, w *world, dsns [2]string, schema string) *round {
	t.Helper()
	ctx := t.Context()
	for i, dsn := range dsns {
		loadRows(t, dsn, w.rows[i])
	}
	r := &round{cfg: cfg, w: w, dsns: dsns}
	r.checkRegion(t, "at the start")
	for i, dsn := range dsns {
		r.outside[i] = outsideDigest(t, dsn, w)
	}
	tl.world(w)
	if cfg.verbose {
		t.Logf("schema:\n%s\ndelegation:\n%s", schema, w.dlg)
		for _, tb := range w.tables {
			t.Logf("%s: region of %d rows, free columns %v, rows outside the bound: %d on A, %d on B",
				tb.name, tb.region, sortedKeys(tb.free), w.outside[0][tb.name], w.outside[1][tb.name])
		}
	}

	for i, name := range []string{"A", "B"} {
		r.sides[i] = startSide(t, name, dsns[i], keys)
	}
	canon := [2][]byte{}
	for i, s := range r.sides {
		canon[i] = gatewaytest.Canonical(t, w.dlg, s.sys.Pilot.Catalog())
	}
	if !bytes.Equal(canon[0], canon[1]) {
		t.Fatalf("noninterference: the delegation compiles differently on the twins:\n%s\n%s", canon[0], canon[1])
	}
	sig := gatewaytest.Sign(t, keys.Grantor, canon[0])
	for _, s := range r.sides {
		// The grantor's answer is not the agent's to see: only its status
		// matters here.
		ex, _, err := s.do(ctx, "POST", "/v1/delegations", "", map[string]string{"yaml": string(w.dlg), "signature": string(sig)})
		if err != nil {
			t.Fatal(err)
		}
		if ex.Status != 201 {
			t.Fatalf("noninterference: the delegation was refused on %s: %d %s", s.name, ex.Status, short(ex.Body))
		}
	}

	var scopes [2]map[string]any
	for i, s := range r.sides {
		var err error
		if scopes[i], err = s.scope(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sa, sb := normalize(scopes[0], false), normalize(scopes[1], false)
	var diffs []string
	if diff(sa, sb, "", &diffs, 12); len(diffs) > 0 {
		tl.difference(t, "the agent's scope (delegations, describe_tables)", "the agent's scope differs", diffs, sa, sb)
	}
	return r
}

// finish checks, after the round's statements, that the premise still
// holds and that nothing outside the bound changed.
func (r *round) finish(t *testing.T) {
	t.Helper()
	r.checkRegion(t, "after the round")
	for i, s := range r.sides {
		if d := outsideDigest(t, s.dsn, r.w); d != r.outside[i] {
			t.Errorf("noninterference: on %s, rows outside the bound (ids from %d, outside every fence) or of the table no rule names changed during the round: a write reached rows no rule admits", s.name, outsideIDs)
		}
	}
}

// pair runs one statement on both sides, at the same time, and compares
// what the agent saw, and what the observer's probes saw after a hostile
// statement (returned, nil after others).
func (r *round) pair(t *testing.T, tl *tally, label string, i int, st stmt, viaMCP bool) (after [2]map[string]any) {
	t.Helper()
	answers, after, cost, err := r.observePair(t.Context(), st, viaMCP)
	if err != nil {
		t.Fatalf("noninterference: %s: %v", st.sql, err)
	}
	tl.observerTime += cost
	tl.record(st, answers)
	if r.cfg.verbose {
		t.Logf("%s statement %d (%s, inside=%v, mcp=%v): %s\n  -> %s", label, i, st.op, st.inside, viaMCP, st.sql, verdict(answers[0]))
		if after[0] != nil {
			t.Logf("  observer, A: %s\n  observer, B: %s", probeGist(after[0]), probeGist(after[1]))
		}
	}
	what := fmt.Sprintf("%s statement %d: %s", label, i, st.sql)
	if after[0] != nil {
		// The observer's probes, compared as answers are.
		tl.observed++
		oa, ob := normalize(after[0], false), normalize(after[1], false)
		var diffs []string
		if diff(oa, ob, "", &diffs, 12); len(diffs) > 0 {
			tl.sideChannel(t, what, sideProbes(diffs), diffs, oa, ob)
		}
	}
	a, b := normalize(answers[0].obs, st.write()), normalize(answers[1].obs, st.write())
	var diffs []string
	diff(a, b, "", &diffs, 12)
	if len(diffs) == 0 {
		return after
	}
	// A human's look first, then the evidence on the plan.
	explanation, executed := r.explainDifference(t, what, answers)
	at := r.attribute(t, answers, executed)
	explanation += "\n  " + at.report
	cl := class(answers[0], answers[1], diffs)
	if at.explained {
		tl.planChannel(t, what, cl, diffs, explanation, at.otherPlanDiffers > 0)
		return after
	}
	if at.plansDiffer {
		cl = "[plans differ, not explained by the plan] " + cl
	}
	if tl.difference(t, what, cl, diffs, a, b) {
		t.Log(explanation)
	} else {
		t.Logf("%s: %s", what, at.why)
	}
	return after
}

// explainDifference renders what humans may see of both requests (the
// target's error text, from the request and the logbook) and whether the
// region's rows lie in the same physical order on both sides. It returns
// the guarded SQL each side's Pilot ran, from the logbook ("" where it
// ran none to the end).
func (r *round) explainDifference(t *testing.T, what string, answers [2]answer) (string, [2]string) {
	t.Helper()
	ctx := t.Context()
	var views, executed [2]string
	for k, s := range r.sides {
		views[k], executed[k] = s.humanView(ctx, answers[k].requestID)
	}
	msg := fmt.Sprintf("for humans only, to explain the difference above (%s):\n  A: %s\n  B: %s", what, views[0], views[1])
	if answers[0].mcpRequestID != "" || answers[1].mcpRequestID != "" {
		// The statement ran a second time, over MCP.
		var mcp [2]string
		for k, s := range r.sides {
			mcp[k], _ = s.humanView(ctx, answers[k].mcpRequestID)
		}
		msg += fmt.Sprintf("\n  over MCP, A: %s\n  over MCP, B: %s", mcp[0], mcp[1])
	}
	if order := r.physicalOrder(t); order != "" {
		msg += "\n  " + order
	}
	return msg, executed
}

// guard is the statement's guarded SQL as the Pilot builds it, nil when
// the Pilot would not run it.
func (r *round) guard(t *testing.T, sql string) *pilot.Guarded {
	t.Helper()
	cat := r.sides[0].sys.Pilot.Catalog()
	d, err := bound.Parse(r.w.dlg, "noninterference.yaml")
	if err != nil {
		return nil
	}
	b, rep := bound.Compile(d, cat, bound.Options{})
	if !rep.Signable {
		return nil
	}
	rules, err := b.CheckRules()
	if err != nil {
		return nil
	}
	a := sqlcheck.Analyze(sql, cat, sqlcheck.Limits{})
	dec := sqlcheck.Check(a, rules)
	g, err := pilot.BuildGuards(a, dec, b, cat)
	if err != nil {
		return nil
	}
	return g
}

// template is the text side k's Pilot runs for sql on its one-round-trip
// path (a template whose constants are bound as parameters), "" when it
// takes the literal path.
func (r *round) template(t *testing.T, k int, sql string) string {
	t.Helper()
	p := r.sides[k].sys.Pilot
	d, err := bound.Parse(r.w.dlg, "noninterference.yaml")
	if err != nil {
		return ""
	}
	b, rep := bound.Compile(d, p.Catalog(), bound.Options{})
	if !rep.Signable {
		return ""
	}
	canon, err := b.Canonical()
	if err != nil {
		return ""
	}
	text, _, ok := p.TemplateOf(sqlcheck.Analyze(sql, p.Catalog(), sqlcheck.Limits{}).Canonical, canon)
	if !ok {
		return ""
	}
	return text
}

// physicalOrder compares the order in which a scan meets the region's rows
// on each side (by ctid): the rows are the same, but where a write puts
// their new versions depends on the pages the rows outside the bound
// fill. "" when the order is the same everywhere.
func (r *round) physicalOrder(t *testing.T) string {
	t.Helper()
	var out []string
	for _, tb := range r.w.tables {
		q := fmt.Sprintf("SELECT coalesce(string_agg(id::text, ' ' ORDER BY ctid), '') FROM public.%s WHERE id < %d", tb.name, outsideIDs)
		a, b := queryString(t, r.dsns[0], q), queryString(t, r.dsns[1], q)
		if a != b {
			out = append(out, fmt.Sprintf("%s: the region's rows lie in a different physical order on each side (by ctid, A: %s; B: %s)", tb.name, a, b))
		}
	}
	return strings.Join(out, "\n  ")
}

// checkRegion checks the premise: every row of the region, in every column
// but the free ones, is the same on both sides.
func (r *round) checkRegion(t *testing.T, when string) {
	t.Helper()
	if d := r.regionDiff(t); d != "" {
		t.Errorf("noninterference: premise broken %s: %s", when, d)
	}
}

// regionDiff says where the region differs between the sides, "" where
// it does not.
func (r *round) regionDiff(t *testing.T) string {
	t.Helper()
	var out []string
	for _, tb := range r.w.tables {
		var cols []string
		for _, c := range tb.cols {
			if !tb.free[c.name] {
				cols = append(cols, c.name)
			}
		}
		q := fmt.Sprintf("SELECT coalesce(string_agg(r, E'\\n' ORDER BY id), '') FROM (SELECT id, ROW(%s)::text AS r FROM public.%s WHERE id < %d) s",
			strings.Join(cols, ", "), tb.name, outsideIDs)
		var got [2]string
		for i, dsn := range r.dsns {
			got[i] = queryString(t, dsn, q)
		}
		if got[0] != got[1] {
			out = append(out, fmt.Sprintf("the region of %s differs between the targets\nA:\n%s\nB:\n%s", tb.name, got[0], got[1]))
		}
	}
	if r.w.notes {
		// The observer's table, every row and its sequence.
		q := "SELECT (SELECT last_value FROM public.notes_id_seq)::text || E'\\n' || coalesce(string_agg(t::text, E'\\n' ORDER BY id), '') FROM public.notes t"
		if a, b := queryString(t, r.dsns[0], q), queryString(t, r.dsns[1], q); a != b {
			out = append(out, fmt.Sprintf("the observer's table notes (or its sequence, first line) differs between the targets\nA:\n%s\nB:\n%s", a, b))
		}
	}
	return strings.Join(out, "\n")
}

// outsideDigest digests the rows outside the region and the table no rule
// names: nothing the agent does may change them.
func outsideDigest(t *testing.T, dsn string, w *world) string {
	t.Helper()
	var b strings.Builder
	for _, tb := range w.tables {
		b.WriteString(queryString(t, dsn, fmt.Sprintf("SELECT count(*)::text || ' ' || coalesce(md5(string_agg(t::text, E'\\n' ORDER BY id)), '') FROM public.%s t WHERE id >= %d", tb.name, outsideIDs)))
		b.WriteString(";")
	}
	b.WriteString(queryString(t, dsn, fmt.Sprintf("SELECT count(*)::text || ' ' || coalesce(md5(string_agg(t::text, E'\\n' ORDER BY id)), '') FROM public.%s t", w.hidden.name)))
	return b.String()
}

func queryString(t *testing.T, dsn, q string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, q).Scan(&s); err != nil {
		t.Fatalf("noninterference: %s: %v", q, err)
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// tally counts what the run did and found, across rounds.
type tally struct {
	// differences are those the plan does not explain: each fails the
	// test. explained are those it does (the plan channel, outside the
	// guarantee), counted and logged.
	pairs, differences, explained int
	// observed counts the pairs the observer probed after (hostile
	// statements), sideDifferences those where its probes differed, and
	// sideProbes those by probe (the lock probe, the sequence probe, each
	// path of the surface).
	observed, sideDifferences int
	sideProbes                map[string]int
	// observerTime is what the observer added to the run's time.
	observerTime time.Duration
	// otherPlanDiffers counts the explained differences with a note: a
	// pinned plan neither twin chose, the same on both, gave different
	// outcomes.
	otherPlanDiffers            int
	reported, explainedReported int
	classes, planClasses        map[string]*diffClass
	verdicts                    map[string]int // A's verdict gist -> count
	ops                         map[string]int // op/inside -> count
	staticInside                map[string]int // inside statements the static check referred, by reason
	staticExample               map[string]string
	times                       [2]map[string][]time.Duration // side -> outcome -> answer times
	// What differed between the twins: tables, tables with rows outside
	// the bound, those with a different number of them on each side, and
	// tables with free columns.
	tables, hiding, uneven, free int
	outside                      [2]int // rows outside the bound, all rounds
}

type diffClass struct {
	count   int
	example string
}

func newTally() *tally {
	return &tally{classes: map[string]*diffClass{}, planClasses: map[string]*diffClass{}, verdicts: map[string]int{}, ops: map[string]int{}, sideProbes: map[string]int{},
		staticInside: map[string]int{}, staticExample: map[string]string{},
		times: [2]map[string][]time.Duration{{}, {}}}
}

func (tl *tally) world(w *world) {
	for _, tb := range w.tables {
		tl.tables++
		a, b := w.outside[0][tb.name], w.outside[1][tb.name]
		tl.outside[0] += a
		tl.outside[1] += b
		if a+b > 0 {
			tl.hiding++
		}
		if a != b {
			tl.uneven++
		}
		if len(tb.free) > 0 {
			tl.free++
		}
	}
}

func (tl *tally) record(st stmt, a [2]answer) {
	tl.pairs++
	tl.verdicts[verdict(a[0])]++
	if st.channel != "" {
		tl.ops["side channel: "+st.channel]++
	} else {
		tl.ops[fmt.Sprintf("%s inside=%v", st.op, st.inside)]++
	}
	if st.inside && a[0].outcome == "referred" && a[0].path == "" {
		r := a[0].firstReason
		if i := strings.Index(r, " ["); i >= 0 {
			r = r[i:]
		}
		tl.staticInside[r]++
		if tl.staticExample[r] == "" {
			tl.staticExample[r] = st.sql + "\n      " + a[0].firstReason
		}
	}
	for i := range a {
		// Referred by the static check, or by the Pilot after running.
		o := a[i].outcome
		if a[i].path != "" {
			o += "/" + a[i].path
		}
		tl.times[i][o] = append(tl.times[i][o], a[i].elapsed)
		tl.times[i]["all"] = append(tl.times[i]["all"], a[i].elapsed)
	}
}

// difference counts and reports a difference: the statement, its class,
// both observations, a minimal diff. It reports whether it was reported
// in full (the first maxReported are).
func (tl *tally) difference(t *testing.T, what, cl string, diffs []string, a, b any) bool {
	t.Helper()
	tl.differences++
	c := tl.classes[cl]
	if c == nil {
		c = &diffClass{example: what + "\n      " + strings.Join(diffs, "\n      ")}
		tl.classes[cl] = c
	}
	c.count++
	if tl.reported >= maxReported {
		t.Errorf("difference (%s): %s", cl, what)
		return false
	}
	tl.reported++
	t.Errorf("the agent's observations differ between the twins\n  %s\n  class: %s\n  diff:\n    %s\n  A:\n    %s\n  B:\n    %s",
		what, cl, strings.Join(diffs, "\n    "), pretty(a), pretty(b))
	return true
}

// sideChannel counts and reports a difference in what the observer's
// probes saw after a statement: a side channel. It fails the test as a
// difference in answers does.
func (tl *tally) sideChannel(t *testing.T, what string, probes, diffs []string, a, b any) {
	t.Helper()
	tl.sideDifferences++
	for _, p := range probes {
		tl.sideProbes[p]++
	}
	cl := "side channel: " + strings.Join(probes, ", ")
	c := tl.classes[cl]
	if c == nil {
		c = &diffClass{example: what + "\n      " + strings.Join(diffs, "\n      ")}
		tl.classes[cl] = c
	}
	c.count++
	if tl.reported >= maxReported {
		t.Errorf("difference (%s): %s", cl, what)
		return
	}
	tl.reported++
	t.Errorf("the observer's probes after a statement differ between the twins\n  %s\n  class: %s\n  diff:\n    %s\n  A:\n    %s\n  B:\n    %s",
		what, cl, strings.Join(diffs, "\n    "), pretty(a), pretty(b))
}

// planChannel counts and logs a difference the plan explains: the
// statement, its class, the diff and the evidence (the first maxReported
// in full).
func (tl *tally) planChannel(t *testing.T, what, cl string, diffs []string, evidence string, otherPlanDiffers bool) {
	t.Helper()
	tl.explained++
	if otherPlanDiffers {
		tl.otherPlanDiffers++
	}
	c := tl.planClasses[cl]
	if c == nil {
		c = &diffClass{example: what + "\n      " + strings.Join(diffs, "\n      ")}
		tl.planClasses[cl] = c
	}
	c.count++
	if tl.explainedReported >= maxReported {
		t.Logf("difference explained by the plan (plan channel, outside the guarantee; %s): %s", cl, what)
		return
	}
	tl.explainedReported++
	t.Logf("the agent's observations differ between the twins, and the plan explains it (plan channel, outside the guarantee: docs/security.md)\n  %s\n  class: %s\n  diff:\n    %s\n  %s",
		what, cl, strings.Join(diffs, "\n    "), evidence)
}

func (tl *tally) report(t *testing.T, elapsed time.Duration) {
	t.Helper()
	t.Logf("%d statement pairs in %s, %d with different observations: %d explained by the plan (the plan channel, a known limit), %d not explained",
		tl.pairs, elapsed.Round(time.Millisecond), tl.differences+tl.explained, tl.explained, tl.differences)
	t.Logf("observer (side channels: row locks, sequences, the agent's surface): probed after %d hostile statements, %d with different probes%s; it took %s of the run",
		tl.observed, tl.sideDifferences, strings.ReplaceAll(" ("+counts(tl.sideProbes)+")", " ()", ""), tl.observerTime.Round(time.Millisecond))
	t.Logf("twins: %d tables named by rules, %d with rows outside the bound (%d with a different number of them on each side; %d rows on A, %d on B in all), %d with free columns; and in every round a table no rule names, its contents different",
		tl.tables, tl.hiding, tl.uneven, tl.outside[0], tl.outside[1], tl.free)
	t.Logf("statements drawn: %s", counts(tl.ops))
	t.Logf("answers (side A): %s", counts(tl.verdicts))
	if len(tl.staticInside) > 0 {
		var b strings.Builder
		for _, k := range sortedCounts(tl.staticInside) {
			fmt.Fprintf(&b, "\n  %d x%s\n      e.g. %s", tl.staticInside[k], k, tl.staticExample[k])
		}
		t.Logf("statements drawn inside the bound that the static check referred (the generator's misses):%s", b.String())
	}
	if len(tl.planClasses) > 0 {
		t.Logf("known limit, the plan channel (outside the guarantee, docs/security.md): differences the plan explains, by class:%s", classList(tl.planClasses))
		if tl.otherPlanDiffers > 0 {
			t.Logf("%d of the differences the plan explains have a note: under some pinned setting a plan neither twin chose, the same on both, "+
				"gave them different outcomes (the heap's layout deciding the order in which the same plan meets the same rows); see their evidence", tl.otherPlanDiffers)
		}
	}
	if len(tl.classes) > 0 {
		t.Logf("differences the plan does not explain, by class:%s", classList(tl.classes))
	}
	t.Logf("answer times of POST /v1/statements (reported, not asserted: timing is outside the guarantee):\n%s", tl.timeTable())
}

// classList lists classes, the largest first, with an example each.
func classList(classes map[string]*diffClass) string {
	var b strings.Builder
	names := make([]string, 0, len(classes))
	for k := range classes {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if classes[names[i]].count != classes[names[j]].count {
			return classes[names[i]].count > classes[names[j]].count
		}
		return names[i] < names[j]
	})
	for _, k := range names {
		fmt.Fprintf(&b, "\n  %d x %s\n      e.g. %s", classes[k].count, k, classes[k].example)
	}
	return b.String()
}

func counts(m map[string]int) string {
	var parts []string
	for _, k := range sortedCounts(m) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedCounts(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// timeTable lays out p50/p90/p99 per outcome, the two targets side by side.
func (tl *tally) timeTable() string {
	outcomes := map[string]bool{}
	for _, m := range tl.times {
		for k := range m {
			outcomes[k] = true
		}
	}
	names := sortedKeys(outcomes)
	names = append(slices.DeleteFunc(names, func(s string) bool { return s == "all" }), "all")
	var b strings.Builder
	fmt.Fprintf(&b, "  %-18s %6s | %9s %9s %9s | %9s %9s %9s\n", "outcome", "n", "A p50", "A p90", "A p99", "B p50", "B p90", "B p99")
	for _, o := range names {
		fmt.Fprintf(&b, "  %-18s %6d |", o, len(tl.times[0][o]))
		for i := range 2 {
			d := slices.Clone(tl.times[i][o])
			slices.Sort(d)
			for _, p := range []float64{0.50, 0.90, 0.99} {
				fmt.Fprintf(&b, " %9s", percentile(d, p))
			}
			if i == 0 {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return fmt.Sprintf("%.1fms", float64(sorted[i].Microseconds())/1000)
}
