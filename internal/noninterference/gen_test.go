package noninterference_test

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// The statement generator. Most statements stay inside the bound (every
// column they read is listed by a select rule, every column they write by
// the write rule), so they take the compiled path and the Pilot's guards
// decide them; the rest step outside it on purpose and are referred.
//
// Expressions are typed by kind and deliberately fragile: integer division
// by a column or by (column - k), casts of text to integer, numeric, date
// and timestamptz, of json values to integer, array subscripts, regular
// expressions. On a row where they raise, the statement fails; on the rows
// of a region, the same rows on both sides, they fail alike. Were any of
// them evaluated on a row outside a fence, the two sides would part.

// ref is a column as a statement names it, qualified by alias or not.
type ref struct {
	alias string
	col   column
}

func (r ref) sql() string {
	if r.alias == "" {
		return r.col.name
	}
	return r.alias + "." + r.col.name
}

// stmt is one generated statement.
type stmt struct {
	sql string
	// op is select, update, delete, insert or other.
	op string
	// inside is true when it was drawn to stay inside the bound.
	inside bool
	// channel is the side channel a statement of sideGen was drawn for
	// ("" for the others); lock says it would hold row locks of the probe
	// table, so the observer probes them while it is answered.
	channel string
	lock    bool
}

// write reports whether its rows (RETURNING) come in the executor's order.
func (s stmt) write() bool { return s.op == "update" || s.op == "delete" || s.op == "insert" }

type stmtGen struct {
	rng *mrand.Rand
	w   *world
	// aliases counts the subquery aliases of the statement being drawn.
	aliases int
}

func (g *stmtGen) pct(p int) bool { return g.rng.IntN(100) < p }

func (g *stmtGen) alias() string {
	g.aliases++
	return "x" + strconv.Itoa(g.aliases)
}

func pickOne[T any](rng *mrand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// readableTables are the tables a select rule covers.
func (g *stmtGen) readableTables() []*table {
	var out []*table
	for _, tb := range g.w.tables {
		if len(tb.readable()) > 0 {
			out = append(out, tb)
		}
	}
	return out
}

func (g *stmtGen) writeTables(op string) []*table {
	var out []*table
	for _, tb := range g.w.tables {
		if tb.rules[op] != nil {
			out = append(out, tb)
		}
	}
	return out
}

func scopeOf(alias string, cols []column) []ref {
	out := make([]ref, len(cols))
	for i, c := range cols {
		out[i] = ref{alias, c}
	}
	return out
}

// pick is a random column of kind k in sc.
func (g *stmtGen) pick(sc []ref, k kind) (ref, bool) {
	var cands []ref
	for _, r := range sc {
		if r.col.kind() == k {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return ref{}, false
	}
	return pickOne(g.rng, cands), true
}

func (g *stmtGen) has(sc []ref, k kind) bool {
	_, ok := g.pick(sc, k)
	return ok
}

var patterns = []string{`'^[0-9]+$'`, `'[a-z]'`, `'^a'`, `'b.?c'`, `'(ab|ba)'`, `'\d'`, `'^$'`, `'[[:upper:]]'`, `'o w'`}

// lit is a typed literal of kind k.
func (g *stmtGen) lit(k kind) string {
	switch k {
	case kInt:
		v := 10 + g.rng.IntN(90)
		if g.pct(40) {
			v = g.rng.IntN(14) - 2
		}
		if v < 0 {
			return "(" + strconv.Itoa(v) + ")"
		}
		return strconv.Itoa(v)
	case kNum:
		return pickOne(g.rng, []string{"2.5", "0.5", "3", "10.75", "12.5", "25.25", "40.0"})
	case kText:
		return quote(flavoredText(g.rng, pickOne(g.rng, textFlavors)))
	case kBool:
		return pickOne(g.rng, []string{"true", "false"})
	case kJSON:
		return quote(randomJSON(g.rng, g.pct(30))) + "::jsonb"
	case kArr:
		return quote(pickOne(g.rng, append(slices.Clone(mildArrs), poisonArrs...))) + "::integer[]"
	case kTS:
		return pickOne(g.rng, []string{"'2021-03-01 00:00:00+00'::timestamptz", "'2022-06-01 12:00:00+00'::timestamptz", "'2024-01-01 00:00:00+00'::timestamptz"})
	}
	panic("unreachable")
}

func kindType(k kind) string {
	return [...]string{"integer", "numeric", "text", "boolean", "jsonb", "integer[]", "timestamptz"}[k]
}

// expr is an expression of kind k over sc.
func (g *stmtGen) expr(k kind, sc []ref, depth int) string {
	if r, ok := g.pick(sc, k); ok && (depth <= 0 || g.pct(35)) {
		return r.sql()
	}
	if depth <= 0 {
		return g.lit(k)
	}
	for range 12 {
		if e, ok := g.composite(k, sc, depth-1); ok {
			return e
		}
	}
	return g.lit(k)
}

// composite is one expression form of kind k, or false when sc lacks
// what it needs.
func (g *stmtGen) composite(k kind, sc []ref, d int) (string, bool) {
	col := func(k kind) (string, bool) {
		r, ok := g.pick(sc, k)
		return r.sql(), ok
	}
	nz := func() int { return 1 + g.rng.IntN(5) }
	switch k {
	case kInt:
		switch g.rng.IntN(17) {
		case 0:
			return fmt.Sprintf("(%s / %d)", g.expr(kInt, sc, d), nz()), true
		case 1:
			c, ok := col(kInt)
			return fmt.Sprintf("(%d / %s)", 10+g.rng.IntN(20), c), ok
		case 2:
			c, ok := col(kInt)
			return fmt.Sprintf("(%d / (%s - %d))", 1+g.rng.IntN(30), c, g.rng.IntN(8)), ok
		case 3:
			c, ok := col(kText)
			return fmt.Sprintf("(%s)::integer", c), ok
		case 4:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s ->> 'k')::integer", c), ok
		case 5:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s #>> '{a,b}')::integer", c), ok
		case 6:
			c, ok := col(kArr)
			return fmt.Sprintf("%s[%d]", c, 1+g.rng.IntN(3)), ok
		case 7:
			c, ok := col(kArr)
			return fmt.Sprintf("cardinality(%s)", c), ok
		case 8:
			return fmt.Sprintf("length(%s)", g.expr(kText, sc, d)), true
		case 9:
			return fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", g.pred(sc, d), g.expr(kInt, sc, d), g.expr(kInt, sc, d)), true
		case 10:
			return fmt.Sprintf("coalesce(%s, %d)", g.expr(kInt, sc, d), g.rng.IntN(5)), true
		case 11:
			return fmt.Sprintf("(%s + %s)", g.expr(kInt, sc, d), g.expr(kInt, sc, d)), true
		case 12:
			return g.scalarSub(kInt, sc, d)
		case 13:
			c, ok := col(kTS)
			return fmt.Sprintf("extract(year FROM %s)::integer", c), ok
		case 14:
			c, ok := col(kInt)
			return fmt.Sprintf("(%d %% %s)", 7+g.rng.IntN(20), c), ok
		case 15:
			c, ok := col(kText)
			return fmt.Sprintf("((regexp_match(%s, '[0-9]+'))[1])::integer", c), ok
		default:
			c, ok := col(kInt)
			return fmt.Sprintf("(%s * %s)", c, g.expr(kInt, sc, d)), ok
		}
	case kNum:
		switch g.rng.IntN(7) {
		case 0:
			c, ok := col(kNum)
			return fmt.Sprintf("(%s / (%s - 2.5))", g.expr(kNum, sc, d), c), ok
		case 1:
			return fmt.Sprintf("round(%s, 1)", g.expr(kNum, sc, d)), true
		case 2:
			c, ok := col(kText)
			return fmt.Sprintf("(%s)::numeric", c), ok
		case 3:
			return fmt.Sprintf("(%s * 2)", g.expr(kNum, sc, d)), true
		case 4:
			return fmt.Sprintf("(%s)::numeric", g.expr(kInt, sc, d)), true
		case 5:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s ->> 'k')::numeric", c), ok
		default:
			return g.scalarSub(kNum, sc, d)
		}
	case kText:
		switch g.rng.IntN(14) {
		case 0:
			return fmt.Sprintf("upper(%s)", g.expr(kText, sc, d)), true
		case 1:
			return fmt.Sprintf("(%s || '-' || %s)", g.expr(kText, sc, d), g.expr(kText, sc, d)), true
		case 2:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s ->> 's')", c), ok
		case 3:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s #>> '{a,b}')", c), ok
		case 4:
			c, ok := col(kText)
			return fmt.Sprintf("(regexp_match(%s, '([a-z]+)'))[1]", c), ok
		case 5:
			return fmt.Sprintf("substr(%s, 1, 2)", g.expr(kText, sc, d)), true
		case 6:
			return fmt.Sprintf("CASE WHEN %s THEN %s ELSE %s END", g.pred(sc, d), g.expr(kText, sc, d), g.lit(kText)), true
		case 7:
			return fmt.Sprintf("(%s)::text", g.expr(kInt, sc, d)), true
		case 8:
			c, ok := col(kTS)
			return fmt.Sprintf("to_char(%s, 'YYYY-MM')", c), ok
		case 9:
			return g.scalarSub(kText, sc, d)
		case 10:
			c, ok := col(kText)
			return fmt.Sprintf("regexp_replace(%s, '[aeiou]', '*', 'g')", c), ok
		case 11:
			c, ok := col(kText)
			return fmt.Sprintf("((%s)::date)::text", c), ok
		case 12:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s -> 'a')::text", c), ok
		default:
			return fmt.Sprintf("split_part(%s, ' ', 1)", g.expr(kText, sc, d)), true
		}
	case kBool:
		return g.pred(sc, d), true
	case kJSON:
		switch g.rng.IntN(4) {
		case 0:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s -> 'a')", c), ok
		case 1:
			return fmt.Sprintf("jsonb_build_object('v', %s)", g.expr(kInt, sc, d)), true
		case 2:
			c, ok := col(kJSON)
			return fmt.Sprintf("(%s - 'arr')", c), ok
		default:
			return fmt.Sprintf("to_jsonb(%s)", g.expr(kText, sc, d)), true
		}
	case kArr:
		switch g.rng.IntN(4) {
		case 0:
			c, ok := col(kArr)
			return fmt.Sprintf("array_append(%s, %s)", c, g.expr(kInt, sc, d)), ok
		case 1:
			return fmt.Sprintf("ARRAY[%s, %s]", g.expr(kInt, sc, d), g.expr(kInt, sc, d)), true
		case 2:
			c, ok := col(kArr)
			return fmt.Sprintf("array_remove(%s, 0)", c), ok
		default:
			return g.scalarSub(kArr, sc, d)
		}
	case kTS:
		switch g.rng.IntN(3) {
		case 0:
			c, ok := col(kTS)
			return fmt.Sprintf("(%s + interval '1 day')", c), ok
		case 1:
			c, ok := col(kTS)
			return fmt.Sprintf("date_trunc('month', %s)", c), ok
		default:
			c, ok := col(kText)
			return fmt.Sprintf("(%s)::timestamptz", c), ok
		}
	}
	return "", false
}

// scalarSub is a scalar subquery of kind k on a readable table, correlated
// with sc half of the time.
func (g *stmtGen) scalarSub(k kind, outer []ref, d int) (string, bool) {
	tables := g.readableTables()
	if len(tables) == 0 {
		return "", false
	}
	tb := pickOne(g.rng, tables)
	x := g.alias()
	sc := scopeOf(x, tb.readable())
	where := g.subWhere(sc, outer, d)
	switch k {
	case kInt:
		if g.pct(50) {
			return fmt.Sprintf("(SELECT count(*) FROM %s %s%s)", tb.name, x, where), true
		}
		e := g.expr(kInt, sc, d)
		return fmt.Sprintf("(SELECT max(%s) FROM %s %s%s)", e, tb.name, x, where), true
	case kNum:
		e := g.expr(kInt, sc, d)
		return fmt.Sprintf("(SELECT sum(%s)::numeric FROM %s %s%s)", e, tb.name, x, where), true
	case kText:
		e := g.expr(kText, sc, d)
		return fmt.Sprintf("(SELECT string_agg(%s, ',' ORDER BY %s) FROM %s %s%s)", e, e, tb.name, x, where), true
	case kArr:
		e := g.expr(kInt, sc, d)
		return fmt.Sprintf("(SELECT array_agg(%s ORDER BY %s) FROM %s %s%s)", e, e, tb.name, x, where), true
	}
	return "", false
}

// subWhere is a subquery's WHERE over its own scope, correlated with the
// outer one sometimes.
func (g *stmtGen) subWhere(sc, outer []ref, d int) string {
	if g.pct(15) {
		return ""
	}
	// An unqualified outer column would resolve to the subquery's own
	// column of that name, if it has one: only qualified ones correlate.
	outer = slices.DeleteFunc(slices.Clone(outer), func(r ref) bool { return r.alias == "" })
	all := sc
	if len(outer) > 0 && g.pct(50) {
		// A correlation that compares like with like.
		for range 4 {
			o := pickOne(g.rng, outer)
			if in, ok := g.pick(sc, o.col.kind()); ok && (o.col.kind() == kInt || o.col.kind() == kText) {
				return " WHERE " + in.sql() + " = " + o.sql() + " AND " + g.pred(sc, d)
			}
		}
		all = append(slices.Clone(sc), outer...)
	}
	return " WHERE " + g.pred(all, d)
}

// pred is a boolean expression over sc.
func (g *stmtGen) pred(sc []ref, d int) string {
	if d > 0 && g.pct(35) {
		a, b := g.pred(sc, d-1), g.pred(sc, d-1)
		switch g.rng.IntN(5) {
		case 0, 1:
			return "(" + a + " AND " + b + ")"
		case 2, 3:
			return "(" + a + " OR " + b + ")"
		default:
			return "NOT (" + a + ")"
		}
	}
	for range 12 {
		if p, ok := g.atom(sc, d); ok {
			return p
		}
	}
	return pickOne(g.rng, []string{"true", "1 = 1", "false"})
}

func (g *stmtGen) atom(sc []ref, d int) (string, bool) {
	cmp := func() string { return pickOne(g.rng, []string{"=", "<>", "<", ">", "<=", ">="}) }
	if g.pct(25) {
		return g.fragile(sc)
	}
	switch g.rng.IntN(11) {
	case 0, 1, 2:
		if !g.has(sc, kInt) && d <= 0 {
			return "", false
		}
		e := g.expr(kInt, sc, d+1)
		switch g.rng.IntN(5) {
		case 0:
			return fmt.Sprintf("%s %s %s", e, cmp(), g.lit(kInt)), true
		case 1:
			return fmt.Sprintf("%s %s %s", e, cmp(), g.expr(kInt, sc, d)), true
		case 2:
			a := 10 + g.rng.IntN(80)
			return fmt.Sprintf("%s BETWEEN %d AND %d", e, a, a+g.rng.IntN(30)), true
		case 3:
			return fmt.Sprintf("%s IN (%s, %s, %s)", e, g.lit(kInt), g.lit(kInt), g.lit(kInt)), true
		default:
			return e + pickOne(g.rng, []string{" IS NULL", " IS NOT NULL"}), true
		}
	case 3, 4:
		c, ok := g.pick(sc, kText)
		if !ok {
			return "", false
		}
		e := c.sql()
		if g.pct(30) {
			e = g.expr(kText, sc, d)
		}
		switch g.rng.IntN(9) {
		case 0:
			return fmt.Sprintf("%s = %s", e, g.lit(kText)), true
		case 1:
			return e + pickOne(g.rng, []string{" LIKE 'a%'", " LIKE '%b%'", " NOT LIKE '_'", " ILIKE 'Z%'"}), true
		case 2:
			return e + " ~ " + pickOne(g.rng, patterns), true
		case 3:
			return "regexp_like(" + e + ", " + pickOne(g.rng, patterns) + ")", true
		case 4:
			return e + " ~* 'AB'", true
		case 5:
			return fmt.Sprintf("%s IN (%s, %s)", e, g.lit(kText), g.lit(kText)), true
		case 6:
			return fmt.Sprintf("(%s)::date < '2024-06-01'", e), true
		case 7:
			return "(regexp_match(" + e + ", '([0-9])'))[1] = '1'", true
		default:
			return e + " < " + g.lit(kText), true
		}
	case 5:
		if !g.has(sc, kNum) {
			return "", false
		}
		return fmt.Sprintf("%s %s %s", g.expr(kNum, sc, d), cmp(), g.lit(kNum)), true
	case 6:
		c, ok := g.pick(sc, kBool)
		if !ok {
			return "", false
		}
		return pickOne(g.rng, []string{c.sql(), "NOT " + c.sql(), c.sql() + " IS TRUE", c.sql() + " IS NOT FALSE"}), true
	case 7:
		c, ok := g.pick(sc, kJSON)
		if !ok {
			return "", false
		}
		n := c.sql()
		return pickOne(g.rng, []string{n + " ? 'k'", n + ` @> '{"k": 3}'`, "(" + n + " ->> 'k') = '3'",
			"(" + n + " #>> '{a,b}')::integer > 0", "(" + n + " -> 'arr') IS NOT NULL", "(" + n + " ->> 'k')::integer < 3"}), true
	case 8:
		c, ok := g.pick(sc, kArr)
		if !ok {
			return "", false
		}
		n := c.sql()
		return pickOne(g.rng, []string{n + " @> ARRAY[2]", n + "[1] = 3", "3 = ANY(" + n + ")", "cardinality(" + n + ") > 1", n + "[2] > " + n + "[1]"}), true
	case 9:
		c, ok := g.pick(sc, kTS)
		if !ok {
			return "", false
		}
		return fmt.Sprintf("%s %s %s", c.sql(), cmp(), g.lit(kTS)), true
	default:
		if d <= 0 {
			return "", false
		}
		return g.subPred(sc, d-1)
	}
}

// fragile is a comparison that raises on some values: on the mild values
// of a region rarely, on rows outside a fence often.
func (g *stmtGen) fragile(sc []ref) (string, bool) {
	if len(sc) == 0 {
		return "", false
	}
	r := pickOne(g.rng, sc)
	n := r.sql()
	switch r.col.kind() {
	case kInt:
		return pickOne(g.rng, []string{
			fmt.Sprintf("(%d / (%s - %d)) > 0", 100+g.rng.IntN(900), n, g.rng.IntN(8)),
			fmt.Sprintf("(%d / %s) < 5", 50+g.rng.IntN(50), n),
			fmt.Sprintf("(%d %% %s) = 0", 200+g.rng.IntN(100), n),
			fmt.Sprintf("((%s)::text)::date IS NULL", n),
		}), true
	case kNum:
		return fmt.Sprintf("(1 / (%s - 2.5)) > 0", n), true
	case kText:
		// Mostly the cast its mild values survive: it raises then only on
		// poison, which rows outside a fence are full of.
		flavor := r.col.flavor
		if flavor == "" || g.pct(15) {
			flavor = pickOne(g.rng, textFlavors)
		}
		switch flavor {
		case "int":
			return pickOne(g.rng, []string{fmt.Sprintf("(%s)::integer > %d", n, 10+g.rng.IntN(80)), fmt.Sprintf("(%s)::numeric < 50", n)}), true
		case "date":
			return pickOne(g.rng, []string{fmt.Sprintf("(%s)::date > '2021-06-01'", n), fmt.Sprintf("(%s)::timestamptz < '2024-01-01'", n)}), true
		}
		return fmt.Sprintf("(10 / (length(%s) - 1)) > 0", n), true
	case kJSON:
		return pickOne(g.rng, []string{
			fmt.Sprintf("(%s ->> 'k')::integer > 40", n),
			fmt.Sprintf("(%s #>> '{a,b}')::integer = 17", n),
			fmt.Sprintf("(100 / ((%s ->> 'k')::integer)) > 1", n),
		}), true
	case kArr:
		return pickOne(g.rng, []string{
			fmt.Sprintf("(%s[1] / %s[2]) >= 0", n, n),
			fmt.Sprintf("(60 / %s[1]) > 2", n),
		}), true
	}
	return "", false
}

// subPred is EXISTS, IN or a comparison with a subquery.
func (g *stmtGen) subPred(outer []ref, d int) (string, bool) {
	tables := g.readableTables()
	if len(tables) == 0 {
		return "", false
	}
	tb := pickOne(g.rng, tables)
	x := g.alias()
	sc := scopeOf(x, tb.readable())
	switch g.rng.IntN(3) {
	case 0:
		return fmt.Sprintf("EXISTS (SELECT 1 FROM %s %s%s)", tb.name, x, g.subWhere(sc, outer, d)), true
	case 1:
		o, ok := g.pick(outer, kInt)
		in, ok2 := g.pick(sc, kInt)
		if !ok || !ok2 {
			return "", false
		}
		return fmt.Sprintf("%s %sIN (SELECT %s FROM %s %s%s)", o.sql(), pickOne(g.rng, []string{"", "NOT "}), in.sql(), tb.name, x, g.subWhere(sc, nil, d)), true
	default:
		o, ok := g.pick(outer, kInt)
		if !ok {
			return "", false
		}
		s, _ := g.scalarSub(kInt, outer, d)
		return fmt.Sprintf("%s < %s", o.sql(), s), true
	}
}

// item is one select-list entry: its SQL, its kind, and the column it
// names when it is a bare column reference.
func (g *stmtGen) item(sc []ref, d int) (string, kind, string) {
	if g.pct(45) && len(sc) > 0 {
		r := pickOne(g.rng, sc)
		return r.sql(), r.col.kind(), r.col.name
	}
	k := pickOne(g.rng, []kind{kInt, kInt, kInt, kNum, kText, kText, kBool, kJSON, kArr, kTS})
	return g.expr(k, sc, d), k, ""
}

// selectList draws n items, named so that no two output columns clash
// with each other or with taken (rows are JSON objects keyed by column
// name).
func (g *stmtGen) selectList(sc []ref, n, d int, taken ...string) (items []string, out []column) {
	used := map[string]bool{}
	for _, name := range taken {
		used[name] = true
	}
	for i := range n {
		e, k, name := g.item(sc, d)
		if name == "" || used[name] {
			j := i + 1
			for used["v"+strconv.Itoa(j)] {
				j++
			}
			name = "v" + strconv.Itoa(j)
			e += " AS " + name
		}
		used[name] = true
		items = append(items, e)
		out = append(out, column{name: name, typ: kindType(k)})
	}
	return items, out
}

// orderAll orders by every output column, so that the order is fixed up
// to identical rows, with a LIMIT and OFFSET sometimes.
func (g *stmtGen) orderAll(n int) string {
	pos := make([]string, n)
	for i := range pos {
		pos[i] = strconv.Itoa(i + 1)
	}
	s := " ORDER BY " + strings.Join(pos, ", ")
	if g.pct(30) {
		s += fmt.Sprintf(" LIMIT %d", 1+g.rng.IntN(8))
		if g.pct(40) {
			s += fmt.Sprintf(" OFFSET %d", g.rng.IntN(5))
		}
	}
	return s
}

func (g *stmtGen) fromAlias(tb *table) (from, alias string) {
	if g.pct(50) {
		return tb.name, ""
	}
	return tb.name + " a", "a"
}

// next draws the next statement.
func (g *stmtGen) next() stmt {
	g.aliases = 0
	if g.pct(12) {
		return g.outside()
	}
	for {
		var s stmt
		var ok bool
		switch k := g.rng.IntN(100); {
		case k < 26:
			s, ok = g.simpleSelect()
		case k < 36:
			s, ok = g.aggregate()
		case k < 44:
			s, ok = g.join()
		case k < 50:
			s, ok = g.fromSubquery()
		case k < 66:
			s, ok = g.update()
		case k < 78:
			s, ok = g.delete()
		default:
			s, ok = g.insert()
		}
		if ok {
			s.inside = true
			return s
		}
	}
}

func (g *stmtGen) simpleSelect() (stmt, bool) {
	tables := g.readableTables()
	if len(tables) == 0 {
		return stmt{}, false
	}
	tb := pickOne(g.rng, tables)
	from, a := g.fromAlias(tb)
	sc := scopeOf(a, tb.readable())
	if id, ok := g.pickName(sc, "id"); ok && g.pct(35) {
		// Ordered by the primary key alone (a total order), often with a
		// LIMIT: a plan may then stop early, in key order, or read every
		// row inside the fence and sort.
		items, _ := g.selectList(sc, 1+g.rng.IntN(3), 2, "id")
		q := "SELECT " + id + ", " + strings.Join(items, ", ") + " FROM " + from + " WHERE " + g.pred(sc, 2) + " ORDER BY " + id
		if g.pct(60) {
			q += fmt.Sprintf(" LIMIT %d", 1+g.rng.IntN(6))
		}
		return stmt{sql: q, op: "select"}, true
	}
	items, out := g.selectList(sc, 1+g.rng.IntN(4), 2)
	q := "SELECT "
	if g.pct(10) {
		q += "DISTINCT "
	}
	q += strings.Join(items, ", ") + " FROM " + from
	if g.pct(85) {
		q += " WHERE " + g.pred(sc, 2)
	}
	return stmt{sql: q + g.orderAll(len(out)), op: "select"}, true
}

func (g *stmtGen) aggregate() (stmt, bool) {
	tables := g.readableTables()
	if len(tables) == 0 {
		return stmt{}, false
	}
	tb := pickOne(g.rng, tables)
	from, a := g.fromAlias(tb)
	sc := scopeOf(a, tb.readable())
	var items []string
	var group string
	if g.pct(75) {
		k := pickOne(g.rng, []kind{kInt, kText, kBool})
		group = g.expr(k, sc, 1)
		items = append(items, group+" AS k1")
	}
	items = append(items, "count(*) AS n")
	for i := range 1 + g.rng.IntN(3) {
		var e string
		switch g.rng.IntN(7) {
		case 0:
			e = "sum(" + g.expr(kInt, sc, 1) + ")"
		case 1:
			t := g.expr(kText, sc, 1)
			e = "string_agg(" + t + ", ',' ORDER BY " + t + ")"
		case 2:
			x := g.expr(kInt, sc, 1)
			e = "array_agg(" + x + " ORDER BY " + x + ")"
		case 3:
			e = "count(" + g.expr(kText, sc, 1) + ")"
		case 4:
			e = "max(" + g.expr(kText, sc, 1) + ")"
		case 5:
			e = "bool_or(" + g.pred(sc, 1) + ")"
		default:
			e = "avg(" + g.expr(kInt, sc, 1) + ")"
		}
		items = append(items, fmt.Sprintf("%s AS v%d", e, i+1))
	}
	q := "SELECT " + strings.Join(items, ", ") + " FROM " + from
	if g.pct(70) {
		q += " WHERE " + g.pred(sc, 1)
	}
	if group != "" {
		q += " GROUP BY " + group
		switch g.rng.IntN(4) {
		case 0:
			q += fmt.Sprintf(" HAVING count(*) > %d", g.rng.IntN(4))
		case 1:
			s, _ := g.scalarSub(kInt, nil, 1)
			if s != "" {
				q += " HAVING count(*) >= " + s + " / 4"
			}
		case 2:
			q += " HAVING sum(" + g.expr(kInt, sc, 1) + ") > 2"
		}
	}
	return stmt{sql: q + g.orderAll(len(items)), op: "select"}, true
}

func (g *stmtGen) join() (stmt, bool) {
	tables := g.readableTables()
	if len(tables) == 0 {
		return stmt{}, false
	}
	ta, tb := pickOne(g.rng, tables), pickOne(g.rng, tables)
	sa, sb := scopeOf("a", ta.readable()), scopeOf("b", tb.readable())
	both := append(slices.Clone(sa), sb...)
	var on string
	for range 6 {
		x := pickOne(g.rng, sa)
		if y, ok := g.pick(sb, x.col.kind()); ok && (x.col.kind() == kInt || x.col.kind() == kText) {
			on = x.sql() + " = " + y.sql()
			break
		}
	}
	if on == "" {
		on = g.pred(both, 0)
	}
	if g.pct(30) {
		on += " AND " + g.pred(both, 1)
	}
	items, out := g.selectList(both, 2+g.rng.IntN(3), 1)
	q := fmt.Sprintf("SELECT %s FROM %s a %sJOIN %s b ON %s", strings.Join(items, ", "), ta.name,
		pickOne(g.rng, []string{"", "LEFT ", "INNER "}), tb.name, on)
	if g.pct(70) {
		q += " WHERE " + g.pred(both, 1)
	}
	return stmt{sql: q + g.orderAll(len(out)), op: "select"}, true
}

func (g *stmtGen) fromSubquery() (stmt, bool) {
	tables := g.readableTables()
	if len(tables) == 0 {
		return stmt{}, false
	}
	tb := pickOne(g.rng, tables)
	sc := scopeOf("a", tb.readable())
	var inner []string
	var cols []column
	for i := range 1 + g.rng.IntN(3) {
		e, k, _ := g.item(sc, 1)
		name := "v" + strconv.Itoa(i+1)
		inner = append(inner, e+" AS "+name)
		cols = append(cols, column{name: name, typ: kindType(k)})
	}
	sub := "SELECT " + strings.Join(inner, ", ") + " FROM " + tb.name + " a"
	if g.pct(70) {
		sub += " WHERE " + g.pred(sc, 1)
	}
	ss := scopeOf("s", cols)
	items, out := g.selectList(ss, 1+g.rng.IntN(3), 1)
	var q string
	if g.pct(50) {
		q = "SELECT " + strings.Join(items, ", ") + " FROM (" + sub + ") s"
	} else {
		q = "WITH s AS (" + sub + ") SELECT " + strings.Join(items, ", ") + " FROM s"
	}
	if g.pct(60) {
		q += " WHERE " + g.pred(ss, 1)
	}
	return stmt{sql: q + g.orderAll(len(out)), op: "select"}, true
}

// setValue is a new value for c: a literal, or an expression over sc.
func (g *stmtGen) setValue(c column, sc []ref) string {
	if g.pct(10) {
		return "NULL"
	}
	if len(sc) > 0 && g.pct(50) {
		return g.expr(c.kind(), sc, 1)
	}
	return g.lit(c.kind())
}

// writeWhere is the WHERE of an UPDATE or DELETE on tb.
func (g *stmtGen) writeWhere(sc []ref) string {
	switch {
	case len(sc) == 0:
		// The table's own columns cannot be read: all rows, or rows
		// chosen through another table.
		if g.pct(40) {
			if p, ok := g.subPred(nil, 1); ok {
				return " WHERE " + p
			}
		}
		return ""
	case g.pct(8):
		return ""
	case g.pct(15):
		if id, ok := g.pickName(sc, "id"); ok {
			return fmt.Sprintf(" WHERE %s = %d", id, 1+g.rng.IntN(60))
		}
	}
	return " WHERE " + g.pred(sc, 2)
}

func (g *stmtGen) pickName(sc []ref, name string) (string, bool) {
	for _, r := range sc {
		if r.col.name == name {
			return r.sql(), true
		}
	}
	return "", false
}

func (g *stmtGen) returning(sc []ref) string {
	if len(sc) == 0 || !g.pct(25) {
		return ""
	}
	items, _ := g.selectList(sc, 1+g.rng.IntN(3), 1)
	return " RETURNING " + strings.Join(items, ", ")
}

func (g *stmtGen) update() (stmt, bool) {
	tables := g.writeTables("update")
	if len(tables) == 0 {
		return stmt{}, false
	}
	tb := pickOne(g.rng, tables)
	cols := tb.writable("update")
	if g.pct(20) {
		// UPDATE ... FROM: the rows to change chosen through another table.
		others := g.readableTables()
		if len(others) > 0 && len(tb.readable()) > 0 {
			ob := pickOne(g.rng, others)
			sa, sb := scopeOf("a", tb.readable()), scopeOf("b", ob.readable())
			if on, ok := g.equijoin(sa, sb); ok {
				c := pickOne(g.rng, cols)
				q := fmt.Sprintf("UPDATE %s AS a SET %s = %s FROM %s AS b WHERE %s AND %s", tb.name, c.name, g.setValue(c, sa), ob.name, on, g.pred(sb, 1))
				if g.pct(50) {
					q += " AND " + g.pred(sa, 1)
				}
				return stmt{sql: q + g.returning(sa), op: "update"}, true
			}
		}
	}
	from, a := g.fromAlias(tb)
	sc := scopeOf(a, tb.readable())
	var sets []string
	set := subset(g.rng, cols, 1)
	for _, c := range set[:min(len(set), 1+g.rng.IntN(2))] {
		sets = append(sets, c.name+" = "+g.setValue(c, sc))
	}
	q := "UPDATE " + from + " SET " + strings.Join(sets, ", ") + g.writeWhere(sc) + g.returning(sc)
	return stmt{sql: q, op: "update"}, true
}

// equijoin is a.x = b.y over two columns of one kind.
func (g *stmtGen) equijoin(sa, sb []ref) (string, bool) {
	for range 6 {
		x := pickOne(g.rng, sa)
		if y, ok := g.pick(sb, x.col.kind()); ok && (x.col.kind() == kInt || x.col.kind() == kText) {
			return x.sql() + " = " + y.sql(), true
		}
	}
	return "", false
}

func (g *stmtGen) delete() (stmt, bool) {
	tables := g.writeTables("delete")
	if len(tables) == 0 {
		return stmt{}, false
	}
	tb := pickOne(g.rng, tables)
	if g.pct(20) {
		others := g.readableTables()
		if len(others) > 0 && len(tb.readable()) > 0 {
			ob := pickOne(g.rng, others)
			sa, sb := scopeOf("a", tb.readable()), scopeOf("b", ob.readable())
			if on, ok := g.equijoin(sa, sb); ok {
				q := fmt.Sprintf("DELETE FROM %s AS a USING %s AS b WHERE %s AND %s", tb.name, ob.name, on, g.pred(sb, 1))
				return stmt{sql: q + g.returning(sa), op: "delete"}, true
			}
		}
	}
	from, a := g.fromAlias(tb)
	sc := scopeOf(a, tb.readable())
	return stmt{sql: "DELETE FROM " + from + g.writeWhere(sc) + g.returning(sc), op: "delete"}, true
}

func (g *stmtGen) insert() (stmt, bool) {
	tables := g.writeTables("insert")
	if len(tables) == 0 {
		return stmt{}, false
	}
	tb := pickOne(g.rng, tables)
	cols := tb.writable("insert")
	sc := scopeOf("", tb.readable())
	if g.pct(35) {
		if s, ok := g.insertSelect(tb, cols); ok {
			return s, true
		}
	}
	n := 1 + g.rng.IntN(3)
	if g.pct(10) {
		n = 4 + g.rng.IntN(5) // over max_rows, often
	}
	var rows []string
	for range n {
		var vals []string
		for _, c := range cols {
			if c.name == "id" {
				vals = append(vals, strconv.Itoa(insertIDLow+g.rng.IntN(insertIDHigh-insertIDLow+1)))
				continue
			}
			vals = append(vals, g.setValue(c, nil))
		}
		rows = append(rows, "("+strings.Join(vals, ", ")+")")
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", tb.name, strings.Join(colNames(cols), ", "), strings.Join(rows, ", "))
	return stmt{sql: q + g.returning(sc), op: "insert"}, true
}

// insertSelect copies rows of a readable table: ids shifted into the
// insert range, other columns from expressions of the same kind.
func (g *stmtGen) insertSelect(tb *table, cols []column) (stmt, bool) {
	var sources []*table
	for _, o := range g.readableTables() {
		if slices.ContainsFunc(o.readable(), func(c column) bool { return c.name == "id" }) {
			sources = append(sources, o)
		}
	}
	if len(sources) == 0 {
		return stmt{}, false
	}
	src := pickOne(g.rng, sources)
	sb := scopeOf("b", src.readable())
	var vals []string
	for _, c := range cols {
		if c.name == "id" {
			vals = append(vals, fmt.Sprintf("b.id + %d", insertOffsetLow+g.rng.IntN(insertOffsetHigh-insertOffsetLow+1)))
			continue
		}
		vals = append(vals, g.setValue(c, sb))
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s b", tb.name, strings.Join(colNames(cols), ", "), strings.Join(vals, ", "), src.name)
	if g.pct(80) {
		q += " WHERE " + g.pred(sb, 1)
	}
	q += fmt.Sprintf(" ORDER BY b.id LIMIT %d", 1+g.rng.IntN(6))
	return stmt{sql: q, op: "insert"}, true
}

// outside draws a statement that steps outside the bound on purpose.
func (g *stmtGen) outside() stmt {
	tb := pickOne(g.rng, g.w.tables)
	all := scopeOf("", tb.cols)
	var unreadable []ref
	readable := map[string]bool{}
	for _, c := range tb.readable() {
		readable[c.name] = true
	}
	for _, r := range all {
		if !readable[r.col.name] {
			unreadable = append(unreadable, r)
		}
	}
	h := g.w.hidden
	hs := scopeOf("", h.cols)
	switch g.rng.IntN(9) {
	case 0, 1:
		if len(unreadable) > 0 {
			// A column no select rule lists, in the select list or WHERE.
			u := pickOne(g.rng, unreadable)
			items, out := g.selectList(scopeOf("", tb.readable()), 1+g.rng.IntN(2), 1)
			items = append(items, u.sql()+" AS u")
			where := g.pred(append(scopeOf("", tb.readable()), u), 1)
			return stmt{sql: fmt.Sprintf("SELECT %s FROM %s WHERE %s%s", strings.Join(items, ", "), tb.name, where, g.orderAll(len(out)+1)), op: "select"}
		}
		fallthrough
	case 2:
		// The table no rule names.
		items, out := g.selectList(hs, 1+g.rng.IntN(3), 1)
		return stmt{sql: fmt.Sprintf("SELECT %s FROM %s WHERE %s%s", strings.Join(items, ", "), h.name, g.pred(hs, 1), g.orderAll(len(out))), op: "select"}
	case 3:
		if sc := scopeOf("", tb.readable()); len(sc) > 0 {
			if id, ok := g.pickName(sc, "id"); ok {
				return stmt{sql: fmt.Sprintf("SELECT %s FROM %s WHERE %s IN (SELECT id FROM %s WHERE %s) ORDER BY 1", id, tb.name, id, h.name, g.pred(hs, 1)), op: "select"}
			}
		}
		return stmt{sql: fmt.Sprintf("SELECT count(*) FROM %s", h.name), op: "select"}
	case 4:
		// A column no update rule lists.
		c := pickOne(g.rng, tb.data())
		return stmt{sql: fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s", tb.name, c.name, g.lit(c.kind()), g.pred(all, 1)), op: "update"}
	case 5:
		return stmt{sql: fmt.Sprintf("DELETE FROM %s WHERE %s", pickOne(g.rng, []string{tb.name, h.name}), g.pred(all, 1)), op: "delete"}
	case 6:
		c := pickOne(g.rng, tb.data())
		return stmt{sql: fmt.Sprintf("INSERT INTO %s (id, %s) VALUES (%d, %s)", tb.name, c.name, insertIDLow+g.rng.IntN(1000), g.lit(c.kind())), op: "insert"}
	case 7:
		items, out := g.selectList(all, 1+g.rng.IntN(2), 0)
		return stmt{sql: fmt.Sprintf("SELECT %s FROM %s%s FOR UPDATE", strings.Join(items, ", "), tb.name, g.orderAll(len(out))), op: "select"}
	default:
		return stmt{sql: pickOne(g.rng, []string{"SELEC 1", "SELECT 1; SELECT 2", "SELECT * FROM nosuch",
			"UPDATE " + tb.name + " SET", "TRUNCATE " + h.name, "SELECT soundex(" + tb.data()[0].name + ") FROM " + tb.name}), op: "other"}
	}
}
