package pgwire

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// inlinedText is what Bind renders through the tree.
func inlinedText(t testing.TB, st *prepared, vals []boundParam) string {
	t.Helper()
	text, err := treeText(st, vals)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func mustPrepare(t testing.TB, sql string, declared ...uint32) *prepared {
	t.Helper()
	tree, err := parseText(sql)
	if err != nil {
		t.Fatal(err)
	}
	st, werr := newPrepared(sql, tree, declared)
	if werr != nil {
		t.Fatal(werr)
	}
	return st
}

// TestSpliceIsTheInlinedText: a statement bound by its splice is, byte
// for byte, the text Bind renders through the tree, for every type it
// splices and values with quotes, backslashes, dollars, comment and
// parameter look-alikes, non-ASCII and NULL; and the statements whose
// kind a value could change, or whose values the deparser writes its
// own way, have no splice.
func TestSpliceIsTheInlinedText(t *testing.T) {
	t.Parallel()
	values := []string{"retrying", "", "it's", `back\slash`, `\'`, "$1", "$2::int", "-- not a comment", "/* x */",
		"x'; DROP TABLE orders; --", "naïve ☃", "E'x'", "12", "-3.5", "2026-12-07 10:00:00+00", `{"a": "b'c"}`, "  spaced  "}
	for _, c := range []struct {
		sql  string
		oids []uint32
	}{
		{"UPDATE orders SET status = $1, updated_at = now() WHERE id = $2 AND status <> 'shipped'", []uint32{oidText, oidInt4}},
		{"SELECT id, status FROM orders WHERE status = $1 OR note = $1 ORDER BY id LIMIT $2", []uint32{oidText, oidInt8}},
		{"SELECT id FROM orders WHERE id = $1::int AND status = $2", nil},
		{"INSERT INTO orders (id, status, total_cents, note) VALUES ($1, $2, $3, $4) RETURNING id", []uint32{oidInt4, oidVarchar, oidNumeric, oidJSONB}},
		{"DELETE FROM orders WHERE created_at < $1 AND id IN (SELECT id FROM orders WHERE status = $2)", []uint32{oidTimestamptz, 0}},
		{"SELECT a.id FROM orders a JOIN customers c ON c.id = a.customer_id WHERE c.region = $1 UNION SELECT $2", []uint32{oidText, oidInt4}},
		{"WITH o AS (SELECT id FROM orders WHERE status = $1) UPDATE orders SET status = $2 FROM o WHERE orders.id = o.id", []uint32{oidText, oidText}},
	} {
		st := mustPrepare(t, c.sql, c.oids...)
		sp := newSplice(st)
		if sp == nil {
			t.Errorf("%s: no splice", c.sql)
			continue
		}
		st.splice = sp
		for i, v := range values {
			vals := make([]boundParam, len(st.oids))
			for k := range vals {
				vals[k] = boundParam{oid: st.oids[k], text: values[(i+k)%len(values)]}
			}
			vals[len(vals)-1] = boundParam{oid: st.oids[len(vals)-1], text: v}
			if i%5 == 0 {
				vals[0] = boundParam{oid: st.oids[0], null: true}
			}
			want := inlinedText(t, st, vals)
			got, ok := st.spliced(vals)
			if !ok || got != want {
				t.Errorf("%s with %q:\nspliced %q\ninlined %q", c.sql, v, got, want)
			}
		}
		if _, ok := st.spliced([]boundParam{{oid: st.oids[0], text: "a\x00b"}, {oid: st.oids[1], text: "1"}, {}, {}}[:len(st.oids)]); ok {
			t.Errorf("%s: a NUL byte was spliced", c.sql)
		}
	}
	for _, c := range []struct {
		sql  string
		oids []uint32
	}{
		{"SELECT $1", []uint32{oidText}},                                             // answered at the front
		{"SELECT harbormaster_wait($1)", []uint32{oidText}},                          // a wait
		{"SELECT set_config($1, $2, false)", []uint32{oidText, oidText}},             // FROM-less
		{"SELECT relname FROM pg_class WHERE relname = $1", []uint32{oidText}},       // a catalog read
		{"UPDATE orders SET shipped = $1 WHERE id = $2", []uint32{oidBool, oidInt4}}, // bool: written its own way
		{"SELECT id FROM orders WHERE code = $1", []uint32{oidBpchar}},               // bpchar likewise
		{"SELECT id FROM orders; SELECT $1", []uint32{oidText}},                      // several statements
		{"SET search_path = $1", []uint32{oidText}},
		{"SELECT id FROM orders ORDER BY id LIMIT $1", nil},                        // LIMIT NULL is written LIMIT ALL
		{"SELECT id FROM orders WHERE shipped = $1::boolean", []uint32{19}},        // a boolean cast the text makes
		{"SELECT id FROM orders WHERE code = $1::pg_catalog.bpchar", []uint32{26}}, // and a bpchar one
	} {
		if tree, err := parseText(c.sql); err != nil {
			continue
		} else if st, werr := newPrepared(c.sql, tree, c.oids); werr == nil && newSplice(st) != nil {
			t.Errorf("%s: spliced", c.sql)
		}
	}
}

// BenchmarkBind is what rendering a bound statement costs: through the
// tree (copy, inline, deparse) and by its splice, each with new values.
//
//	go test -run '^$' -bench 'Bind$' ./internal/pgwire/
func BenchmarkBind(b *testing.B) {
	st := mustPrepare(b, "UPDATE orders SET status = $1, updated_at = now() WHERE id = $2 AND status <> 'shipped'", oidText, oidInt4)
	vals := func(i int) []boundParam {
		return []boundParam{{oid: oidText, text: "retrying" + strconv.Itoa(i)}, {oid: oidInt4, text: strconv.Itoa(i)}}
	}
	b.Run("tree", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			inlinedText(b, st, vals(i))
		}
	})
	b.Run("splice", func(b *testing.B) {
		st.splice = newSplice(st)
		i := 0
		for b.Loop() {
			i++
			if _, ok := st.spliced(vals(i)); !ok {
				b.Fatal("not spliced")
			}
		}
	})
}

// FuzzSpliceIsTheInlinedText: for any two values, the spliced statement
// is the inlined one, byte for byte, or the splice declines (a NUL).
func FuzzSpliceIsTheInlinedText(f *testing.F) {
	for _, v := range []string{"", "'", `\`, `\'`, "$1", "E'", "\u2028", "a\x00b"} {
		f.Add(v, "x")
	}
	st := mustPrepare(f, "UPDATE orders SET status = $1, note = $2 WHERE id = $3 AND status <> $1", oidText, 0, oidInt8)
	st.splice = newSplice(st)
	if st.splice == nil {
		f.Fatal("no splice")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		vals := []boundParam{{oid: oidText, text: a}, {text: b}, {oid: oidInt8, text: "7"}}
		got, ok := st.spliced(vals)
		if !ok {
			if !strings.ContainsRune(a+b, 0) && utf8.ValidString(a) && utf8.ValidString(b) {
				t.Fatalf("declined %q %q", a, b)
			}
			return
		}
		if want := inlinedText(t, st, vals); got != want {
			t.Fatalf("spliced %q\ninlined %q", got, want)
		}
	})
}
