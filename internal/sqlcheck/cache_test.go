package sqlcheck_test

import (
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

const cacheDDL = `
CREATE TABLE orders (id bigint PRIMARY KEY, status text NOT NULL, paid boolean NOT NULL, note varchar(40));
`

func cacheCatalog(t *testing.T) *sqlcheck.Catalog {
	t.Helper()
	cat, err := sqlcheck.ParseSchemaDDL(cacheDDL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestCacheRemembersTheAnalysis: a statement of a remembered shape, with
// new literals, gets the analysis a fresh one gives, under the same key,
// and sees the value remembered for its bound; a statement without a
// template is remembered by its text.
func TestCacheRemembersTheAnalysis(t *testing.T) {
	t.Parallel()
	cat := cacheCatalog(t)
	c := sqlcheck.NewCache[string](sqlcheck.CacheConfig{})
	first := c.Analyze("UPDATE orders SET status = 'failed' WHERE id = 3", cat)
	if !first.Fresh || first.Template == nil || !first.Key.Remembered() {
		t.Fatalf("first statement: fresh %v, template %v, remembered %v", first.Fresh, first.Template != nil, first.Key.Remembered())
	}
	c.Put(first.Key, "bound-a", "decided")
	for _, sql := range []string{
		"UPDATE orders SET status = 'paid' WHERE id = 4",
		"UPDATE orders SET status = 'it''s' WHERE id = 99",
	} {
		r := c.Analyze(sql, cat)
		fresh := sqlcheck.Analyze(sql, cat, sqlcheck.Limits{})
		if r.Fresh || r.Key != first.Key || r.Canonical != fresh.Canonical || len(r.Reasons) != len(fresh.Reasons) {
			t.Fatalf("%q: fresh %v, same key %v, canonical %q (want %q)", sql, r.Fresh, r.Key == first.Key, r.Canonical, fresh.Canonical)
		}
		if v, ok := c.Value(r.Key, "bound-a"); !ok || v != "decided" {
			t.Fatalf("%q: the value remembered for its bound is %q, %v", sql, v, ok)
		}
	}
	// A statement with a reason (no such column) is remembered by its
	// shape too, reasons and all.
	const odd = "UPDATE orders SET nope = 1 WHERE id = 3"
	a := c.Analyze(odd, cat)
	if a.Template == nil || len(a.Reasons) == 0 || !a.Key.Remembered() || a.Key == first.Key {
		t.Fatalf("%q: template %v, reasons %v, key %v", odd, a.Template != nil, a.Reasons, a.Key)
	}
	b := c.Analyze("UPDATE orders SET nope = 2 WHERE id = 4", cat)
	if b.Fresh || b.Key != a.Key || len(b.Reasons) != 1 || b.Reasons[0] != a.Reasons[0] {
		t.Fatalf("a statement of a remembered shape with a reason: fresh %v, same key %v, reasons %v", b.Fresh, b.Key == a.Key, b.Reasons)
	}
	// Without a template (two statements), by text.
	const two = "SELECT 1; SELECT 2"
	m := c.Analyze(two, cat)
	if m.Template != nil || m.NotApprovable == nil || !m.Key.Remembered() {
		t.Fatalf("%q: template %v, not approvable %v, remembered %v", two, m.Template != nil, m.NotApprovable, m.Key.Remembered())
	}
	if n := c.Analyze("SELECT 1; SELECT 3", cat); n.Key == m.Key {
		t.Fatal("two texts without a template share a key")
	} else if again := c.Analyze(two, cat); again.Fresh || again.Key != m.Key || again.NotApprovable == nil {
		t.Fatalf("%q was not remembered by its text", two)
	}
}

// TestCacheKeysByCatalogAndBound: the same statement text against two
// catalogs, or two bounds' catalogs, or the same analysis for two
// bounds, never shares an entry: a decision remembered for one bound is
// never another's.
func TestCacheKeysByCatalogAndBound(t *testing.T) {
	t.Parallel()
	cat1, cat2 := cacheCatalog(t), cacheCatalog(t) // the same schema, two catalogs (a refresh)
	c := sqlcheck.NewCache[string](sqlcheck.CacheConfig{})
	for _, sql := range []string{
		"SELECT id, status FROM orders WHERE id = 3",           // a template
		"SELECT id FROM orders WHERE nope = 3",                 // by text
		"SELECT id FROM orders WHERE id = ANY('{1,2}'::int[])", // whatever it is
	} {
		k1 := c.Analyze(sql, cat1).Key
		k2 := c.Analyze(sql, cat2).Key
		if k1 == k2 {
			t.Fatalf("%q: two catalogs share a key", sql)
		}
		c.Put(k1, "bound-a", "cat1")
		if v, ok := c.Value(k2, "bound-a"); ok {
			t.Fatalf("%q: catalog 2 got catalog 1's value %q", sql, v)
		}
		if _, ok := c.Value(k1, "bound-b"); ok {
			t.Fatalf("%q: bound b got bound a's value", sql)
		}
		if v, ok := c.Value(k1, "bound-a"); !ok || v != "cat1" {
			t.Fatalf("%q: bound a lost its value", sql)
		}
	}

	// Two bounds' catalogs of one catalog: each its own, built once.
	built := map[string]int{}
	scope := func(id string, cols []string) *sqlcheck.Catalog {
		return c.Scope(cat1, id, func() *sqlcheck.Catalog {
			built[id]++
			return cat1.Bounded(map[sqlcheck.TableName][]string{{Schema: "public", Name: "orders"}: cols}, id)
		})
	}
	a, b := scope("bound-a", []string{"id", "status"}), scope("bound-b", []string{"id"})
	if a == b {
		t.Fatal("two bounds share a catalog")
	}
	if scope("bound-a", nil) != a || scope("bound-b", nil) != b || built["bound-a"] != 1 || built["bound-b"] != 1 {
		t.Fatalf("the bounds' catalogs were not remembered: built %v", built)
	}
	if c.Scope(cat2, "bound-a", func() *sqlcheck.Catalog { return cat2.Bounded(nil, "x") }) == a {
		t.Fatal("another catalog got bound a's catalog of catalog 1")
	}
	const sql = "SELECT id, status FROM orders WHERE id = 3"
	ra, rb := c.Analyze(sql, a), c.Analyze(sql, b)
	if ra.Key == rb.Key {
		t.Fatal("two bounds' catalogs share an analysis")
	}
	if len(ra.Reasons) != 0 || len(rb.Reasons) == 0 {
		t.Fatalf("bound a's catalog has status (reasons %v), bound b's does not (reasons %v)", ra.Reasons, rb.Reasons)
	}
}

// TestCacheKeysByBakedValue: a constant the template keeps in the text
// (a cast to boolean, a typmod cast, an unnamed output column, NULL) is
// part of the key, by value; a parameter's value is not.
func TestCacheKeysByBakedValue(t *testing.T) {
	t.Parallel()
	cat := cacheCatalog(t)
	c := sqlcheck.NewCache[string](sqlcheck.CacheConfig{})
	for _, pair := range [][2]string{
		{"SELECT id FROM orders WHERE paid = 'yes'::boolean AND id = 1", "SELECT id FROM orders WHERE paid = 'no'::boolean AND id = 1"},
		{"SELECT id FROM orders WHERE note = 'abc'::varchar(2)", "SELECT id FROM orders WHERE note = 'abd'::varchar(2)"},
		{"SELECT 5, id FROM orders WHERE id = 1", "SELECT 6, id FROM orders WHERE id = 1"},
	} {
		x := c.Analyze(pair[0], cat)
		if x.Template == nil || len(x.Template.Baked()) == 0 {
			t.Fatalf("%q: no template with a baked constant (template %v)", pair[0], x.Template != nil)
		}
		c.Put(x.Key, "bound-a", pair[0])
		y := c.Analyze(pair[1], cat)
		if y.Template == nil || x.Key == y.Key {
			t.Fatalf("%q and %q share a key", pair[0], pair[1])
		}
		if v, ok := c.Value(y.Key, "bound-a"); ok {
			t.Fatalf("%q got the value of %q", pair[1], v)
		}
		for _, r := range []sqlcheck.Analyzed{x, y, c.Analyze(pair[0], cat), c.Analyze(pair[1], cat)} {
			if want := sqlcheck.Analyze(r.Canonical, cat, sqlcheck.Limits{}).Canonical; r.Canonical != want {
				t.Fatalf("canonical %q is not its own (%q)", r.Canonical, want)
			}
		}
		if again := c.Analyze(pair[1], cat); again.Fresh || again.Key != y.Key {
			t.Fatalf("%q was not remembered", pair[1])
		}
	}
	// The same shape with another parameter value shares the key.
	p, q := c.Analyze("SELECT id FROM orders WHERE paid = 'yes'::boolean AND id = 1", cat), c.Analyze("SELECT id FROM orders WHERE paid = 'yes'::boolean AND id = 2", cat)
	if p.Key != q.Key {
		t.Fatal("a parameter's value is in the key")
	}
}

// TestCacheBounds: a statement longer than MaxSQL is analyzed afresh and
// remembered nowhere; no map holds more than Max entries.
func TestCacheBounds(t *testing.T) {
	t.Parallel()
	cat := cacheCatalog(t)
	c := sqlcheck.NewCache[string](sqlcheck.CacheConfig{Max: 2, MaxSQL: 64})
	long := "SELECT id FROM orders WHERE status = '" + strings.Repeat("x", 64) + "'"
	r := c.Analyze(long, cat)
	if !r.Fresh || r.Key.Remembered() || r.Canonical == "" {
		t.Fatalf("long statement: fresh %v, remembered %v", r.Fresh, r.Key.Remembered())
	}
	c.Put(r.Key, "bound-a", "x")
	if _, ok := c.Value(r.Key, "bound-a"); ok {
		t.Fatal("a value was remembered under the zero key")
	}
	if again := c.Analyze(long, cat); !again.Fresh {
		t.Fatal("a long statement was remembered")
	}
	var keys []sqlcheck.Key
	for _, sql := range []string{"SELECT id FROM orders", "SELECT status FROM orders", "SELECT paid FROM orders"} {
		k := c.Analyze(sql, cat).Key
		c.Put(k, "b", sql)
		keys = append(keys, k)
	}
	n := 0
	for _, k := range keys {
		if _, ok := c.Value(k, "b"); ok {
			n++
		}
	}
	if n > 2 {
		t.Fatalf("%d values remembered, Max is 2", n)
	}
}
