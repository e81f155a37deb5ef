package noninterference_test

import (
	"fmt"
	mrand "math/rand/v2"
)

// sideGen draws hostile statements whose effect, were anything to run
// them, would depend on data outside the bound: a predicate over the table
// no rule names, or over columns no select rule lists (which the rows
// outside the fences and the free columns fill differently on each twin),
// choosing which rows of the probe table an UPDATE or DELETE locks and for
// how long, how many values an INSERT ... SELECT draws from its sequence,
// how large a value is, how long a statement runs. Each reads something
// outside the bound, so each is referred: nothing of it may run where the
// agent can tell (issue 22). The observer (observer_test.go) probes what
// they would leave behind.
type sideGen struct {
	rng *mrand.Rand
	w   *world
}

// sideShare is the percentage of a round's statements drawn by sideGen.
const sideShare = 8

// slowSQL takes about a second on a loaded test machine: what a statement
// drawn to lock returns, so that its locks, once taken, are held while the
// lock probes run.
const slowSQL = "(SELECT count(*) FROM generate_series(1, 2000000))"

func (g *sideGen) pct(p int) bool { return g.rng.IntN(100) < p }

// unreadable are the columns of tables named by rules that no select rule
// lists, by table: reading one refers; the rows outside the fences, and
// the free columns, differ between the twins.
func (g *sideGen) unreadable() map[*table][]column {
	out := map[*table][]column{}
	for _, tb := range g.w.tables {
		readable := map[string]bool{}
		for _, c := range tb.readable() {
			readable[c.name] = true
		}
		for _, c := range tb.cols {
			if !readable[c.name] {
				out[tb] = append(out[tb], c)
			}
		}
	}
	return out
}

// hiddenInt is a small non-negative integer computed from data outside
// the bound.
func (g *sideGen) hiddenInt() string {
	h := g.w.hidden
	switch g.rng.IntN(6) {
	case 1:
		return fmt.Sprintf("(SELECT count(*) FROM %s WHERE id %% 3 = %d)", h.name, g.rng.IntN(3))
	case 2:
		return fmt.Sprintf("(SELECT coalesce(max(id), 0) %% 97 FROM %s)", h.name)
	case 3:
		// The issue's: a character of a secret, as a number.
		for _, c := range h.data() {
			if c.kind() == kText {
				return fmt.Sprintf("(SELECT coalesce(ascii(min(%s)), 0) FROM %s)", c.name, h.name)
			}
		}
		for _, c := range h.data() {
			if c.kind() == kInt {
				return fmt.Sprintf("(SELECT coalesce(abs(sum(%s)), 0) %% 200 FROM %s)", c.name, h.name)
			}
		}
	case 4, 5:
		un := g.unreadable()
		var tables []*table
		for _, tb := range g.w.tables {
			if len(un[tb]) > 0 {
				tables = append(tables, tb)
			}
		}
		if len(tables) > 0 {
			tb := pickOne(g.rng, tables)
			c := pickOne(g.rng, un[tb])
			if g.pct(50) {
				// Every row of the table, those outside the fences too.
				return fmt.Sprintf("(SELECT count(%s) FROM %s)", c.name, tb.name)
			}
			return fmt.Sprintf("(SELECT count(*) FROM %s WHERE %s IS NULL)", tb.name, c.name)
		}
	}
	return fmt.Sprintf("(SELECT count(*) FROM %s)", h.name)
}

// hiddenPred is a predicate over data outside the bound, true on one twin
// and false on the other often enough.
func (g *sideGen) hiddenPred() string {
	n := g.hiddenInt()
	switch g.rng.IntN(3) {
	case 0:
		return n + " % 2 = 0"
	case 1:
		return fmt.Sprintf("%s > %d", n, 3+g.rng.IntN(60))
	}
	return n + " % 3 <> 1"
}

// next draws a statement.
func (g *sideGen) next() stmt {
	k := 1 + g.rng.IntN(notesRegion)
	switch g.rng.IntN(12) {
	case 0, 1:
		// Which rows are locked: one, or none.
		return stmt{sql: fmt.Sprintf("UPDATE notes SET body = body WHERE id = %d AND %s RETURNING %s AS n", k, g.hiddenPred(), slowSQL),
			op: "update", channel: "lock (which rows)", lock: true}
	case 2:
		// How many rows are locked.
		return stmt{sql: fmt.Sprintf("UPDATE notes SET body = body WHERE id <= %s %% 6 RETURNING id, %s AS n", g.hiddenInt(), slowSQL),
			op: "update", channel: "lock (which rows)", lock: true}
	case 3:
		return stmt{sql: fmt.Sprintf("DELETE FROM notes WHERE id = %d AND %s RETURNING %s AS n", k, g.hiddenPred(), slowSQL),
			op: "delete", channel: "lock (which rows)", lock: true}
	case 4:
		// How long a row is locked.
		return stmt{sql: fmt.Sprintf("UPDATE notes SET body = body WHERE id = %d RETURNING (SELECT count(*) FROM generate_series(1, CASE WHEN %s THEN 2000000 ELSE 1 END)) AS n",
			k, g.hiddenPred()), op: "update", channel: "lock (how long)", lock: true}
	case 5, 6:
		// The issue's: a sequence moved by a hidden value.
		return stmt{sql: fmt.Sprintf("INSERT INTO notes (body) SELECT 'x' FROM generate_series(1, %s)", g.hiddenInt()),
			op: "insert", channel: "sequence"}
	case 7:
		return stmt{sql: fmt.Sprintf("INSERT INTO notes (body) SELECT 'x' WHERE %s", g.hiddenPred()), op: "insert", channel: "sequence"}
	case 8:
		un := g.unreadable()
		for _, tb := range g.w.tables {
			if cols := un[tb]; len(cols) > 0 {
				c := pickOne(g.rng, cols)
				return stmt{sql: fmt.Sprintf("INSERT INTO notes (body) SELECT 'x' FROM %s WHERE %s IS NOT NULL", tb.name, c.name),
					op: "insert", channel: "sequence"}
			}
		}
		return stmt{sql: fmt.Sprintf("INSERT INTO notes (body) SELECT 'x' FROM %s", g.w.hidden.name), op: "insert", channel: "sequence"}
	case 9:
		// The issue's: a large value, or not, decoded by whatever runs it.
		return stmt{sql: fmt.Sprintf("SELECT repeat('x', CASE WHEN %s THEN 30000000 ELSE 1 END) AS v", g.hiddenPred()),
			op: "select", channel: "large value"}
	case 10:
		if g.pct(30) {
			return stmt{sql: fmt.Sprintf("SELECT pg_sleep(CASE WHEN %s THEN 1 ELSE 0 END)", g.hiddenPred()), op: "select", channel: "slow"}
		}
		return stmt{sql: fmt.Sprintf("SELECT count(*) FROM generate_series(1, CASE WHEN %s THEN 2000000 ELSE 1 END)", g.hiddenPred()),
			op: "select", channel: "slow"}
	}
	// The form on a table of the round: every row it reaches
	// locked (and those outside the fences too, were it run unfenced).
	tb := pickOne(g.rng, g.w.tables)
	if g.pct(30) {
		return stmt{sql: fmt.Sprintf("DELETE FROM %s WHERE %s", tb.name, g.hiddenPred()), op: "delete", channel: "rows of a table"}
	}
	c := pickOne(g.rng, tb.data())
	return stmt{sql: fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s", tb.name, c.name, c.name, g.hiddenPred()), op: "update", channel: "rows of a table"}
}
