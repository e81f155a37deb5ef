package sqlcheck_test

import (
	"fmt"

	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// variant rewrites every constant of s in sql with a random constant of
// the same kind and sign: what an agent sends as a new statement of the
// same shape.
func variant(r *rand.Rand, sql string, s *sqlcheck.Shape) string {
	out := sql
	for i := len(s.Consts) - 1; i >= 0; i-- {
		c := s.Consts[i]
		lit := randomConst(r, c)
		if c.Neg {
			lit = "-" + lit
		}
		out = out[:c.Start] + lit + out[c.End:]
	}
	return out
}

var randomStrings = []string{"", "x", "it''s", `a\b`, `\`, "$1", "-- not a comment", "/* nor this */", "ünïcödé", "%_", "''''", "a b  c", "NULL", "1", "0x1F"}

func randomConst(r *rand.Rand, c sqlcheck.Const) string {
	switch c.Kind {
	case sqlcheck.ConstInt4:
		v := r.Int64N(1 << 31)
		switch r.IntN(4) {
		case 0:
			return fmt.Sprintf("00%d", v)
		case 1:
			return fmt.Sprintf("0x%x", v)
		case 2:
			return fmt.Sprint(r.IntN(10))
		}
		return fmt.Sprint(v)
	case sqlcheck.ConstInt8:
		return fmt.Sprint(1<<31 + r.Int64N(1<<62))
	case sqlcheck.ConstNumeric:
		return []string{"12.5", ".5", "3e10", "1.5E-3", "0.0", "99999999999999999999999", "7."}[r.IntN(7)]
	case sqlcheck.ConstString:
		return "'" + randomStrings[r.IntN(len(randomStrings))] + "'"
	case sqlcheck.ConstBool:
		return []string{"true", "false", "TRUE", "False"}[r.IntN(4)]
	}
	return "NULL"
}

// decisionOf is what the route depends on in a decision.
func decisionOf(d sqlcheck.Decision) string {
	rule := -1
	if d.Rule != nil {
		rule = *d.Rule
	}
	return fmt.Sprintf("%s rule=%d reasons=%q uses=%v", d.Outcome, rule, d.ReasonStrings(), d.Uses)
}

// analysisOf is what the gateway reads of an analysis: its reasons,
// whether it is rejected at once and why, and its canonical text.
func analysisOf(a *sqlcheck.Analysis) string {
	r, rejected := a.Rejected()
	na := ""
	if a.NotApprovable != nil {
		na = a.NotApprovable.String()
	}
	return fmt.Sprintf("reasons=%q rejected=%v %q not-approvable=%q canonical=%q facts=%v", reasonStrings(a.Reasons), rejected, r.String(), na, a.Canonical, a.Facts != nil)
}

func reasonStrings(rs []sqlcheck.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// TestRememberedShapeEqualsFreshCheck is the property behind remembered
// shapes: over the adversarial corpus and random new literals in every
// statement, a statement whose shape has a template is decided exactly as
// a fresh parse and check decides it, whether it conforms or has reasons,
// and its canonical text, rebuilt from the template and its own
// constants, is exactly the fresh canonical text. The cache (which
// remembers both) answers each variant as a fresh analysis does.
func TestRememberedShapeEqualsFreshCheck(t *testing.T) {
	c := loadCorpus(t)
	cat := c.Checker.Catalog
	cache := sqlcheck.NewCache[string](sqlcheck.CacheConfig{})
	r := rand.New(rand.NewPCG(10, 10))
	var shaped, templated, sameKey, cases, failures, remembered int
	for _, cc := range c.allCases() {
		cases++
		rules := c.Rules[cc.Delegation]
		s, ok := sqlcheck.ShapeOf(cc.SQL, sqlcheck.Limits{})
		if !ok {
			continue
		}
		shaped++
		a := sqlcheck.Analyze(cc.SQL, cat, sqlcheck.Limits{})
		want := decisionOf(sqlcheck.Check(a, rules))
		cache.Analyze(cc.SQL, cat)
		tpl, err := sqlcheck.NewTemplate(a, s)
		if err != nil {
			continue
		}
		if len(a.Reasons) > 0 {
			failures++
		}
		templated++
		key := sqlcheck.BakedKey(s, tpl.Baked())
		if got := tpl.Canonical(s); got != a.Canonical {
			t.Fatalf("%s: canonical from the template %q, fresh %q", cc.Name, got, a.Canonical)
		}
		for k := 0; k < 8; k++ {
			v := variant(r, cc.SQL, s)
			vs, ok := sqlcheck.ShapeOf(v, sqlcheck.Limits{})
			if !ok {
				t.Fatalf("%s: variant %q has no shape", cc.Name, v)
			}
			if vs.Key() != s.Key() {
				t.Fatalf("%s: variant %q has shape %q, not %q", cc.Name, v, vs.Key(), s.Key())
			}
			if sqlcheck.BakedKey(vs, tpl.Baked()) != key {
				continue // a baked constant changed: another entry
			}
			sameKey++
			fresh := sqlcheck.Analyze(v, cat, sqlcheck.Limits{})
			if got := tpl.Canonical(vs); got != fresh.Canonical {
				t.Fatalf("%s: variant %q: remembered canonical %q, fresh %q", cc.Name, v, got, fresh.Canonical)
			}
			if got := decisionOf(sqlcheck.Check(fresh, rules)); got != want {
				t.Fatalf("%s: variant %q: fresh decision %s, remembered %s", cc.Name, v, got, want)
			}
			if got := cache.Analyze(v, cat); analysisOf(got.Analysis) != analysisOf(fresh) || decisionOf(sqlcheck.Check(got.Analysis, rules)) != want {
				t.Fatalf("%s: variant %q: the cache's analysis\n%s\nfresh\n%s", cc.Name, v, analysisOf(got.Analysis), analysisOf(fresh))
			} else if !got.Fresh {
				remembered++
			}
			// The values bound are the fresh parse's constants.
			ft, err := sqlcheck.NewTemplate(fresh, vs)
			if err != nil {
				t.Fatalf("%s: variant %q: %v", cc.Name, v, err)
			}
			if !reflect.DeepEqual(ft.Args(vs), tpl.Args(vs)) || !reflect.DeepEqual(ft.Baked(), tpl.Baked()) {
				t.Fatalf("%s: variant %q: templates differ", cc.Name, v)
			}
		}
	}
	t.Logf("%d cases: %d with a shape, %d with a template (%d with reasons), %d variants on the same entry, %d answered from the cache", cases, shaped, templated, failures, sameKey, remembered)
	if templated < cases/2 || sameKey < templated || failures < templated/4 || remembered < sameKey/2 {
		t.Fatalf("too few cases exercised: %d of %d templated, %d with reasons, %d variants, %d remembered", templated, cases, failures, sameKey, remembered)
	}
}

// TestShapeEdges pins which constants a shape carries, which stay in the
// text, and which statements have no shape at all.
func TestShapeEdges(t *testing.T) {
	c := loadCorpus(t)
	cat := c.Checker.Catalog
	for _, tc := range []struct {
		sql    string
		shape  bool   // has a shape
		tpl    bool   // has a template
		params int    // parameters bound
		baked  int    // constants left in the text
		canon  string // "" for the fresh canonical
	}{
		{sql: "UPDATE orders SET status = 'shipped' WHERE id = 5", shape: true, tpl: true, params: 2},
		{sql: "SELECT id FROM orders WHERE id = -5 AND total > - 3.5", shape: true, tpl: true, params: 2},
		{sql: "SELECT id FROM orders WHERE id = 0x1F OR id = 1_000", shape: true, tpl: true, params: 2},
		{sql: "SELECT id FROM orders WHERE note = NULL", shape: true, tpl: true, params: 0, baked: 1},
		{sql: "SELECT DISTINCT ON (1) id FROM orders", shape: true, tpl: true, params: 0, baked: 1},
		{sql: "SELECT 5, 'x', id FROM orders", shape: true, tpl: true, params: 1, baked: 1},
		{sql: "SELECT id FROM orders WHERE created_at > now() - interval '1' day", shape: true, tpl: true, params: 0, baked: 1},
		{sql: "SELECT id FROM orders WHERE created_at > now() - interval '1 day'", shape: true, tpl: true, params: 1},
		{sql: "SELECT id FROM orders ORDER BY 1 LIMIT 10", shape: true, tpl: true, params: 1},
		{sql: "SELECT id FROM orders WHERE 't'::boolean", shape: true, tpl: true, params: 0, baked: 1},
		{sql: "SELECT id FROM orders WHERE note = E'a\\nb'"},
		{sql: "SELECT id FROM orders WHERE note = E'a\\\\b' AND id = 1", shape: true, tpl: true, params: 2},
		{sql: "SELECT id FROM orders WHERE note = $$x$$"},
		{sql: "SELECT id FROM orders WHERE note = 'a'\n'b'"},
		{sql: "SELECT id FROM orders WHERE id = $1"},
		{sql: "SELECT id + 1 FROM orders GROUP BY id + 1"},
		{sql: "SELECT - /* c */ 5, id FROM orders"},
		{sql: "SELECT id FROM orders WHERE note = B'101'"},
	} {
		s, ok := sqlcheck.ShapeOf(tc.sql, sqlcheck.Limits{})
		if ok != tc.shape {
			t.Errorf("%q: shape %v, want %v", tc.sql, ok, tc.shape)
			continue
		}
		if !ok {
			continue
		}
		a := sqlcheck.Analyze(tc.sql, cat, sqlcheck.Limits{})
		tpl, err := sqlcheck.NewTemplate(a, s)
		if (err == nil) != tc.tpl {
			t.Errorf("%q: template error %v, want a template: %v", tc.sql, err, tc.tpl)
			continue
		}
		if err != nil {
			continue
		}
		if tpl.NumParams() != tc.params || len(tpl.Baked()) != tc.baked {
			t.Errorf("%q: %d parameters and %d baked, want %d and %d", tc.sql, tpl.NumParams(), len(tpl.Baked()), tc.params, tc.baked)
		}
	}
}

// TestStringLiteral checks the deparser's quoting is reproduced.
func TestStringLiteral(t *testing.T) {
	for _, v := range []string{"", "x", "it's", `a\b`, `\`, "''", "a\nb"} {
		sql := "SELECT " + sqlcheck.StringLiteral(v)
		a := sqlcheck.Analyze(sql, nil, sqlcheck.Limits{})
		if a.Canonical != sql {
			t.Errorf("%q: deparsed %q, StringLiteral gives %q", v, a.Canonical, sql)
		}
	}
	if strings.Contains(sqlcheck.StringLiteral("a'b"), "a'b") {
		t.Error("a quote is not doubled")
	}
}

// TestConstantsAgreeWithTheScanner: the constants ShapeOf reads are
// exactly tokens of pg_query's scanner (a minus and a number for a
// negative constant), of the kind the scanner says, over the corpus and
// random new literals.
func TestConstantsAgreeWithTheScanner(t *testing.T) {
	c := loadCorpus(t)
	r := rand.New(rand.NewPCG(11, 11))
	checked := 0
	for _, cc := range c.allCases() {
		s, ok := sqlcheck.ShapeOf(cc.SQL, sqlcheck.Limits{})
		if !ok {
			continue
		}
		for k := 0; k < 4; k++ {
			sql := cc.SQL
			if k > 0 {
				sql = variant(r, cc.SQL, s)
			}
			vs, ok := sqlcheck.ShapeOf(sql, sqlcheck.Limits{})
			if !ok {
				t.Fatalf("%s: %q has no shape", cc.Name, sql)
			}
			scan, err := pg.Scan(sql)
			if err != nil {
				t.Fatal(err)
			}
			starts := map[int32]int{}
			for i, tok := range scan.Tokens {
				starts[tok.Start] = i
			}
			for _, cn := range vs.Consts {
				i, ok := starts[int32(cn.Start)]
				if !ok {
					t.Fatalf("%s: %q: constant at %d is not at a token", cc.Name, sql, cn.Start)
				}
				tok := scan.Tokens[i]
				if cn.Neg {
					if tok.Token != pg.Token_ASCII_45 || i+1 >= len(scan.Tokens) {
						t.Fatalf("%s: %q: negative constant without a minus", cc.Name, sql)
					}
					tok = scan.Tokens[i+1]
				}
				if int(tok.End) != cn.End {
					t.Fatalf("%s: %q: constant %q ends at %d, the scanner's token at %d", cc.Name, sql, sql[cn.Start:cn.End], cn.End, tok.End)
				}
				want := map[sqlcheck.ConstKind][]pg.Token{
					sqlcheck.ConstInt4: {pg.Token_ICONST}, sqlcheck.ConstInt8: {pg.Token_FCONST}, sqlcheck.ConstNumeric: {pg.Token_FCONST},
					sqlcheck.ConstString: {pg.Token_SCONST}, sqlcheck.ConstBool: {pg.Token_TRUE_P, pg.Token_FALSE_P}, sqlcheck.ConstNull: {pg.Token_NULL_P},
				}[cn.Kind]
				if cn.Kind == sqlcheck.ConstInt4 && cn.Value == "-2147483648" {
					// 2147483648 negated: a float token that fits int4.
					want = []pg.Token{pg.Token_ICONST, pg.Token_FCONST}
				}
				found := false
				for _, w := range want {
					found = found || w == tok.Token
				}
				if !found {
					t.Fatalf("%s: %q: constant %q read as kind %d, the scanner says %v", cc.Name, sql, sql[cn.Start:cn.End], cn.Kind, tok.Token)
				}
				checked++
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d constants checked", checked)
	}
}

// TestMinInt4IsAnInteger: PostgreSQL reads -2147483648 as the
// float token 2147483648 negated, and types the constant int4 because it
// fits (make_const), not int8; the shape called it int8, so the Pilot's
// template bound $1::bigint and ran "-2147483648 - 1" as -2147483649
// where the statement it checked fails with integer out of range (a
// statement other than the one checked; DESIGN.md invariant 4).
// Found in review 4.
func TestMinInt4IsAnInteger(t *testing.T) {
	for _, sql := range []string{
		"SELECT -2147483648 - 1 FROM orders",
		"UPDATE orders SET id = - 2147483648 WHERE id = 1",
	} {
		s, ok := sqlcheck.ShapeOf(sql, sqlcheck.Limits{})
		if !ok {
			t.Fatalf("%s: no shape", sql)
		}
		for _, c := range s.Consts {
			if c.Value == "-2147483648" && c.Kind != sqlcheck.ConstInt4 {
				t.Errorf("%s: -2147483648 is kind %d, want int4, as PostgreSQL types it", sql, c.Kind)
			}
		}
	}
	// Past int4, it is int8 as before.
	s, ok := sqlcheck.ShapeOf("SELECT -2147483649 FROM orders", sqlcheck.Limits{})
	if !ok || s.Consts[0].Kind != sqlcheck.ConstInt8 {
		t.Errorf("-2147483649: %+v", s)
	}
}

// FuzzShape: whatever the input, a shape's constants are the scanner's
// tokens, and putting the constants back into the normalized text gives
// the statement.
func FuzzShape(f *testing.F) {
	for _, s := range []string{"SELECT 1", "UPDATE t SET a = 'x''y' WHERE b = -5 AND c = 1.5e3", "SELECT E'a\\\\b', 0x1F, 1_000, TRUE, null",
		"SELECT 'a'\n'b'", "SELECT - /* c */ 5", "SELECT $1, 2", "SELECT 1 /* $1 */", "SELECT a$1 FROM t WHERE x = 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		s, ok := sqlcheck.ShapeOf(sql, sqlcheck.Limits{})
		if !ok {
			return
		}
		scan, err := pg.Scan(sql)
		if err != nil {
			t.Fatalf("%q has a shape but does not scan: %v", sql, err)
		}
		ends := map[int]bool{}
		starts := map[int]bool{}
		for _, tok := range scan.Tokens {
			starts[int(tok.Start)], ends[int(tok.End)] = true, true
		}
		rebuilt, prev := "", 0
		for k, c := range s.Consts {
			if !starts[c.Start] || !ends[c.End] {
				t.Fatalf("%q: constant %q is not made of whole tokens", sql, sql[c.Start:c.End])
			}
			rebuilt += sql[prev:c.Start] + fmt.Sprintf("$%d", k+1)
			prev = c.End
		}
		if rebuilt+sql[prev:] != s.Normalized {
			t.Fatalf("%q: the constants put back do not give the normalized text %q", sql, s.Normalized)
		}
	})
}

// TestGroupingSetPositionsStayInTheText: inside ROLLUP, CUBE,
// GROUPING SETS and an implicit row of GROUP BY, PostgreSQL reads an
// integer constant as a position in the select list, exactly as in a plain
// GROUP BY 1; pg_query's normalize still makes it a parameter, and a
// parameter there is a value to group by. Such a constant must stay in
// the template's text (its value part of the key), or the template runs a
// statement other than the one checked (found in review 1: GROUP BY CUBE (1)
// over count(*) is an error as text, and ran as a template).
func TestGroupingSetPositionsStayInTheText(t *testing.T) {
	c := loadCorpus(t)
	for _, tc := range []struct {
		sql           string
		params, baked int
	}{
		{"SELECT count(*) FROM orders GROUP BY CUBE (1)", 0, 1},
		{"SELECT count(*) FROM orders GROUP BY ROLLUP ((1))", 0, 1},
		{"SELECT count(*) FROM orders GROUP BY GROUPING SETS ((1), ())", 0, 1},
		{"SELECT status, count(*) FROM orders WHERE id > 3 GROUP BY ROLLUP (1, (2))", 1, 2},
		{"SELECT count(*) FROM orders GROUP BY (1, 2)", 0, 2},
		{"SELECT count(*) FROM orders GROUP BY GROUPING SETS (ROLLUP (1), CUBE (2))", 0, 2},
		// Elsewhere a row's constants are values, as before.
		{"SELECT id FROM orders WHERE (id, 1) = (2, 3)", 3, 0},
		{"SELECT id % 3 FROM orders GROUP BY id % 3", 0, 0},
	} {
		s, ok := sqlcheck.ShapeOf(tc.sql, sqlcheck.Limits{})
		if !ok {
			if tc.params+tc.baked > 0 {
				t.Errorf("%q: no shape", tc.sql)
			}
			continue
		}
		a := sqlcheck.Analyze(tc.sql, c.Checker.Catalog, sqlcheck.Limits{})
		tpl, err := sqlcheck.NewTemplate(a, s)
		if err != nil {
			if tc.params+tc.baked > 0 {
				t.Errorf("%q: %v", tc.sql, err)
			}
			continue
		}
		if tpl.NumParams() != tc.params || len(tpl.Baked()) != tc.baked {
			t.Errorf("%q: %d parameters and %d baked, want %d and %d", tc.sql, tpl.NumParams(), len(tpl.Baked()), tc.params, tc.baked)
		}
	}
}
