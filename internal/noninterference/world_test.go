package noninterference_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// The id ranges that keep unique keys from leaking (see the package doc).
const (
	// outsideIDs is the first id of a row outside the read fence.
	outsideIDs = 100000
	// insertIDLow and insertIDHigh bound the ids of generated INSERT ...
	// VALUES rows; INSERT ... SELECT adds at most insertOffsetHigh to an
	// id below insertIDHigh, staying far below outsideIDs.
	insertIDLow, insertIDHigh         = 5000, 9999
	insertOffsetLow, insertOffsetHigh = 5000, 9000
)

// kind is what an expression is, as far as the generator cares.
type kind int

const (
	kInt kind = iota
	kNum
	kText
	kBool
	kJSON
	kArr
	kTS
)

// column is a column of a table, or an output column of a subquery.
type column struct {
	name string
	typ  string // SQL type
	// flavor is what a text column's mild values look like: int, date or word.
	flavor string
}

func (c column) kind() kind {
	switch c.typ {
	case "integer", "bigint":
		return kInt
	case "numeric":
		return kNum
	case "text":
		return kText
	case "boolean":
		return kBool
	case "jsonb":
		return kJSON
	case "integer[]":
		return kArr
	case "timestamptz":
		return kTS
	}
	panic("noninterference: no kind for type " + c.typ)
}

// columnTypes are the data column types; the prefix names the column, so a
// statement in a failure report reads easily (s2 is text, j4 is jsonb).
var columnTypes = []struct{ prefix, typ string }{
	{"i", "integer"}, {"g", "bigint"}, {"s", "text"}, {"n", "numeric"},
	{"f", "boolean"}, {"j", "jsonb"}, {"a", "integer[]"}, {"ts", "timestamptz"},
}

// rule is one rule of the delegation, as the YAML writes it.
type rule struct {
	Op      string   `yaml:"op"`
	Table   string   `yaml:"table"`
	Columns []string `yaml:"columns,omitempty,flow"`
	Fence   string   `yaml:"fence,omitempty"`
	Check   string   `yaml:"check,omitempty"`
	MaxRows int64    `yaml:"max_rows,omitempty"`

	// reads are the columns the fence and the check read.
	reads []string
}

// table is one table of a round.
type table struct {
	name string
	cols []column // cols[0] is id bigint primary key
	// region is N: rows 1..N are the same in both targets but for free columns.
	region int
	// rules by op; absent when the delegation has none.
	rules map[string]*rule
	// free are the columns nothing in the bound names.
	free map[string]bool
}

func (t *table) col(name string) column {
	for _, c := range t.cols {
		if c.name == name {
			return c
		}
	}
	panic("noninterference: no column " + name + " in " + t.name)
}

func (t *table) data() []column { return t.cols[1:] }

// readable are the columns the select rule lists (none without one).
func (t *table) readable() []column {
	r := t.rules["select"]
	if r == nil {
		return nil
	}
	var out []column
	for _, n := range r.Columns {
		out = append(out, t.col(n))
	}
	return out
}

// writable are the columns the rule of op lists.
func (t *table) writable(op string) []column {
	r := t.rules[op]
	if r == nil {
		return nil
	}
	var out []column
	for _, n := range r.Columns {
		out = append(out, t.col(n))
	}
	return out
}

// blindWritesReachWriteFence says whether a write that reads nothing of
// its target (DELETE FROM t, UPDATE t SET c = 1) can reach rows its read
// fence hides. It cannot: pilot.BuildGuards sends it through the view of
// what the bound's select rules on the table let the grantee read (the
// write fence only where no select rule names the table, and every table
// here has one), so a row outside the select rule's fence is outside the
// bound even inside a write fence. Set to true, the twins would only hide
// rows outside every fence, and the test would stop hunting blind writes.
const blindWritesReachWriteFence = false

// hiding is the predicate that keeps a row outside every fence that can
// reach it, "" when there is no such row: the select rule's fence (what
// reads see, and what a write that reads the table reaches) and the fences
// of the update and delete rules (a write that reads nothing of its
// target, DELETE FROM t, reaches the rows of its write fence: a row there
// is inside the bound even where the agent cannot read it). A table
// without a fenced select rule, or with an unfenced update or delete
// rule, has every row inside the bound.
func (t *table) hiding() string {
	sel := t.rules["select"]
	if sel == nil || sel.Fence == "" {
		return ""
	}
	conds := []string{"(" + sel.Fence + ") IS NOT TRUE"}
	if !blindWritesReachWriteFence {
		return conds[0]
	}
	for _, op := range []string{"update", "delete"} {
		if r := t.rules[op]; r != nil {
			if r.Fence == "" {
				return ""
			}
			conds = append(conds, "("+r.Fence+") IS NOT TRUE")
		}
	}
	return strings.Join(conds, " AND ")
}

// world is one round's schema, delegation and the data of both targets.
type world struct {
	tables []*table // named by the delegation
	hidden *table   // named by no rule
	dlg    []byte   // the delegation YAML
	// rows are each target's INSERT statements, in order.
	rows [2][]string
	// outside counts each target's rows outside the bound, by table.
	outside [2]map[string]int
	// notes says the round has the observer's probe table (observer_test.go):
	// the same rows on both targets, named by rules of its own.
	notes bool
}

// rowValues is one row: a SQL literal per column.
type rowValues []string

// newWorld draws a round's world. admin is a connection to one of the
// (still empty) targets, where the schema already exists: fences are
// tried on staged rows there, so that each keeps a fair share of the
// region inside it, and rows outside a fence are kept only if the fence
// is not true on them.
func newWorld(t *testing.T, rng *mrand.Rand, admin *pgx.Conn, cat *sqlcheck.Catalog, tables []*table, hidden *table, expires time.Time) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{tables: tables, hidden: hidden}
	// Each target has its own stream for what differs: free columns,
	// rows outside the fences, the hidden table.
	own := [2]*mrand.Rand{mrand.New(mrand.NewPCG(rng.Uint64(), 1)), mrand.New(mrand.NewPCG(rng.Uint64(), 2))}

	region := map[*table][]rowValues{}
	for _, tb := range tables {
		rows := make([]rowValues, tb.region)
		for i := range rows {
			rows[i] = randomRow(rng, tb, int64(i+1), false)
		}
		region[tb] = rows
		stage(t, admin, tb, rows)
	}
	for attempt := 0; ; attempt++ {
		if attempt == 50 {
			t.Fatal("noninterference: no signable random delegation in 50 attempts")
		}
		for _, tb := range tables {
			drawRules(t, rng, admin, tb)
		}
		if !slices.ContainsFunc(tables, func(tb *table) bool { return tb.hiding() != "" }) {
			continue // a round with nothing outside the fences proves little
		}
		w.dlg = delegationYAML(t, tables, expires, notesRules()...)
		d, err := bound.Parse(w.dlg, "noninterference.yaml")
		if err != nil {
			t.Fatalf("noninterference: generated delegation does not parse: %v\n%s", err, w.dlg)
		}
		if _, rep := bound.Compile(d, cat, bound.Options{}); rep.Signable {
			break
		} else if attempt > 10 {
			t.Logf("delegation not signable, drawing again: %v", rep.Problems)
		}
	}
	for _, tb := range tables {
		markFree(tb)
	}

	for side := range 2 {
		w.outside[side] = map[string]int{}
		var ins []string
		for _, tb := range tables {
			rows := make([]rowValues, len(region[tb]))
			for i, r := range region[tb] {
				rows[i] = slices.Clone(r)
				for ci, c := range tb.cols {
					if tb.free[c.name] {
						rows[i][ci] = randomValue(own[side], c, true)
					}
				}
			}
			ins = append(ins, insertSQL(tb, rows))
			if hiding := tb.hiding(); hiding != "" {
				// Different counts on each side, sometimes none at all,
				// and mild on one side while nasty on the other at times:
				// a fragile expression that reaches them then raises on
				// one side only.
				n := own[side].IntN(40)
				switch own[side].IntN(4) {
				case 0, 1:
					n = 20 + own[side].IntN(300)
				case 2:
					n = 500 + own[side].IntN(1500)
				}
				if own[side].IntN(5) == 0 {
					n = 0
				}
				nasty := own[side].IntN(3) != 0
				if n > 0 {
					var cand []rowValues
					for i := range 8 * n {
						cand = append(cand, randomRow(own[side], tb, int64(outsideIDs+i), nasty))
					}
					stage(t, admin, tb, cand)
					outside := stagedIDs(t, admin, tb, hiding)
					var keep []rowValues
					for _, r := range cand {
						id, _ := strconv.ParseInt(r[0], 10, 64)
						if outside[id] && len(keep) < n {
							keep = append(keep, r)
						}
					}
					if len(keep) > 0 {
						ins = append(ins, insertSQL(tb, keep))
					}
					w.outside[side][tb.name] = len(keep)
				}
			}
		}
		var hrows []rowValues
		for i := range 3 + own[side].IntN(60) {
			hrows = append(hrows, randomRow(own[side], hidden, int64((i+1)*10+own[side].IntN(10)), true))
		}
		ins = append(ins, insertSQL(hidden, hrows), notesRows)
		w.rows[side] = ins
	}
	w.notes = true
	for _, tb := range tables {
		if _, err := admin.Exec(ctx, "DROP TABLE pg_temp.stage_"+tb.name); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// drawSchema draws 2 or 3 tables named by rules and the hidden one.
func drawSchema(rng *mrand.Rand) ([]*table, *table) {
	var tables []*table
	for i := range 2 + rng.IntN(2) {
		tables = append(tables, drawTable(rng, fmt.Sprintf("t%d", i), 3+rng.IntN(4)))
	}
	hidden := drawTable(rng, "ledger", 3)
	return tables, hidden
}

func drawTable(rng *mrand.Rand, name string, ncols int) *table {
	tb := &table{name: name, cols: []column{{name: "id", typ: "bigint"}}, region: 15 + rng.IntN(50), rules: map[string]*rule{}}
	for j := range ncols {
		ct := columnTypes[rng.IntN(len(columnTypes))]
		if j < 2 {
			// Most statements need an integer or a text column to bite on.
			ct = columnTypes[[]int{0, 2}[rng.IntN(2)]]
		}
		c := column{name: fmt.Sprintf("%s%d", ct.prefix, j+1), typ: ct.typ}
		if c.typ == "text" {
			c.flavor = textFlavors[rng.IntN(len(textFlavors))]
		}
		tb.cols = append(tb.cols, c)
	}
	return tb
}

// ddl creates the tables. Autovacuum is off, so the physical layout of the
// region's rows (which a plan without ORDER BY would show) only ever
// changes by the agent's own statements, alike on both sides.
func ddl(tables []*table, hidden *table) string {
	var b strings.Builder
	for _, tb := range append(slices.Clone(tables), hidden) {
		fmt.Fprintf(&b, "CREATE TABLE public.%s (id bigint PRIMARY KEY", tb.name)
		for _, c := range tb.data() {
			fmt.Fprintf(&b, ", %s %s", c.name, c.typ)
		}
		b.WriteString(") WITH (autovacuum_enabled = false);\n")
	}
	return b.String()
}

func insertSQL(tb *table, rows []rowValues) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO public.%s VALUES ", tb.name)
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(" + strings.Join(r, ", ") + ")")
	}
	return b.String()
}

func randomRow(rng *mrand.Rand, tb *table, id int64, nasty bool) rowValues {
	r := rowValues{strconv.FormatInt(id, 10)}
	for _, c := range tb.data() {
		r = append(r, randomValue(rng, c, nasty))
	}
	return r
}

// Values. Rows of the region are mild: integers from 10 to 99, text that
// is what its column's flavor says (integers, dates or words), numerics
// away from 2.5, json whose k is a number and whose a.b is "17", arrays
// without a 0. A value that makes an expression raise (0, a small integer
// k where an expression divides by (c - k), 2.5, text that is not a number
// or not a date, json whose k is a word) turns up in about one mild value
// in fifty, and in half the values of rows outside the fences. So a
// fragile expression evaluated only where it should be mostly succeeds,
// or fails alike on both sides, and one evaluated on a row outside a
// fence mostly raises, on one side only.

var (
	wordPool    = []string{"abc", "abd", "Zebra", "hello world", "x_y", "a%b", "O'Brien", "ümlaut", "b7", "bca"}
	poisonText  = []string{"", "NaN", "3.5", "2023-13-01", "-", "0", "7", "2024-02-30", "abc", "b7", "12x"}
	poisonNum   = []string{"0", "2.5", "-1.25", "0.001"}
	mildArrs    = []string{"{11,12}", "{12,13,14}", "{20}", "{15,NULL,17}", "{30,31}"}
	poisonArrs  = []string{"{}", "{0,2}", "{1}", "{7,0}", "{2,2}", "{NULL}"}
	textFlavors = []string{"int", "date", "word"}
)

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// flavoredText is a mild text value of a flavor.
func flavoredText(rng *mrand.Rand, flavor string) string {
	switch flavor {
	case "int":
		return strconv.Itoa(10 + rng.IntN(90))
	case "date":
		return time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, rng.IntN(2000)).Format("2006-01-02")
	}
	return wordPool[rng.IntN(len(wordPool))]
}

// randomValue is a random literal for c, typed, NULL sometimes; nasty
// draws half of the values from the poison pools.
func randomValue(rng *mrand.Rand, c column, nasty bool) string {
	if rng.IntN(12) == 0 {
		return "NULL"
	}
	poison := nasty && rng.IntN(2) == 0 || !nasty && rng.IntN(50) == 0
	switch c.typ {
	case "integer", "bigint":
		if poison {
			return strconv.Itoa(rng.IntN(12) - 2)
		}
		return strconv.Itoa(10 + rng.IntN(90))
	case "text":
		if poison {
			return quote(poisonText[rng.IntN(len(poisonText))])
		}
		return quote(flavoredText(rng, c.flavor))
	case "numeric":
		if poison {
			return poisonNum[rng.IntN(len(poisonNum))]
		}
		return fmt.Sprintf("%d.%s", 3+rng.IntN(48), []string{"0", "5", "25", "75"}[rng.IntN(4)])
	case "boolean":
		return []string{"true", "false"}[rng.IntN(2)]
	case "jsonb":
		return quote(randomJSON(rng, poison)) + "::jsonb"
	case "integer[]":
		if poison {
			return quote(poisonArrs[rng.IntN(len(poisonArrs))]) + "::integer[]"
		}
		return quote(mildArrs[rng.IntN(len(mildArrs))]) + "::integer[]"
	case "timestamptz":
		ts := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(2000*24)) * time.Hour)
		return quote(ts.Format("2006-01-02 15:04:05+00")) + "::timestamptz"
	}
	panic("noninterference: no values for " + c.typ)
}

func randomJSON(rng *mrand.Rand, poison bool) string {
	m := map[string]any{}
	switch {
	case rng.IntN(5) == 0:
		// no k
	case poison:
		m["k"] = []any{"abc", 0, nil, "3.5"}[rng.IntN(4)]
	default:
		m["k"] = 10 + rng.IntN(90)
	}
	if rng.IntN(3) != 0 {
		m["s"] = wordPool[rng.IntN(len(wordPool))]
	}
	if rng.IntN(3) != 0 {
		b := "17"
		if poison {
			b = []string{"x", "0", "17"}[rng.IntN(3)]
		}
		m["a"] = map[string]any{"b": b}
	}
	if rng.IntN(3) == 0 {
		m["arr"] = []int{rng.IntN(4), rng.IntN(4)}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// stage loads rows into pg_temp.stage_<table>, replacing what it held.
func stage(t *testing.T, admin *pgx.Conn, tb *table, rows []rowValues) {
	t.Helper()
	ctx := context.Background()
	q := fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS stage_%s (LIKE public.%s); TRUNCATE pg_temp.stage_%s", tb.name, tb.name, tb.name)
	if _, err := admin.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	ins := strings.Replace(insertSQL(tb, rows), "INSERT INTO public."+tb.name, "INSERT INTO pg_temp.stage_"+tb.name, 1)
	if _, err := admin.Exec(ctx, ins, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("noninterference: staging %s: %v", tb.name, err)
	}
}

// stagedIDs are the ids of staged rows where pred holds.
func stagedIDs(t *testing.T, admin *pgx.Conn, tb *table, pred string) map[int64]bool {
	t.Helper()
	rows, err := admin.Query(context.Background(), "SELECT id FROM pg_temp.stage_"+tb.name+" WHERE "+pred, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("noninterference: %s on staged %s: %v", pred, tb.name, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("noninterference: %s on staged %s: %v", pred, tb.name, err)
	}
	out := map[int64]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// drawRules draws the table's rules. A select fence is drawn until it
// keeps between a quarter and nine tenths of the staged region inside.
func drawRules(t *testing.T, rng *mrand.Rand, admin *pgx.Conn, tb *table) {
	t.Helper()
	tb.rules = map[string]*rule{}
	data := tb.data()
	name := "public." + tb.name
	maxRows := func(lo, hi int) int64 { return int64(lo + rng.IntN(hi-lo+1)) }
	if rng.IntN(100) < 92 {
		cols := subset(rng, data, 1)
		if rng.IntN(10) != 0 {
			cols = append([]column{tb.cols[0]}, cols...)
		}
		r := &rule{Op: "select", Table: name, Columns: colNames(cols), MaxRows: maxRows(3, 80)}
		if rng.IntN(5) == 0 {
			r.MaxRows = 0 // no cap
		}
		if rng.IntN(100) < 80 {
			best, bestScore := "", 2.0
			for range 25 {
				f, reads := fencePred(rng, data)
				in := len(stagedIDs(t, admin, tb, "("+f+") IS TRUE"))
				share := float64(in) / float64(tb.region)
				score := 0.0
				if share < 0.25 {
					score = 0.25 - share
				} else if share > 0.9 {
					score = share - 0.9
				}
				if score < bestScore {
					best, bestScore, r.reads = f, score, reads
				}
				if score == 0 {
					break
				}
			}
			r.Fence = best
		}
		tb.rules["select"] = r
	}
	// Where reads are fenced, writes mostly are too: a table whose write
	// rule reaches every row has no row outside the bound.
	writeFenced := 70
	if r := tb.rules["select"]; r != nil && r.Fence != "" {
		writeFenced = 90
	}
	if rng.IntN(100) < 65 {
		cols := subset(rng, data, 1)
		r := &rule{Op: "update", Table: name, Columns: colNames(cols), MaxRows: maxRows(1, 15)}
		r.Fence, r.reads = maybePred(rng, writeFenced, data)
		var reads []string
		r.Check, reads = maybePred(rng, 50, cols)
		r.reads = append(r.reads, reads...)
		tb.rules["update"] = r
	}
	if rng.IntN(100) < 45 {
		r := &rule{Op: "delete", Table: name, MaxRows: maxRows(1, 10)}
		r.Fence, r.reads = maybePred(rng, writeFenced, data)
		tb.rules["delete"] = r
	}
	if rng.IntN(100) < 55 {
		cols := subset(rng, data, 1)
		if rng.IntN(10) != 0 {
			cols = append([]column{tb.cols[0]}, cols...)
		}
		r := &rule{Op: "insert", Table: name, Columns: colNames(cols), MaxRows: maxRows(1, 6)}
		r.Check, r.reads = maybePred(rng, 40, slices.DeleteFunc(slices.Clone(cols), func(c column) bool { return c.name == "id" }))
		tb.rules["insert"] = r
	}
}

// markFree finds the columns nothing in the bound names.
func markFree(tb *table) {
	named := map[string]bool{"id": true}
	for _, r := range tb.rules {
		for _, c := range r.Columns {
			named[c] = true
		}
		for _, c := range r.reads {
			named[c] = true
		}
	}
	tb.free = map[string]bool{}
	for _, c := range tb.data() {
		if !named[c.name] {
			tb.free[c.name] = true
		}
	}
}

func maybePred(rng *mrand.Rand, pct int, cols []column) (string, []string) {
	if len(cols) == 0 || rng.IntN(100) >= pct {
		return "", nil
	}
	return fencePred(rng, cols)
}

// fencePred is a fence or check: one or two atoms that never raise.
func fencePred(rng *mrand.Rand, cols []column) (string, []string) {
	c := cols[rng.IntN(len(cols))]
	p := fenceAtom(rng, c)
	reads := []string{c.name}
	if rng.IntN(100) < 40 {
		c2 := cols[rng.IntN(len(cols))]
		op := []string{" AND ", " OR "}[rng.IntN(2)]
		p = "(" + p + op + fenceAtom(rng, c2) + ")"
		reads = append(reads, c2.name)
	}
	return p, reads
}

func fenceAtom(rng *mrand.Rand, c column) string {
	n := c.name
	pick := func(opts ...string) string { return opts[rng.IntN(len(opts))] }
	v := func() int { return 10 + rng.IntN(90) }
	switch c.kind() {
	case kInt:
		a := 20 + rng.IntN(60)
		return pick(fmt.Sprintf("%s > %d", n, a), fmt.Sprintf("%s <= %d", n, a), fmt.Sprintf("%s BETWEEN %d AND %d", n, a-10, a+20+rng.IntN(20)),
			fmt.Sprintf("%s %% 3 <> 0", n), n+" IS NOT NULL", fmt.Sprintf("%s IN (%d, %d, %d, %d)", n, v(), v(), v(), v()))
	case kNum:
		return pick(n+" > 10", n+" < 30", n+" <> 0", n+" >= 5")
	case kText:
		return pick(n+" LIKE '1%'", n+" < 'm'", n+" >= '3'", "length("+n+") > 3", n+" ~ '^[0-9]+$'", n+" IS NOT NULL", n+" NOT LIKE '%a%'")
	case kBool:
		return pick(n, "NOT "+n, n+" IS NOT TRUE")
	case kJSON:
		return pick(n+" ? 'k'", "("+n+" ->> 's') < 'm'", n+` @> '{"a": {"b": "17"}}'`, n+" ? 's'")
	case kArr:
		return pick(n+" @> ARRAY[12]", "cardinality("+n+") >= 2", n+" && ARRAY[11, 20]")
	case kTS:
		return pick(n+" > '2022-06-01 00:00:00+00'::timestamptz", n+" < '2023-06-01 00:00:00+00'::timestamptz")
	}
	panic("unreachable")
}

func subset(rng *mrand.Rand, cols []column, least int) []column {
	var out []column
	for _, c := range cols {
		if rng.IntN(3) != 0 {
			out = append(out, c)
		}
	}
	for len(out) < least {
		c := cols[rng.IntN(len(cols))]
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	// The table's own column order, as a grantor would write it.
	slices.SortFunc(out, func(a, b column) int { return slices.Index(cols, a) - slices.Index(cols, b) })
	return out
}

func colNames(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// delegationYAML writes the delegation as a grantor would: the tables'
// rules, then extra ones.
func delegationYAML(t *testing.T, tables []*table, expires time.Time, extra ...*rule) []byte {
	t.Helper()
	var allow []*rule
	for _, tb := range tables {
		for _, op := range []string{"select", "update", "delete", "insert"} {
			if r := tb.rules[op]; r != nil {
				allow = append(allow, r)
			}
		}
	}
	allow = append(allow, extra...)
	doc := struct {
		Sentence string  `yaml:"sentence"`
		Grantee  string  `yaml:"grantee"`
		Target   string  `yaml:"target"`
		Expires  string  `yaml:"expires"`
		Allow    []*rule `yaml:"allow"`
	}{"Keep the random tables of a non-interference round tidy.", gatewaytest.Agent, gatewaytest.Target,
		expires.UTC().Format(time.RFC3339), allow}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadSchema creates the schema in a fresh database and initializes it as
// a target.
func loadSchema(t *testing.T, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("noninterference: schema: %v\n%s", err, schema)
	}
	if err := pilot.InitTarget(ctx, dsn); err != nil {
		t.Fatal(err)
	}
}

// loadRows inserts one target's rows and analyzes its tables.
func loadRows(t *testing.T, dsn string, inserts []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range append(slices.Clone(inserts), "ANALYZE") {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("noninterference: loading rows: %v\n%.500s", err, q)
		}
	}
}
