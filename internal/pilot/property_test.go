package pilot_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// The property test: random schemas, data, bounds and statements against a
// real PostgreSQL, checking the Pilot's guarantees (invariant 5) on every
// statement it runs:
//
//   - a write that commits changed only rows that were inside its rule's
//     fence before, every new or changed row satisfies the rule's check,
//     only the rule's columns changed, and no more than max_rows rows;
//   - a refused statement changed nothing at all;
//   - a read returns no row outside the read fence of any table it reads,
//     and no more than max_rows rows.
//
// Statements the static check refers are also sent to the Pilot some of the
// time, with a marque (as a compromised control plane would): the Pilot's
// own check must refuse them and nothing may change.
//
// The seed is fixed and logged; HARBORMASTER_PROPERTY_SEED changes it and
// HARBORMASTER_PROPERTY_STATEMENTS the number of statements per round.

const (
	propRounds     = 3
	propStatements = 110 // per round
	propTarget     = "prop"
	propGrantee    = "agent:prop"
)

func propSeed(t *testing.T) uint64 {
	seed := uint64(20261130)
	if s := os.Getenv("HARBORMASTER_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HARBORMASTER_PROPERTY_SEED: %v", err)
		}
		seed = v
	}
	return seed
}

func TestPropertyGuards(t *testing.T) {
	t.Parallel()
	seed := propSeed(t)
	n := propStatements
	if s := os.Getenv("HARBORMASTER_PROPERTY_STATEMENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("HARBORMASTER_PROPERTY_STATEMENTS: %v", err)
		}
		n = v
	}
	t.Logf("seed %d (HARBORMASTER_PROPERTY_SEED=%d to repeat), %d rounds of %d statements", seed, seed, propRounds, n)
	var total propStats
	for round := range propRounds {
		rng := mrand.New(mrand.NewPCG(seed, uint64(round)))
		p := newPropRound(t, rng, round)
		st := p.run(t, n)
		t.Logf("round %d: %s", round, st)
		total.add(st)
	}
	t.Logf("total: %s", total)
	// The run must exercise both sides of every guard, or it proves little.
	if total.executed[sqlcheck.OpUpdate] == 0 || total.executed[sqlcheck.OpDelete] == 0 ||
		total.executed[sqlcheck.OpInsert] == 0 || total.executed[sqlcheck.OpSelect] == 0 {
		t.Errorf("some statement kind never executed: %s", total)
	}
	if total.refused[pilot.RefusedFence] == 0 || total.refused[pilot.RefusedMaxRows] == 0 || total.refused[pilot.RefusedCheck] == 0 {
		t.Errorf("some guard never refused: %s", total)
	}
}

type propStats struct {
	statements int
	executed   map[sqlcheck.Op]int
	refused    map[string]int
	static     int // referred by the static check, not sent
	truncated  int
	// raised is refusals by the target (a raising predicate met a row
	// behind the barrier); unknownReach is writes that ran although their
	// WHERE raises on some row behind it (the planner met rows in
	// another order).
	raised       int
	unknownReach int
}

func (s *propStats) add(o propStats) {
	if s.executed == nil {
		s.executed, s.refused = map[sqlcheck.Op]int{}, map[string]int{}
	}
	s.statements += o.statements
	s.raised += o.raised
	s.unknownReach += o.unknownReach
	s.static += o.static
	s.truncated += o.truncated
	for k, v := range o.executed {
		s.executed[k] += v
	}
	for k, v := range o.refused {
		s.refused[k] += v
	}
}

func (s propStats) String() string {
	return fmt.Sprintf("%d statements: executed %v, refused by the Pilot %v, referred statically %d, truncated reads %d, raised in the fence %d, ran though raising %d",
		s.statements, s.executed, s.refused, s.static, s.truncated, s.raised, s.unknownReach)
}

type propColumn struct {
	name, typ string // typ: integer, bigint, text, boolean
}

type propTable struct {
	name string
	cols []propColumn // cols[0] is id bigint primary key
	rows int
}

func (t *propTable) col(name string) propColumn {
	for _, c := range t.cols {
		if c.name == name {
			return c
		}
	}
	panic("no column " + name)
}

func (t *propTable) names() []string {
	out := make([]string, len(t.cols))
	for i, c := range t.cols {
		out[i] = c.name
	}
	return out
}

type propRound struct {
	rng     *mrand.Rand
	round   int
	dsn     string
	admin   *pgx.Conn
	tables  []*propTable
	pilot   *pilot.Pilot
	minter  *marque.Minter
	bound   *bound.Bound
	canon   []byte
	sig     []byte
	rules   []sqlcheck.Rule
	checker *sqlcheck.Checker
	nextID  int64

	// raising is on while statements are generated: their atoms may raise
	// on some rows (a division, a cast); raisers collects those atoms.
	// Fences and checks never raise.
	raising bool
	raisers []string

	// last is the target as of the last statement sent, and lastReceipts
	// its receipt count: nothing else changes the target.
	last         snapshot
	lastReceipts int
}

func newPropRound(t *testing.T, rng *mrand.Rand, round int) *propRound {
	t.Helper()
	ctx := context.Background()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	p := &propRound{rng: rng, round: round, dsn: dsn, nextID: 1000}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	p.admin = admin

	// The schema and the data.
	var ddl strings.Builder
	types := []string{"integer", "bigint", "text", "boolean"}
	for i := range 2 + rng.IntN(2) {
		tb := &propTable{name: fmt.Sprintf("t%d", i), cols: []propColumn{{"id", "bigint"}}, rows: 50 + rng.IntN(151)}
		for j := range 2 + rng.IntN(4) {
			tb.cols = append(tb.cols, propColumn{fmt.Sprintf("c%d", j+1), types[rng.IntN(len(types))]})
		}
		p.tables = append(p.tables, tb)
		fmt.Fprintf(&ddl, "CREATE TABLE public.%s (id bigint PRIMARY KEY", tb.name)
		for _, c := range tb.cols[1:] {
			fmt.Fprintf(&ddl, ", %s %s", c.name, c.typ)
		}
		ddl.WriteString(");\n")
		fmt.Fprintf(&ddl, "INSERT INTO public.%s VALUES ", tb.name)
		for r := 1; r <= tb.rows; r++ {
			if r > 1 {
				ddl.WriteString(", ")
			}
			fmt.Fprintf(&ddl, "(%d", r)
			for _, c := range tb.cols[1:] {
				ddl.WriteString(", " + p.value(c, true))
			}
			ddl.WriteString(")")
		}
		ddl.WriteString(";\nANALYZE public." + tb.name + ";\n")
	}
	if _, err := admin.Exec(ctx, ddl.String(), pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("schema: %v\n%s", err, ddl.String())
	}
	if err := pilot.InitTarget(ctx, dsn); err != nil {
		t.Fatal(err)
	}

	// Keys, a Pilot, and a random bound signed by the grantor.
	priv, pub, err := signing.GenerateEd25519("alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := signing.ParsePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	line, err := signing.AllowedSignersLine([]string{"alice@" + propTarget}, []string{signing.NamespaceDelegation}, pub)
	if err != nil {
		t.Fatal(err)
	}
	signers, err := signing.ParseAllowedSigners([]byte(line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cpPub, cpPriv, _ := ed25519.GenerateKey(rand.Reader)
	if p.minter, err = marque.NewMinter(marque.MinterConfig{Issuer: "prop", Key: cpPriv, Clock: time.Now}); err != nil {
		t.Fatal(err)
	}
	verifier, err := marque.NewVerifier(marque.VerifierConfig{Issuer: "prop", Key: cpPub, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	if p.pilot, err = pilot.New(ctx, pilot.Config{Target: propTarget, DSN: dsn}, verifier, signers); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pilot.Close)

	exp := time.Now().Add(24 * time.Hour)
	d := &bound.Delegation{Sentence: "Random rules for a property test.", Grantee: propGrantee, Target: propTarget, Expires: &exp}
	for _, tb := range p.tables {
		d.Allow = append(d.Allow, p.randomRules(tb)...)
	}
	b, rep := bound.Compile(d, p.pilot.Catalog(), bound.Options{})
	if !rep.Signable {
		t.Fatalf("random bound not signable: %+v\n%+v", rep.Problems, d.Allow)
	}
	p.bound = b
	if p.canon, err = b.Canonical(); err != nil {
		t.Fatal(err)
	}
	if p.sig, err = alice.Sign(signing.NamespaceDelegation, p.canon); err != nil {
		t.Fatal(err)
	}
	if p.rules, err = b.CheckRules(); err != nil {
		t.Fatal(err)
	}
	p.checker = &sqlcheck.Checker{Catalog: p.pilot.Catalog()}
	for i, r := range b.Rules {
		t.Logf("round %d rule %d: %s %s %v fence=%q check=%q max_rows=%d", round, i, r.Op, r.Table, r.Columns, r.Fence, r.Check, r.MaxRows)
	}
	return p
}

// value is a random literal for c; NULL sometimes when null is allowed.
func (p *propRound) value(c propColumn, null bool) string {
	if null && p.rng.IntN(10) == 0 {
		return "NULL"
	}
	switch c.typ {
	case "integer", "bigint":
		return strconv.Itoa(p.rng.IntN(21))
	case "text":
		// "(" is not a valid regular expression: regexp_like('a', c) raises
		// on the rows that hold it, at the cost of one function call, less
		// than most fences, so a planner that ordered quals by cost alone
		// would run it before the fence.
		return "'" + []string{"a", "b", "c", "d", "ab", "ba", "("}[p.rng.IntN(7)] + "'"
	default:
		return []string{"true", "false"}[p.rng.IntN(2)]
	}
}

// atom is a random comparison on c, optionally qualified by alias; in a
// statement, sometimes one that raises on some rows.
func (p *propRound) atom(c propColumn, alias string) string {
	n := c.name
	if alias != "" {
		n = alias + "." + n
	}
	if p.raising && p.rng.IntN(6) == 0 {
		a := p.raiser(c, n)
		p.raisers = append(p.raisers, a)
		return a
	}
	switch c.typ {
	case "integer", "bigint":
		v := func() int { return p.rng.IntN(21) }
		switch p.rng.IntN(9) {
		case 0:
			return fmt.Sprintf("%s = %d", n, v())
		case 1:
			return fmt.Sprintf("%s <> %d", n, v())
		case 2:
			return fmt.Sprintf("%s < %d", n, v())
		case 3:
			return fmt.Sprintf("%s >= %d", n, v())
		case 4:
			a := v()
			return fmt.Sprintf("%s BETWEEN %d AND %d", n, a, a+p.rng.IntN(8))
		case 5:
			return fmt.Sprintf("%s IN (%d, %d, %d)", n, v(), v(), v())
		case 6:
			return n + " IS NULL"
		case 7:
			return n + " IS NOT NULL"
		default:
			return fmt.Sprintf("%s %% 2 = %d", n, p.rng.IntN(2))
		}
	case "text":
		s := func() string { return p.value(c, false) }
		switch p.rng.IntN(7) {
		case 0:
			return n + " = " + s()
		case 1:
			return n + " <> " + s()
		case 2:
			return fmt.Sprintf("%s IN (%s, %s)", n, s(), s())
		case 3:
			return n + " < " + s()
		case 4:
			return n + " LIKE 'a%'"
		case 5:
			return n + " IS NULL"
		default:
			return fmt.Sprintf("NOT (%s IN (%s, %s))", n, s(), s())
		}
	default:
		switch p.rng.IntN(6) {
		case 0:
			return n
		case 1:
			return "NOT " + n
		case 2:
			return n + " IS TRUE"
		case 3:
			return n + " IS NOT FALSE"
		case 4:
			return n + " IS NULL"
		default:
			return n + " = " + p.value(c, false)
		}
	}
}

// raiser is an atom on column n (of c's type) that raises an error on the
// rows with some values and not on others: a division by zero, a cast, a
// regular expression. Evaluated on a row outside the read fence, it would
// tell the agent about that row by whether the statement fails.
func (p *propRound) raiser(c propColumn, n string) string {
	k := p.rng.IntN(21)
	switch c.typ {
	case "integer", "bigint":
		switch p.rng.IntN(3) {
		case 0:
			return fmt.Sprintf("1 / (%s - %d) > 0", n, k)
		case 1:
			return fmt.Sprintf("CAST(CASE WHEN %s = %d THEN 'x' ELSE '1' END AS integer) = 1", n, k)
		default:
			return fmt.Sprintf("regexp_like('a', CASE WHEN %s = %d THEN '(' ELSE 'a' END)", n, k)
		}
	case "text":
		switch p.rng.IntN(4) {
		case 3:
			return fmt.Sprintf("regexp_like('a', %s)", n)
		case 0:
			return fmt.Sprintf("1 / (length(%s) - 2) > 0", n)
		case 1:
			return fmt.Sprintf("CAST(CASE WHEN %s = 'ab' THEN 'x' ELSE '1' END AS integer) = 1", n)
		default:
			return fmt.Sprintf("(CAST(CASE WHEN %s LIKE 'b%%' THEN 'nope' ELSE '{}' END AS jsonb) ->> 'k') IS NULL", n)
		}
	default:
		return fmt.Sprintf("1 / (CASE WHEN %s THEN 0 ELSE 1 END) > 0", n)
	}
}

// pred is a random predicate over cols (never empty), mixing AND, OR and
// NOT.
func (p *propRound) pred(cols []propColumn, alias string, depth int) string {
	if depth <= 0 || p.rng.IntN(3) == 0 {
		return p.atom(cols[p.rng.IntN(len(cols))], alias)
	}
	a, b := p.pred(cols, alias, depth-1), p.pred(cols, alias, depth-1)
	switch p.rng.IntN(5) {
	case 0, 1:
		return "(" + a + " AND " + b + ")"
	case 2, 3:
		return "(" + a + " OR " + b + ")"
	default:
		return "NOT (" + a + ")"
	}
}

func (p *propRound) subset(cols []propColumn, min int) []propColumn {
	var out []propColumn
	for _, c := range cols {
		if p.rng.IntN(3) != 0 {
			out = append(out, c)
		}
	}
	for len(out) < min {
		c := cols[p.rng.IntN(len(cols))]
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func names(cols []propColumn) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

func (p *propRound) randomRules(tb *propTable) []bound.RuleSpec {
	maxRows := func() *int64 { n := int64(1 + p.rng.IntN(20)); return &n }
	maybe := func(pct int, f func() string) string {
		if p.rng.IntN(100) < pct {
			return f()
		}
		return ""
	}
	data := tb.cols[1:]
	fenced := data // the columns write fences read
	var out []bound.RuleSpec
	if p.rng.IntN(100) < 90 {
		cols := p.subset(data, 1)
		if p.rng.IntN(2) == 0 {
			cols = slices.Clone(data) // fences and WHEREs read many columns
		}
		if p.rng.IntN(4) != 0 {
			// Mostly, a grantor lets the agent read what its fences test,
			// so that WHEREs inside the fence conform.
			fenced = cols
		}
		if p.rng.IntN(10) != 0 {
			cols = append([]propColumn{tb.cols[0]}, cols...)
		}
		out = append(out, bound.RuleSpec{Op: "select", Table: "public." + tb.name, Columns: names(cols),
			Fence: maybe(65, func() string { return p.pred(data, "", 2) }), MaxRows: maxRows()})
	}
	if p.rng.IntN(100) < 75 {
		cols := p.subset(data, 1)
		out = append(out, bound.RuleSpec{Op: "update", Table: "public." + tb.name, Columns: names(cols),
			Fence: maybe(80, func() string { return p.pred(fenced, "", 2) }),
			Check: maybe(60, func() string { return p.pred(cols, "", p.rng.IntN(2)) }), MaxRows: maxRows()})
	}
	if p.rng.IntN(100) < 45 {
		out = append(out, bound.RuleSpec{Op: "delete", Table: "public." + tb.name,
			Fence: maybe(80, func() string { return p.pred(fenced, "", 2) }), MaxRows: maxRows()})
	}
	if p.rng.IntN(100) < 55 {
		cols := p.subset(data, 1)
		if p.rng.IntN(8) != 0 {
			cols = append([]propColumn{tb.cols[0]}, cols...)
		}
		// A check on a column the rule does not set sees NULL: mostly check
		// the columns the rule sets, so that inserts can pass.
		checked := data
		if p.rng.IntN(4) != 0 {
			checked = slices.DeleteFunc(slices.Clone(cols), func(c propColumn) bool { return c.name == "id" })
		}
		out = append(out, bound.RuleSpec{Op: "insert", Table: "public." + tb.name, Columns: names(cols),
			Check: maybe(60, func() string { return p.pred(checked, "", 0) }), MaxRows: maxRows()})
	}
	return out
}

// ruleCols are the columns of tb named by a rule of op (all data columns
// when there is none).
func (p *propRound) ruleCols(tb *propTable, op sqlcheck.Op) []propColumn {
	for _, r := range p.bound.Rules {
		if r.Op == op && r.Table == "public."+tb.name {
			var out []propColumn
			for _, n := range r.Columns {
				out = append(out, tb.col(n))
			}
			if len(out) > 0 {
				return out
			}
		}
	}
	return tb.cols
}

// stmt is one generated statement with what the oracle needs to know.
type stmt struct {
	sql   string
	kind  sqlcheck.Op
	table *propTable
	where string // the WHERE of a single-table statement, "" for none
	// reads: how to find each returned row's id per table
	idCols map[string]*propTable // result column -> table
	// sub is the subquery read: table and its own WHERE
	subTable *propTable
	subWhere string
	join     bool
	// raisers are the atoms in it that raise on some rows.
	raisers []string
}

func (p *propRound) statement() stmt {
	p.raising, p.raisers = true, nil
	s := p.statementShape()
	s.raisers, p.raising = p.raisers, false
	return s
}

func (p *propRound) statementShape() stmt {
	tb := p.tables[p.rng.IntN(len(p.tables))]
	// Mostly stay inside the rules' columns, so that many statements run.
	inside := p.rng.IntN(100) < 85
	readable := tb.cols
	if inside {
		readable = p.ruleCols(tb, sqlcheck.OpSelect)
	}
	// where is a random WHERE; for a write, often one that stays inside
	// the write rule's fence, so that guards other than the fence decide.
	where := func(op sqlcheck.Op) string {
		w := p.pred(readable, "", 2)
		switch p.rng.IntN(12) {
		case 0:
			w = "(" + w + ") OR 1 = 1"
		case 1, 2:
			w = "id <= " + strconv.Itoa(1+p.rng.IntN(tb.rows+5))
		case 3:
			w = "id = " + strconv.Itoa(1+p.rng.IntN(tb.rows))
		}
		if op == sqlcheck.OpSelect || p.rng.IntN(100) >= 55 {
			return w
		}
		for _, r := range p.bound.Rules {
			if r.Op == op && r.Table == "public."+tb.name && r.Fence != "" {
				return "(" + r.Fence + ") AND " + w
			}
		}
		return w
	}
	switch k := p.rng.IntN(100); {
	case k < 30:
		cols := p.subset(readable, 1)
		sel := "id"
		for _, c := range cols {
			if c.name != "id" {
				sel += ", " + c.name
			}
		}
		s := stmt{kind: sqlcheck.OpSelect, table: tb, idCols: map[string]*propTable{"id": tb}}
		switch {
		case p.rng.IntN(100) < 15 && len(p.tables) > 1:
			// A join: both tables are fenced.
			other := p.tables[(slices.Index(p.tables, tb)+1)%len(p.tables)]
			on := "a.id = b.id"
			for _, ca := range tb.cols[1:] {
				for _, cb := range other.cols[1:] {
					if ca.typ == cb.typ && p.rng.IntN(2) == 0 {
						on = "a." + ca.name + " = b." + cb.name
					}
				}
			}
			s.sql = fmt.Sprintf("SELECT a.id AS a_id, b.id AS b_id FROM %s a JOIN %s b ON %s WHERE %s", tb.name, other.name, on, p.pred(readable, "a", 1))
			s.idCols = map[string]*propTable{"a_id": tb, "b_id": other}
			s.join = true
		case p.rng.IntN(100) < 15 && len(p.tables) > 1:
			// A subquery on another table: its rows are fenced too. (Its
			// oracle evaluates the WHERE unfenced, so nothing here raises.)
			p.raising = false
			other := p.tables[(slices.Index(p.tables, tb)+1)%len(p.tables)]
			ocols := p.ruleCols(other, sqlcheck.OpSelect)
			s.where, s.subTable, s.subWhere = p.pred(readable, "", 1), other, p.pred(ocols, "", 1)
			s.sql = fmt.Sprintf("SELECT %s FROM %s WHERE %s AND id IN (SELECT id FROM %s WHERE %s)", sel, tb.name, s.where, other.name, s.subWhere)
		default:
			s.where = where(sqlcheck.OpSelect)
			s.sql = fmt.Sprintf("SELECT %s FROM %s WHERE %s", sel, tb.name, s.where)
			if p.rng.IntN(3) == 0 {
				s.sql += " ORDER BY id"
			}
		}
		return s
	case k < 60:
		writable := tb.cols[1:]
		if inside {
			writable = slices.DeleteFunc(slices.Clone(p.ruleCols(tb, sqlcheck.OpUpdate)), func(c propColumn) bool { return c.name == "id" })
		}
		sub := p.subset(writable, 1)
		var sets []string
		for _, c := range sub[:min(len(sub), 1+p.rng.IntN(2))] {
			v := p.value(c, true)
			if (c.typ == "integer" || c.typ == "bigint") && p.rng.IntN(5) == 0 {
				v = fmt.Sprintf("COALESCE(%s, 0) + 1", c.name)
			}
			sets = append(sets, c.name+" = "+v)
		}
		s := stmt{kind: sqlcheck.OpUpdate, table: tb, where: where(sqlcheck.OpUpdate)}
		s.sql = fmt.Sprintf("UPDATE %s SET %s WHERE %s", tb.name, strings.Join(sets, ", "), s.where)
		if p.rng.IntN(25) == 0 {
			s.where, s.sql = "", fmt.Sprintf("UPDATE %s SET %s", tb.name, strings.Join(sets, ", "))
		}
		return s
	case k < 75:
		s := stmt{kind: sqlcheck.OpDelete, table: tb, where: where(sqlcheck.OpDelete)}
		s.sql = fmt.Sprintf("DELETE FROM %s WHERE %s", tb.name, s.where)
		return s
	default:
		cols := tb.cols
		if inside {
			cols = p.ruleCols(tb, sqlcheck.OpInsert)
		}
		var rows []string
		for range 1 + p.rng.IntN(3) + p.rng.IntN(2)*p.rng.IntN(20) {
			var vals []string
			for _, c := range cols {
				if c.name == "id" {
					id := p.nextID
					p.nextID++
					if p.rng.IntN(15) == 0 {
						id = int64(1 + p.rng.IntN(tb.rows)) // an existing key: refused by the target
					}
					vals = append(vals, strconv.FormatInt(id, 10))
					continue
				}
				vals = append(vals, p.value(c, true))
			}
			rows = append(rows, "("+strings.Join(vals, ", ")+")")
		}
		return stmt{kind: sqlcheck.OpInsert, table: tb,
			sql: fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", tb.name, strings.Join(names(cols), ", "), strings.Join(rows, ", "))}
	}
}

// snapshot is every row of every table: id -> the row's columns as text.
type snapshot map[string]map[int64][]*string

func (p *propRound) snapshot(t *testing.T) snapshot {
	t.Helper()
	out := snapshot{}
	for _, tb := range p.tables {
		var sel []string
		for _, c := range tb.cols {
			sel = append(sel, c.name+"::text")
		}
		rows, err := p.admin.Query(context.Background(), fmt.Sprintf("SELECT id, %s FROM %s", strings.Join(sel, ", "), tb.name))
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64][]*string{}
		for rows.Next() {
			vals := make([]*string, len(tb.cols))
			var id int64
			dst := []any{&id}
			for i := range vals {
				dst = append(dst, &vals[i])
			}
			if err := rows.Scan(dst...); err != nil {
				t.Fatal(err)
			}
			m[id] = vals
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		out[tb.name] = m
	}
	return out
}

func equalRow(a, b []*string) bool {
	return slices.EqualFunc(a, b, func(x, y *string) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y })
}

func (s snapshot) equal(o snapshot) bool {
	for tb, rows := range s {
		if len(rows) != len(o[tb]) {
			return false
		}
		for id, r := range rows {
			if or, ok := o[tb][id]; !ok || !equalRow(r, or) {
				return false
			}
		}
	}
	return true
}

// ids runs an oracle query (as the superuser, no guards) returning ids.
func (p *propRound) ids(t *testing.T, query string) map[int64]bool {
	t.Helper()
	rows, err := p.admin.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("oracle %q: %v", query, err)
	}
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("oracle %q: %v", query, err)
	}
	return out
}

// barrier is the fence the Pilot reads tb through for statement d: the
// select rule it uses; else what the bound's select rules on tb let the
// grantee read (their fences ORed, "" when one has none); else the write
// rule's fence.
func (p *propRound) barrier(d sqlcheck.Decision, tb *propTable, writeRule *bound.Rule) string {
	if r := p.used(d, tb, sqlcheck.OpSelect); r != nil {
		return r.Fence
	}
	var fences []string
	found := false
	for _, r := range p.bound.Rules {
		if r.Op != sqlcheck.OpSelect || r.Table != "public."+tb.name {
			continue
		}
		if r.Fence == "" {
			return ""
		}
		found = true
		fences = append(fences, "("+r.Fence+")")
	}
	if found {
		return strings.Join(fences, " OR ")
	}
	if writeRule != nil {
		return writeRule.Fence
	}
	return ""
}

// fencedWhere is the set of ids of tb behind barrier (a fence, "" for
// none) where pred is true, evaluating pred on those rows only, as the
// Pilot's fence view does; an error is pred raising on one of them.
func (p *propRound) fencedWhere(tb *propTable, barrier, pred string) (map[int64]bool, error) {
	q := "SELECT id FROM " + tb.name
	if barrier != "" {
		q = "SELECT id FROM (SELECT * FROM " + tb.name + " WHERE (" + barrier + ") IS TRUE OFFSET 0) " + tb.name
	}
	if pred != "" {
		q += " WHERE (" + pred + ") IS TRUE"
	}
	rows, err := p.admin.Query(context.Background(), q)
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// anyRaises evaluates each raiser on every row of tb behind barrier and
// returns the first error: nil means none raises on any row there.
func (p *propRound) anyRaises(tb *propTable, barrier string, raisers []string) error {
	for _, r := range raisers {
		q := "SELECT count(*) FROM " + tb.name + " WHERE (" + r + ") IS NOT NULL"
		if barrier != "" {
			q = "SELECT count(*) FROM (SELECT * FROM " + tb.name + " WHERE (" + barrier + ") IS TRUE OFFSET 0) " + tb.name + " WHERE (" + r + ") IS NOT NULL"
		}
		var n int64
		if err := p.admin.QueryRow(context.Background(), q).Scan(&n); err != nil {
			return err
		}
	}
	return nil
}

// where is the set of ids of tb where pred is true ("" is every row).
func (p *propRound) where(t *testing.T, tb *propTable, preds ...string) map[int64]bool {
	var conds []string
	for _, pr := range preds {
		if pr != "" {
			conds = append(conds, "("+pr+") IS TRUE")
		}
	}
	q := "SELECT id FROM " + tb.name
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	return p.ids(t, q)
}

func subset(a, b map[int64]bool) bool {
	for id := range a {
		if !b[id] {
			return false
		}
	}
	return true
}

func (p *propRound) table(name string) *propTable {
	for _, tb := range p.tables {
		if "public."+tb.name == name || tb.name == name {
			return tb
		}
	}
	panic("no table " + name)
}

// used returns the rule the decision relies on for (table, op), or nil.
func (p *propRound) used(d sqlcheck.Decision, tb *propTable, op sqlcheck.Op) *bound.Rule {
	for _, u := range d.Uses {
		if u.Op == op && u.Table.Name == tb.name {
			return &p.bound.Rules[u.Rule]
		}
	}
	return nil
}

func (p *propRound) execute(t *testing.T, i int, d sqlcheck.Decision) *pilot.Result {
	t.Helper()
	claims := marque.Claims{RequestID: fmt.Sprintf("req_prop_%d_%d", p.round, i), Principal: propGrantee, Target: propTarget,
		StatementHash: marque.StatementHash(d.CanonicalSQL), Path: marque.PathCompiled, RuleIndex: d.Rule,
		Auth: marque.Auth{Kind: marque.AuthDelegation, DelegationID: bound.ID(p.canon), BoundSHA256: bound.SHA256(p.canon),
			Signer: "alice", Signature: string(p.sig)}}
	tok, _, err := p.minter.Mint(claims)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.pilot.Execute(context.Background(), pilot.Request{Marque: tok, SQL: d.CanonicalSQL, Bound: p.canon})
	if err != nil {
		t.Fatalf("%s: %v", d.CanonicalSQL, err)
	}
	return res
}

func (p *propRound) run(t *testing.T, n int) propStats {
	st := propStats{executed: map[sqlcheck.Op]int{}, refused: map[string]int{}}
	for i := range n {
		s := p.statement()
		st.statements++
		d := p.checker.Check(s.sql, p.rules)
		if d.Outcome != sqlcheck.Conforms {
			if d.Facts == nil || p.rng.IntN(4) != 0 {
				st.static++
				continue
			}
		}
		p.one(t, i, s, d, &st)
		if t.Failed() {
			t.FailNow()
		}
	}
	return st
}

// one executes one statement and checks every property of its outcome.
func (p *propRound) one(t *testing.T, i int, s stmt, d sqlcheck.Decision, st *propStats) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("round %d statement %d: %s\n  statement: %s\n  decision: %s %v", p.round, i, fmt.Sprintf(format, args...), s.sql, d.Outcome, d.ReasonStrings())
	}
	tb := s.table
	if p.last == nil {
		p.last, p.lastReceipts = p.snapshot(t), p.receipts(t)
	}
	before, receipts := p.last, p.lastReceipts

	// What the statement reaches, from the superuser's view before it runs.
	// The statement reaches rows through a barrier: the read fence when it
	// reads the table, else the write fence. reachedErr is set when its
	// own WHERE raises on some row behind that barrier.
	var reached, fenceBefore map[int64]bool
	var reachedErr error
	writeRule := p.used(d, tb, s.kind)
	if s.kind == sqlcheck.OpUpdate || s.kind == sqlcheck.OpDelete {
		reached, reachedErr = p.fencedWhere(tb, p.barrier(d, tb, writeRule), s.where)
		if writeRule != nil {
			fenceBefore = p.where(t, tb, writeRule.Fence)
		}
	}

	res := p.execute(t, i, d)
	after, afterReceipts := p.snapshot(t), p.receipts(t)
	p.last, p.lastReceipts = after, afterReceipts
	if res.Outcome != pilot.Executed {
		st.refused[res.Code]++
		if !before.equal(after) {
			fail("refused (%s: %v) but the target changed", res.Code, res.Reasons)
		}
		if afterReceipts != receipts {
			fail("refused but left a receipt")
		}
		if d.Outcome != sqlcheck.Conforms && res.Code != pilot.RefusedCheck {
			fail("the static check refers it, but the Pilot's own check did not: %s %v", res.Code, res.Reasons)
		}
		// A refusal by a guard must be justified by the data, and so must
		// an error from the target: only rows behind the barrier may
		// raise (invariant 10).
		switch res.Code {
		case pilot.RefusedDatabase:
			if (s.kind == sqlcheck.OpSelect || s.kind == sqlcheck.OpDelete) && !s.join && s.subTable == nil && len(s.raisers) > 0 && d.Outcome == sqlcheck.Conforms {
				barrier := p.barrier(d, tb, writeRule)
				if p.anyRaises(tb, barrier, s.raisers) == nil {
					fail("the target refused it (%s), but none of its raising predicates raises on a row inside the fence %q: a predicate ran outside it", res.Detail, barrier)
				}
			}
			st.raised++
			return
		case pilot.RefusedFence:
			if reachedErr == nil && (writeRule == nil || writeRule.Fence == "" || subset(reached, fenceBefore)) {
				fail("refused for the fence, but every row it reaches (%d) is inside the fence", len(reached))
			}
		case pilot.RefusedMaxRows:
			if reachedErr == nil && (writeRule == nil || s.kind != sqlcheck.OpInsert && int64(len(reached)) <= writeRule.MaxRows) {
				fail("refused for max_rows, but it reaches %d rows", len(reached))
			}
		}
		return
	}
	if d.Outcome != sqlcheck.Conforms {
		fail("the Pilot executed a statement the static check refers")
		return
	}
	st.executed[s.kind]++
	if afterReceipts != receipts+1 {
		fail("executed, but %d receipts were added, want 1", afterReceipts-receipts)
	}
	for _, other := range p.tables {
		if other != tb && !(snapshot{other.name: before[other.name]}).equal(snapshot{other.name: after[other.name]}) {
			fail("a statement on %s changed %s", tb.name, other.name)
		}
	}
	if s.kind == sqlcheck.OpSelect {
		p.checkRead(t, s, d, res, before, after, st, fail)
		return
	}
	if writeRule == nil {
		fail("executed a write with no write rule in the decision")
		return
	}
	if reachedErr != nil {
		// Its WHERE raises on some row the oracle meets, yet it ran: the
		// planner met the rows in another order, or short-circuited. What
		// it reached cannot be computed here; the bound is still checked.
		st.unknownReach++
	}
	known := reachedErr == nil
	if res.RowsAffected > writeRule.MaxRows {
		fail("affected %d rows, max_rows %d", res.RowsAffected, writeRule.MaxRows)
	}
	b, a := before[tb.name], after[tb.name]
	var checkAfter map[int64]bool
	if writeRule.Check != "" {
		checkAfter = p.where(t, tb, writeRule.Check)
	}
	allowed := map[string]bool{}
	for _, c := range writeRule.Columns {
		allowed[c] = true
	}
	switch s.kind {
	case sqlcheck.OpUpdate:
		if len(a) != len(b) {
			fail("an update changed the number of rows from %d to %d", len(b), len(a))
		}
		if known && int64(len(reached)) != res.RowsAffected {
			fail("affected %d rows, its WHERE and read fence match %d", res.RowsAffected, len(reached))
		}
		if known && writeRule.Fence != "" && !subset(reached, fenceBefore) {
			fail("updated a row that was outside the fence %q", writeRule.Fence)
		}
		if known && checkAfter != nil && !subset(reached, checkAfter) {
			fail("an updated row does not satisfy the check %q", writeRule.Check)
		}
		changed := 0
		for id, row := range b {
			if equalRow(row, a[id]) {
				continue
			}
			changed++
			if known && !reached[id] {
				fail("row %d changed but the statement does not reach it", id)
			}
			if writeRule.Fence != "" && !fenceBefore[id] {
				fail("row %d changed but was outside the fence %q", id, writeRule.Fence)
			}
			if checkAfter != nil && !checkAfter[id] {
				fail("changed row %d does not satisfy the check %q", id, writeRule.Check)
			}
			for ci, c := range tb.cols {
				if !allowed[c.name] && !equalRow(row[ci:ci+1], a[id][ci:ci+1]) {
					fail("row %d: column %s changed, not in the rule's columns %v", id, c.name, writeRule.Columns)
				}
			}
		}
		if int64(changed) > res.RowsAffected {
			fail("%d rows changed, %d reported", changed, res.RowsAffected)
		}
	case sqlcheck.OpDelete:
		removed := map[int64]bool{}
		for id, row := range b {
			if ar, ok := a[id]; !ok {
				removed[id] = true
			} else if !equalRow(row, ar) {
				fail("a delete changed row %d", id)
			}
		}
		if len(a)+len(removed) != len(b) {
			fail("a delete added rows")
		}
		if int64(len(removed)) != res.RowsAffected || known && (!subset(removed, reached) || !subset(reached, removed)) {
			fail("deleted %d rows, reported %d, reached %d", len(removed), res.RowsAffected, len(reached))
		}
		if writeRule.Fence != "" && !subset(removed, fenceBefore) {
			fail("deleted a row outside the fence %q", writeRule.Fence)
		}
	case sqlcheck.OpInsert:
		added := map[int64]bool{}
		for id, row := range a {
			if br, ok := b[id]; !ok {
				added[id] = true
				for ci, c := range tb.cols {
					if !allowed[c.name] && row[ci] != nil {
						fail("inserted row %d sets column %s, not in the rule's columns %v", id, c.name, writeRule.Columns)
					}
				}
			} else if !equalRow(row, br) {
				fail("an insert changed row %d", id)
			}
		}
		if len(b)+len(added) != len(a) {
			fail("an insert removed rows")
		}
		if int64(len(added)) != res.RowsAffected {
			fail("inserted %d rows, reported %d", len(added), res.RowsAffected)
		}
		if checkAfter != nil && !subset(added, checkAfter) {
			fail("an inserted row does not satisfy the check %q", writeRule.Check)
		}
	}
}

// checkRead: no row from outside a read fence, at most max_rows, and for a
// plain read exactly the rows its WHERE and the fence select.
func (p *propRound) checkRead(t *testing.T, s stmt, d sqlcheck.Decision, res *pilot.Result, before, after snapshot, st *propStats, fail func(string, ...any)) {
	t.Helper()
	if !before.equal(after) {
		fail("a read changed the target")
	}
	capRows := int64(-1)
	fences := map[*propTable]map[int64]bool{}
	fenceOf := func(tb *propTable) string {
		r := p.used(d, tb, sqlcheck.OpSelect)
		if r == nil {
			fail("read %s without a select rule in the decision", tb.name)
			return "false"
		}
		if capRows < 0 || r.MaxRows < capRows {
			capRows = r.MaxRows
		}
		return r.Fence
	}
	for _, tb := range []*propTable{s.table, s.subTable} {
		if tb != nil {
			fences[tb] = p.where(t, tb, fenceOf(tb))
		}
	}
	for _, tb := range s.idCols {
		if _, ok := fences[tb]; !ok {
			fences[tb] = p.where(t, tb, fenceOf(tb))
		}
	}
	if res.Truncated {
		st.truncated++
	}
	if int64(len(res.Rows)) > capRows || res.RowsAffected != int64(len(res.Rows)) {
		fail("a read returned %d rows (reported %d), max_rows %d", len(res.Rows), res.RowsAffected, capRows)
	}
	got := map[int64]bool{}
	for _, row := range byName(res) {
		for col, tb := range s.idCols {
			id, ok := row[col].(int64)
			if !ok {
				fail("column %s is %T, not an int64 id", col, row[col])
				return
			}
			if !fences[tb][id] {
				fail("a read returned row %d of %s, outside its read fence", id, tb.name)
			}
			if col == "id" {
				got[id] = true
			}
		}
	}
	if s.join {
		return
	}
	var want map[int64]bool
	readFence := fenceOf(s.table)
	if s.subTable != nil {
		sub := "SELECT id FROM " + s.subTable.name + " WHERE (" + s.subWhere + ") IS TRUE"
		if f := fenceOf(s.subTable); f != "" {
			sub += " AND (" + f + ") IS TRUE"
		}
		want = p.where(t, s.table, s.where, readFence, "id IN ("+sub+")")
	} else {
		var err error
		if want, err = p.fencedWhere(s.table, readFence, s.where); err != nil {
			// It ran although its WHERE raises on some row in the fence:
			// the planner met the rows in another order (or LIMIT ended
			// it first). The rows it returned are still checked above.
			st.unknownReach++
			return
		}
	}
	if !subset(got, want) || len(got) != len(res.Rows) {
		fail("a read returned rows its WHERE and read fence do not select")
	}
	switch {
	case res.Truncated && (int64(len(want)) <= capRows || int64(len(res.Rows)) != capRows):
		fail("truncated at %d rows, but %d rows match, max_rows %d", len(res.Rows), len(want), capRows)
	case !res.Truncated && len(got) != len(want):
		fail("returned %d rows, %d match its WHERE inside the read fence", len(got), len(want))
	}
}

func (p *propRound) receipts(t *testing.T) int {
	t.Helper()
	var n int
	if err := p.admin.QueryRow(context.Background(), "SELECT count(*) FROM harbormaster.receipts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
