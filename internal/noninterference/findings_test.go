package noninterference_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
)

// finding is a difference the property test found, minimized: a crafted
// pair of twins and the statements that tell them apart.
type finding struct {
	name       string
	why        string
	world      func(t *testing.T) *world
	statements []string
}

// TestNonInterferenceFindings replays the property test's findings on
// crafted twins, through the whole system as the property test runs it,
// and is the regression of the attribution to the plan: each finding is
// the plan channel (outside the guarantee, docs/security.md, "The plan").
// A case fails if its twins no longer differ in what the agent sees (the
// channel is gone, or the case stopped exercising it: revisit the docs),
// and if any difference it shows is one the plan does not explain.
func TestNonInterferenceFindings(t *testing.T) {
	cfg := loadConfig(t)
	srv := shared.Server(t)
	keys := gatewaytest.NewKeys(t)
	for _, f := range findings {
		t.Run(f.name, func(t *testing.T) {
			t.Logf("%s", f.why)
			w := f.world(t)
			schema := ddl(w.tables, w.hidden)
			tl := newTally()
			r := startRound(t, cfg, keys, tl, w, newTwins(t, srv, schema), schema)
			for i, sql := range f.statements {
				op, _, _ := strings.Cut(strings.ToLower(sql), " ")
				r.pair(t, tl, f.name, i, stmt{sql: sql, op: op, inside: true}, true)
			}
			r.finish(t)
			switch {
			case tl.differences > 0:
				t.Errorf("%s: %d differences the plan does not explain (above)", f.name, tl.differences)
			case tl.explained == 0:
				t.Errorf("%s: the twins give the agent identical observations: the plan channel this case shows is gone or the case "+
					"no longer exercises it; revisit docs/security.md (\"The plan\") and this finding", f.name)
			default:
				t.Logf("%s: %d differences, each explained by the plan", f.name, tl.explained)
			}
		})
	}
}

var findings = []finding{{
	name: "plan",
	why: "The planner's statistics count the rows outside the fence too, so the plan of a read can differ between the twins. " +
		"Here a hash join evaluates a cast that raises on every row of the region, while a nested loop whose outer side is " +
		"empty never evaluates it: with no row outside the fence the query fails, with 20 or more it returns no rows. " +
		"Nothing is evaluated outside the fence, but whether the agent's expression is evaluated at all says how many rows hide there.",
	world: func(t *testing.T) *world {
		tb := &table{name: "t0", region: 23, cols: []column{
			{name: "id", typ: "bigint"}, {name: "s1", typ: "text", flavor: "word"},
			{name: "s2", typ: "text", flavor: "date"}, {name: "g3", typ: "bigint"}}}
		tb.rules = map[string]*rule{"select": {Op: "select", Table: "public.t0", Columns: []string{"id", "s2", "g3"},
			Fence: "s1 IS NOT NULL", MaxRows: 56, reads: []string{"s1"}}}
		markFree(tb)
		hidden := &table{name: "ledger", cols: []column{{name: "id", typ: "bigint"}, {name: "i1", typ: "integer"}}}
		w := &world{tables: []*table{tb}, hidden: hidden,
			dlg: delegationYAML(t, []*table{tb}, time.Now().Add(48*time.Hour).Truncate(time.Hour))}
		var region []rowValues
		for i := 1; i <= tb.region; i++ {
			s1 := quote("abc")
			if i%4 == 0 {
				s1 = "NULL"
			}
			region = append(region, rowValues{strconv.Itoa(i), s1, quote(fmt.Sprintf("2022-01-%02d", i)), strconv.Itoa(20 + i)})
		}
		var outside []rowValues
		for i := range 50 {
			outside = append(outside, rowValues{strconv.Itoa(outsideIDs + i), "NULL", quote("abc"), strconv.Itoa(i % 100)})
		}
		w.rows[0] = []string{insertSQL(tb, region), insertSQL(hidden, []rowValues{{"1", "1"}})}
		w.rows[1] = []string{insertSQL(tb, region), insertSQL(tb, outside), insertSQL(hidden, []rowValues{{"2", "2"}, {"3", "3"}})}
		w.outside = [2]map[string]int{{}, {"t0": len(outside)}}
		return w
	},
	statements: []string{
		"SELECT a.id FROM t0 a JOIN t0 b ON a.g3 = b.g3 AND (a.s2)::integer > 43 WHERE b.g3 IN (50, 93, 11) ORDER BY 1",
	},
}, {
	name: "scan order",
	why: "Which guard trips first depends on the order in which the plan meets the rows, and the plan on the statistics. " +
		"Row 2 is updated first, and its new version lies after row 5 in the heap on both sides (a HOT update on its page " +
		"where there is room, on A; on a later page where the rows outside the fence fill its own, on B); then an update " +
		"that raises on row 2 (a cast) and on row 5 (outside the write fence) meets row 2 first by the primary key " +
		"(an index scan, chosen where many rows hide outside the fence) and row 5 first by a sequential scan (chosen " +
		"where none do): the agent reads \"the target refused the statement\" on one side and \"outside the rule's write fence\" on the other. " +
		"Pinned to a bitmap heap scan on both, a plan neither chose, the twins part the other way round (the bitmap meets row 2 at its " +
		"old place on A, where the update stayed on the page, and at its new one on B): the heap's layout, which the attribution notes.",
	world: func(t *testing.T) *world {
		tb := &table{name: "t1", region: 40, cols: []column{
			{name: "id", typ: "bigint"}, {name: "s2", typ: "text", flavor: "date"}, {name: "ts3", typ: "timestamptz"}}}
		tb.rules = map[string]*rule{
			"select": {Op: "select", Table: "public.t1", Columns: []string{"id", "s2"},
				Fence: "ts3 < '2023-06-01 00:00:00+00'::timestamptz", MaxRows: 50, reads: []string{"ts3"}},
			"update": {Op: "update", Table: "public.t1", Columns: []string{"s2"},
				Fence: "s2 IS NOT NULL", MaxRows: 50, reads: []string{"s2"}},
		}
		markFree(tb)
		hidden := &table{name: "ledger", cols: []column{{name: "id", typ: "bigint"}, {name: "i1", typ: "integer"}}}
		w := &world{tables: []*table{tb}, hidden: hidden,
			dlg: delegationYAML(t, []*table{tb}, time.Now().Add(48*time.Hour).Truncate(time.Hour))}
		var region []rowValues
		for i := 1; i <= tb.region; i++ {
			s2 := quote(fmt.Sprintf("2022-02-%02d", i%28+1))
			if i == 5 {
				s2 = "NULL"
			}
			region = append(region, rowValues{strconv.Itoa(i), s2, "'2022-01-01 00:00:00+00'::timestamptz"})
		}
		var outside []rowValues
		for i := range 2000 {
			outside = append(outside, rowValues{strconv.Itoa(outsideIDs + i), "NULL", "'2024-01-01 00:00:00+00'::timestamptz"})
		}
		w.rows[0] = []string{insertSQL(tb, region), insertSQL(hidden, []rowValues{{"1", "1"}})}
		w.rows[1] = []string{insertSQL(tb, region), insertSQL(tb, outside), insertSQL(hidden, []rowValues{{"2", "2"}})}
		w.outside = [2]map[string]int{{}, {"t1": len(outside)}}
		return w
	},
	statements: []string{
		"UPDATE t1 SET s2 = 'a%b' WHERE id = 2",
		"UPDATE t1 SET s2 = (s2::date + 1)::text WHERE id BETWEEN 1 AND 40",
	},
}}
