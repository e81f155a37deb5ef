package noninterference_test

import (
	"context"
	"expvar"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// secret is the hidden value: (SELECT ascii(secret) FROM secrets
// WHERE id = 1) is 97 on twin A and 122 on twin B, and "> 100" tells them
// apart.
const secret = "(SELECT ascii(secret) FROM secrets WHERE id = 1)"

// oracleCases are the hostile statements, one per class of side
// channel found on the rehearsal of referred statements (issue 22). Before
// commit 0698d29 the gateway rehearsed every referred statement as soon as
// the agent sent it: it ran it, unfenced, on the real target, in a
// transaction that rolled back, and served /metrics, the Go runtime's
// counters, on the agents' listener. Each case fails there, and passes
// only while nothing of a referred statement runs before a human asks.
var oracleCases = []struct {
	name string
	// why the statement was an oracle, and what the probes show now.
	why string
	st  stmt
	// want are what the probes must show on both twins (probeGist): the
	// probes did run, and found nothing of the statement.
	want []string
}{{
	name: "lock",
	why: "The rehearsal of UPDATE ... WHERE <hidden predicate> locked the rows the predicate chose, for as long as its slow " +
		"RETURNING ran, until it rolled back: on B (the predicate true) the agent's own in-bound UPDATE of row 1 answered " +
		"\"timeout\" (referred, under the lock_timeout) while the rehearsal held it, on A \"executed\". One bit per referral.",
	st: stmt{sql: "UPDATE notes SET body = body WHERE id = 1 AND " + secret + " > 100 RETURNING " + slowSQL + " AS n",
		op: "update", channel: "lock (which rows)", lock: true},
	want: []string{"lock probe: [200 executed, 200 executed, 200 executed, 200 executed]"},
}, {
	name: "sequence",
	why: "The rehearsal of INSERT ... SELECT drew DEFAULT nextval() once per row, and a rollback does not return them: " +
		"notes_id_seq moved by the hidden value, 97 on A and 122 on B, read back by the agent's next in-bound INSERT ... RETURNING id.",
	st: stmt{sql: "INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, " + secret + ")",
		op: "insert", channel: "sequence"},
	want: []string{"sequence probe: 200 executed (the previous probe's + 1)"},
}, {
	name: "metrics surface",
	why: "The rehearsal decoded the rows in the control plane, so a 30 MB value or none showed in the Go runtime's allocation " +
		"counter, which /metrics served on the agents' listener without authentication. (Both control planes of this test " +
		"share one process, so the counter itself cannot tell the twins apart here: what fails before is /metrics answering " +
		"the agent at all, with bodies that differ.) Now /metrics, pprof and expvar are not on the agents' listener, and " +
		"the statement does not run.",
	st: stmt{sql: "SELECT repeat('x', CASE WHEN " + secret + " > 100 THEN 30000000 ELSE 1 END) AS v",
		op: "select", channel: "large value"},
	want: []string{"surface GET /metrics: 404 not_found", "surface GET /metrics (no token): 404 not_found",
		"surface GET /debug/pprof/: 404 not_found", "surface GET /debug/vars: 404 not_found"},
}}

// TestReferralIsNotAnOracle sends the hostile statements, each
// referred (it reads secrets, a table no rule names, which holds a
// different secret on each twin), with the observer around them, and
// checks that the agent's observations, the probes' included, are the
// same on both twins, and that the probes ran as they should. Its
// controls plant each difference by hand, on twin B alone (a row lock
// held by an admin session, a sequence value drawn, an expvar endpoint on
// B's API), and check that the observer sees it: the test can fail.
// One pair of twins serves them all, the controls last.
func TestReferralIsNotAnOracle(t *testing.T) {
	cfg := loadConfig(t)
	srv := shared.Server(t)
	keys := gatewaytest.NewKeys(t)
	w := secretsWorld(t)
	schema := ddl(w.tables, w.hidden) + notesDDL
	tl := newTally()
	r := startRound(t, cfg, keys, tl, w, newTwins(t, srv, schema), schema)
	for i, c := range oracleCases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("%s", c.why)
			seen := tl.differences + tl.sideDifferences
			after := r.pair(t, tl, c.name, i, c.st, true)
			if tl.differences+tl.sideDifferences > seen {
				t.Errorf("%s: the referral is an oracle: the agent tells the twins apart (above)", c.name)
			}
			for k, name := range []string{"A", "B"} {
				gist := probeGist(after[k])
				for _, want := range c.want {
					if !strings.Contains(gist, want) {
						t.Errorf("%s: on %s the probes show %q, want %q among them", c.name, name, gist, want)
					}
				}
			}
		})
	}
	r.finish(t)

	// The controls: a difference planted on B alone, which the observer
	// must see. They come last: what they plant breaks the premise.
	control := func(t *testing.T, want string, plant func(ctx context.Context) (undo func())) {
		ctx := t.Context()
		undo := plant(ctx)
		_, after, _, err := r.observePair(ctx, stmt{sql: "SELECT count(*) FROM secrets", op: "select", channel: "control", lock: true}, false)
		undo()
		if err != nil {
			t.Fatal(err)
		}
		var diffs []string
		diff(normalize(after[0], false), normalize(after[1], false), "", &diffs, 50)
		if !slices.Contains(sideProbes(diffs), want) {
			t.Errorf("the observer did not see the difference planted on B: want %q among the probes that differ, have %v\n  A: %s\n  B: %s",
				want, sideProbes(diffs), probeGist(after[0]), probeGist(after[1]))
		}
	}
	t.Run("control lock", func(t *testing.T) {
		control(t, "lock probe", func(ctx context.Context) func() {
			conn, err := pgx.Connect(ctx, r.dsns[1])
			if err != nil {
				t.Fatal(err)
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM notes WHERE id = 1 FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			return func() { _ = tx.Rollback(ctx); conn.Close(ctx) }
		})
	})
	t.Run("control sequence", func(t *testing.T) {
		control(t, "sequence probe", func(ctx context.Context) func() {
			queryString(t, r.dsns[1], "SELECT nextval('notes_id_seq')::text")
			return func() {}
		})
	})
	t.Run("control surface", func(t *testing.T) {
		control(t, "surface GET /debug/vars", func(ctx context.Context) func() {
			r.sides[1].sys.API.Handle("GET /debug/vars", expvar.Handler())
			return func() {}
		})
	})
}

// secretsWorld is the twins: the probe table, and secrets, a
// table no rule names, whose secret is "a" on A and "z" on B. The
// delegation names the probe table alone.
func secretsWorld(t *testing.T) *world {
	t.Helper()
	hidden := &table{name: "secrets", cols: []column{{name: "id", typ: "bigint"}, {name: "secret", typ: "text"}}}
	w := &world{hidden: hidden, notes: true,
		dlg: delegationYAML(t, nil, time.Now().Add(48*time.Hour).Truncate(time.Hour), notesRules()...)}
	for side, s := range []string{"a", "z"} {
		w.rows[side] = []string{insertSQL(hidden, []rowValues{{"1", quote(s)}, {"2", quote(fmt.Sprintf("%s-other", s))}}), notesRows}
	}
	w.outside = [2]map[string]int{{}, {}}
	return w
}
