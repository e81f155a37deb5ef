package noninterference_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// The observer: side channels (issue 22).
//
// An answer is not all an agent sees of a statement. Whatever the system
// does with it afterwards, or while answering, can show in what the agent
// does next: a row lock held by anything that runs the statement makes
// the agent's own in-bound write of that row wait, and time out; a
// sequence drawn from moves the id the agent's next insert gets back; a
// process endpoint on the agent's listener shows memory and counters. So
// after each hostile statement (drawn to step outside the bound, referred
// or not) the observer runs short in-bound probes on both twins, as the
// agent, and compares what they return as answers are compared:
//
//   - the lock probe: an UPDATE of every row of the probe table the
//     hostile statement could have locked (notes, rows 1..5), through the
//     gateway, under the Pilot's lock_timeout (probeLockTimeout here): a
//     row another transaction holds answers "timeout" instead of
//     "executed". A lock is only held while what takes it runs, so for a
//     statement drawn to lock (stmt.lock) the probe also runs at fixed
//     times while the statement is being answered and just after
//     (lockProbeAt), and such statements hold their locks long enough
//     (a slow RETURNING, sideGen);
//   - the sequence probe: an INSERT ... RETURNING id into the probe table,
//     whose id is a bigserial; its delta from the previous probe's id is
//     compared (the id itself would repeat one difference forever);
//   - the agent's reachable surface: GET /metrics, /debug/pprof/ and
//     /debug/vars (with the agent's token and without), the humans' routes
//     with the agent's token (the queue, a request's approval, note and
//     preview), and the agent's own request again, after the probes.
//
// The probe table is the same on both twins and named by rules of its
// own (select id and body, update body, insert body): the observer's
// writes keep it equal, and its rows and sequence are part of the region
// checked after every round. The number of probes is fixed, so both
// twins get the same writes whatever the timing.

const (
	// notesRegion is the number of rows of the probe table at the start.
	notesRegion = 5
	// probeLockTimeout is the Pilot's lock_timeout in these tests: an
	// in-bound write that waits for a row lock longer answers "timeout".
	probeLockTimeout = 200 * time.Millisecond
	// lockProbeSQL and seqProbeSQL are the agent's own in-bound probes.
	lockProbeSQL = "UPDATE notes SET body = body WHERE id BETWEEN 1 AND 5"
	seqProbeSQL  = "INSERT INTO notes (body) VALUES ('probe') RETURNING id"
)

// notesDDL creates the probe table; notesRows fills it alike on both
// twins (drawing 1..5 from its sequence).
const (
	notesDDL  = "CREATE TABLE public.notes (id bigserial PRIMARY KEY, body text) WITH (autovacuum_enabled = false);\n"
	notesRows = "INSERT INTO public.notes (body) SELECT 'note ' || g FROM generate_series(1, 5) g"
)

// lockProbeAt are the times, from when a statement drawn to lock is sent,
// at which the lock probe runs while it is being answered: the rows it
// would lock are held from a few milliseconds after it is sent (after the
// answer, by whatever runs it in the background) for the second or so its
// slow RETURNING takes.
var lockProbeAt = []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 400 * time.Millisecond}

// notesRules are the probe table's rules: the agent may read it, update
// its body and insert a body (the id is the sequence's).
func notesRules() []*rule {
	return []*rule{
		{Op: "select", Table: "public.notes", Columns: []string{"id", "body"}},
		{Op: "update", Table: "public.notes", Columns: []string{"body"}, MaxRows: 10},
		{Op: "insert", Table: "public.notes", Columns: []string{"body"}, MaxRows: 1},
	}
}

// surfacePaths are the agent's reachable surface beyond the statement
// path: process endpoints, and the humans' routes with the agent's token.
// {id} is the hostile statement's request.
var surfacePaths = []struct {
	method, path string
	token        bool
}{
	{http.MethodGet, "/metrics", true},
	{http.MethodGet, "/metrics", false},
	{http.MethodGet, "/debug/pprof/", true},
	{http.MethodGet, "/debug/vars", true},
	{http.MethodGet, "/v1/queue", true},
	{http.MethodGet, "/v1/requests/{id}/approval", true},
	{http.MethodGet, "/v1/requests/{id}/note", true},
	{http.MethodPost, "/v1/requests/{id}/preview", true},
	{http.MethodGet, "/v1/requests/{id}", true},
}

// lockProbes runs the lock probe at lockProbeAt from start, and returns
// what each answered.
func (s *side) lockProbes(ctx context.Context, start time.Time) ([]any, error) {
	var out []any
	for _, at := range lockProbeAt {
		if d := time.Until(start.Add(at)); d > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
		}
		ex, err := s.probe(ctx, lockProbeSQL)
		if err != nil {
			return nil, err
		}
		out = append(out, ex)
	}
	return out, nil
}

// probe sends an in-bound statement as the agent.
func (s *side) probe(ctx context.Context, sql string) (exchange, error) {
	ex, _, err := s.do(ctx, http.MethodPost, "/v1/statements", gatewaytest.AgentToken, map[string]string{"target": gatewaytest.Target, "sql": sql})
	return ex, err
}

// seqProbe inserts a row into the probe table and replaces the id it
// returns by its delta from the previous probe's (notesRegion at first).
func (s *side) seqProbe(ctx context.Context) (exchange, error) {
	ex, err := s.probe(ctx, seqProbeSQL)
	if err != nil {
		return ex, err
	}
	body, _ := ex.Body.(map[string]any)
	rows, _ := body["rows"].([]any)
	if len(rows) != 1 {
		return ex, nil
	}
	row, _ := rows[0].(map[string]any)
	n, ok := row["id"].(json.Number)
	if !ok {
		return ex, nil
	}
	id, err := n.Int64()
	if err != nil {
		return ex, nil
	}
	last := s.lastNote
	if last == 0 {
		last = notesRegion
	}
	s.lastNote = id
	row["id"] = fmt.Sprintf("the previous probe's + %d", id-last)
	return ex, nil
}

// observeAfter runs the probes that follow a hostile statement: the lock
// probe once more, the sequence probe, and the agent's surface. locks are
// the lock probes run while it was answered (nil for none).
func (s *side) observeAfter(ctx context.Context, requestID string, locks []any) (map[string]any, error) {
	out := map[string]any{}
	ex, err := s.probe(ctx, lockProbeSQL)
	if err != nil {
		return nil, err
	}
	out["lock probe"] = append(locks, ex)
	if out["sequence probe"], err = s.seqProbe(ctx); err != nil {
		return nil, err
	}
	for _, p := range surfacePaths {
		path := p.path
		if strings.Contains(path, "{id}") {
			if requestID == "" {
				continue
			}
			path = strings.ReplaceAll(path, "{id}", requestID)
		}
		token, key := "", "surface "+p.method+" "+p.path
		if p.token {
			token = gatewaytest.AgentToken
		} else {
			key += " (no token)"
		}
		var body any
		if p.method == http.MethodPost {
			body = map[string]any{}
		}
		if out[key], _, err = s.do(ctx, p.method, path, token, body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// observePair sends st on both sides at the same time, as pair does, with
// the observer around it when st is hostile: the lock probes while it is
// answered (a statement drawn to lock), then observeAfter. after is nil
// for a statement drawn inside the bound; cost is how much longer than
// the statement's own observation the observer took (the slower side's).
func (r *round) observePair(ctx context.Context, st stmt, viaMCP bool) (answers [2]answer, after [2]map[string]any, cost time.Duration, err error) {
	var errs [2]error
	var costs [2]time.Duration
	var wg sync.WaitGroup
	for k, s := range r.sides {
		wg.Go(func() {
			var locks []any
			var lockErr error
			var lw sync.WaitGroup
			if st.lock {
				start := time.Now()
				lw.Go(func() { locks, lockErr = s.lockProbes(ctx, start) })
			}
			answers[k], errs[k] = s.observe(ctx, st, viaMCP)
			observed := time.Now()
			lw.Wait()
			if errs[k] == nil {
				errs[k] = lockErr
			}
			if errs[k] == nil && !st.inside {
				after[k], errs[k] = s.observeAfter(ctx, answers[k].requestID, locks)
			}
			costs[k] = time.Since(observed)
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return answers, after, 0, e
		}
	}
	return answers, after, max(costs[0], costs[1]), nil
}

// sideProbes are the probes that differ in an observer's difference.
func sideProbes(diffs []string) []string {
	seen := map[string]bool{}
	var probes []string
	for _, d := range diffs {
		p, _, _ := strings.Cut(strings.TrimPrefix(d, "."), ": ")
		if i := strings.IndexAny(p, ".["); i >= 0 {
			p = p[:i]
		}
		if !seen[p] {
			seen[p] = true
			probes = append(probes, p)
		}
	}
	sort.Strings(probes)
	return probes
}

// probeGist sums up the observer's probes on one side, for the verbose
// log: each probe's status and outcome (or error code), and the sequence
// probe's delta.
func probeGist(after map[string]any) string {
	gist := func(v any) string {
		ex, ok := v.(exchange)
		if !ok {
			return "?"
		}
		s := fmt.Sprint(ex.Status)
		if body, ok := ex.Body.(map[string]any); ok {
			if o, ok := body["outcome"].(string); ok {
				s += " " + o
			}
			if e, ok := body["error"].(map[string]any); ok {
				s += fmt.Sprintf(" %v", e["code"])
			}
			if rows, ok := body["rows"].([]any); ok && len(rows) == 1 {
				if row, ok := rows[0].(map[string]any); ok {
					s += fmt.Sprintf(" (%v)", row["id"])
				}
			}
		}
		return s
	}
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if l, ok := after[k].([]any); ok {
			var g []string
			for _, e := range l {
				g = append(g, gist(e))
			}
			parts = append(parts, k+": ["+strings.Join(g, ", ")+"]")
			continue
		}
		parts = append(parts, k+": "+gist(after[k]))
	}
	return strings.Join(parts, "; ")
}
