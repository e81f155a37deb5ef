package bound

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCanonicalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"unstick-orders.yaml", "fix-name-typos.yaml"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, rep := compileExample(t, name)
			if !rep.Signable {
				t.Fatalf("not signable: %+v", rep.Problems)
			}
			c := canonical(t, b)
			if !bytes.HasSuffix(c, []byte("}\n")) || bytes.Count(c, []byte("\n")) != 1 {
				t.Errorf("canonical form is not one line with a final newline: %q", c)
			}
			back, err := ParseCanonical(c)
			if err != nil {
				t.Fatalf("ParseCanonical: %v", err)
			}
			if !reflect.DeepEqual(back, b) {
				t.Errorf("round trip changed the bound:\n%+v\n%+v", back, b)
			}
			if again := canonical(t, back); !bytes.Equal(again, c) {
				t.Errorf("round trip changed the bytes:\n%s\n%s", c, again)
			}
			if ID(c) != rep.DelegationID {
				t.Errorf("ID = %s, report says %s", ID(c), rep.DelegationID)
			}
		})
	}
}

func TestCanonicalFieldOrder(t *testing.T) {
	t.Parallel()
	b, _ := compileExample(t, "unstick-orders.yaml")
	c := string(canonical(t, b))
	order := []string{`{"version":1,`, `"sentence":`, `"grantee":`, `"target":`, `"expires":`, `"quota":{"count":120,"per":"hour"}`,
		`"search_path":["public"]`, `"rules":[{"op":"select",`, `"provenance":{"compiler":"harbormaster-compiler/1","bundle":"none"}}`}
	last := -1
	for _, part := range order {
		i := strings.Index(c, part)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in %s", part, c)
		}
		last = i
	}
	if strings.Contains(c, "not_before") {
		t.Errorf("an absent not_before is rendered: %s", c)
	}
}

func TestCanonicalNoHTMLEscaping(t *testing.T) {
	t.Parallel()
	src := strings.Replace(delegationWith(rule("op: delete", "table: orders", "fence: id < 5 and id <> 3", "max_rows: 1")),
		"Unstick pending orders.", "Remove <test> & 'demo' orders.", 1)
	b, rep := compileSrc(t, src, shopCatalog(t))
	if !rep.Signable {
		t.Fatalf("not signable: %+v", rep.Problems)
	}
	c := canonical(t, b)
	if !bytes.Contains(c, []byte(`"sentence":"Remove <test> & 'demo' orders."`)) || !bytes.Contains(c, []byte(`"fence":"id < 5 AND id <> 3"`)) {
		t.Errorf("canonical form escapes HTML: %s", c)
	}
	if _, err := ParseCanonical(c); err != nil {
		t.Errorf("ParseCanonical: %v", err)
	}
	escaped := bytes.Replace(c, []byte("<test>"), []byte(`\u003ctest\u003e`), 1)
	if _, err := ParseCanonical(escaped); err == nil {
		t.Error("ParseCanonical accepted an HTML-escaped variant of canonical bytes")
	}
}

func TestParseCanonicalRefuses(t *testing.T) {
	t.Parallel()
	b, _ := compileExample(t, "fix-name-typos.yaml")
	c := canonical(t, b)
	var indented bytes.Buffer
	if err := json.Indent(&indented, c, "", "  "); err != nil {
		t.Fatal(err)
	}
	// Re-marshalled through a map, keys come out sorted: same content,
	// different order.
	var m map[string]any
	if err := json.Unmarshal(c, &m); err != nil {
		t.Fatal(err)
	}
	sorted, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v string) []byte {
		return bytes.Replace(c, []byte(`{"version":1,`), []byte(`{"version":`+v+`,`), 1)
	}
	tests := []struct {
		name string
		data []byte
		msg  string
	}{
		{"indented", indented.Bytes(), "not in canonical form"},
		{"space after a colon", bytes.Replace(c, []byte(`"version":1`), []byte(`"version": 1`), 1), "not in canonical form"},
		{"leading space", join([]byte(" "), c), "not in canonical form"},
		{"no final newline", bytes.TrimSuffix(c, []byte("\n")), "not in canonical form"},
		{"CRLF", join(bytes.TrimSuffix(c, []byte("\n")), []byte("\r\n")), "not in canonical form"},
		{"two final newlines", join(c, []byte("\n")), "not in canonical form"},
		{"trailing object", join(c, c), "not in canonical form"},
		{"keys reordered", join(sorted, []byte("\n")), "not in canonical form"},
		{"unknown field", bytes.Replace(c, []byte(`{"version":1,`), []byte(`{"version":1,"admin":true,`), 1), "unknown field"},
		{"unknown rule field", bytes.Replace(c, []byte(`"op":"select",`), []byte(`"op":"select","where":"true",`), 1), "unknown field"},
		{"escaped letter", bytes.Replace(c, []byte(`"grantee":"agent:demo"`), []byte(`"grantee":"\u0061gent:demo"`), 1), "not in canonical form"},
		{"number as 1.0", bytes.Replace(c, []byte(`"max_rows":1,`), []byte(`"max_rows":1.0,`), 1), ""},
		{"number with exponent", bytes.Replace(c, []byte(`"max_rows":200}`), []byte(`"max_rows":2e2}`), 1), ""},
		{"version 2", withVersion("2"), "unknown version 2"},
		{"version 0", withVersion("0"), "unknown version 0"},
		{"unqualified table", bytes.Replace(c, []byte(`"table":"public.customers"`), []byte(`"table":"customers"`), 1), "not schema-qualified"},
		{"table not a name", bytes.Replace(c, []byte(`"table":"public.customers"`), []byte(`"table":"public.customers; drop"`), 1), ""},
		{"not JSON", []byte("sentence: yaml\n"), "parse canonical"},
		{"empty", nil, "parse canonical"},
		{"null", []byte("null\n"), ""},
		{"over MaxFileBytes", join(bytes.Repeat([]byte(" "), MaxFileBytes), c), "over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if bytes.Equal(tc.data, c) {
				t.Fatal("the test case does not change the canonical bytes")
			}
			got, err := ParseCanonical(tc.data)
			if err == nil {
				t.Fatalf("ParseCanonical accepted %q as %+v", tc.data, got)
			}
			if got != nil {
				t.Error("a bound returned with an error")
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "bound: ") {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestActiveAt(t *testing.T) {
	t.Parallel()
	nb := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	exp := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	with := &Bound{NotBefore: nb.Format(time.RFC3339), Expires: exp.Format(time.RFC3339)}
	without := &Bound{Expires: exp.Format(time.RFC3339)}
	tests := []struct {
		name          string
		at            time.Time
		with, without bool
	}{
		{"long before", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), false, true},
		{"just before not_before", nb.Add(-time.Nanosecond), false, true},
		{"at not_before", nb, true, true},
		{"between", nb.Add(72 * time.Hour), true, true},
		{"in another zone", exp.Add(-time.Minute).In(time.FixedZone("X", 5*3600)), true, true},
		{"just before expires", exp.Add(-time.Nanosecond), true, true},
		{"at expires", exp, false, false},
		{"after expires", exp.Add(time.Second), false, false},
	}
	for _, tc := range tests {
		if got := with.ActiveAt(tc.at); got != tc.with {
			t.Errorf("%s: with not_before ActiveAt(%v) = %v", tc.name, tc.at, got)
		}
		if got := without.ActiveAt(tc.at); got != tc.without {
			t.Errorf("%s: without not_before ActiveAt(%v) = %v", tc.name, tc.at, got)
		}
	}
	for _, b := range []*Bound{{Expires: ""}, {Expires: "soon"}, {Expires: exp.Format(time.RFC3339), NotBefore: "yesterday"}} {
		if b.ActiveAt(nb) {
			t.Errorf("%+v is active with unreadable times", b)
		}
	}
}

func TestActiveAtCompiled(t *testing.T) {
	t.Parallel()
	b, rep := compileSrc(t, delegationWith(selectOrders), shopCatalog(t))
	if !rep.Signable {
		t.Fatal(rep.Problems)
	}
	if b.NotBefore != "2026-12-01T00:00:00Z" || b.Expires != "2027-01-01T00:00:00Z" {
		t.Fatalf("times %q %q", b.NotBefore, b.Expires)
	}
	if !b.ActiveAt(time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)) || b.ActiveAt(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Error("ActiveAt disagrees with the compiled times")
	}
	if at, err := b.NotBeforeAt(); err != nil || !at.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("NotBeforeAt = %v, %v", at, err)
	}
	if at, err := (&Bound{}).NotBeforeAt(); err != nil || !at.IsZero() {
		t.Errorf("NotBeforeAt without not_before = %v, %v", at, err)
	}
}

// join concatenates into a fresh slice, never into a part's spare capacity.
func join(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
