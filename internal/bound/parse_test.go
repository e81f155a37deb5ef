package bound

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/examples"
)

// validHeader is a well-formed delegation without its rules; tests append
// rules (or break a line) to it. Line numbers below count from here:
// sentence is line 1, allow line 6, the first rule line 7.
const validHeader = `sentence: Unstick pending orders.
grantee: agent:ops-bot
target: shop
expires: 2027-01-01T00:00:00Z
not_before: 2026-12-01T00:00:00Z
allow:
`

const selectOrders = `  - op: select
    table: public.orders
    columns: [id, status]
    max_rows: 10
`

func TestParseExamples(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(examples.FS, "*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no example delegations: %v", err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := examples.FS.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Parse(data, name)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d.File != name || d.Sentence == "" || d.Grantee != "agent:demo" || d.Target != "shop" {
				t.Errorf("Parse = %+v", d)
			}
			if d.Expires == nil || !d.Expires.Equal(time.Date(2027, 12, 31, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("expires = %v", d.Expires)
			}
			if len(d.Allow) != 2 {
				t.Fatalf("allow has %d rules, want 2", len(d.Allow))
			}
			for i, r := range d.Allow {
				if r.Op == "" || r.Table == "" || r.MaxRows == nil {
					t.Errorf("allow[%d] = %+v", i, r)
				}
				if d.Line(fmt.Sprintf("allow[%d].op", i)) == 0 {
					t.Errorf("no line for allow[%d].op", i)
				}
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	t.Parallel()
	src := validHeader + `quota: 120/hour
` // quota after allow is fine: order is free
	src = strings.Replace(src, "allow:\n", "allow:\n"+`  - op: UPDATE
    table: public.orders
    columns: [status, '"Updated At"']
    fence: "  status = 'pending'  "
    check: status <> 'pending'
    max_rows: 20
    residual: only orders that are stuck
`, 1)
	d, err := Parse([]byte(src), "d.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	r := d.Allow[0]
	if r.Op != "update" {
		t.Errorf("op = %q, want it lower-cased to update", r.Op)
	}
	if r.Fence != "status = 'pending'" {
		t.Errorf("fence = %q, want it trimmed", r.Fence)
	}
	if got := strings.Join(r.Columns, "|"); got != `status|"Updated At"` {
		t.Errorf("columns = %q (Parse keeps them as written; Compile normalizes)", got)
	}
	if r.MaxRows == nil || *r.MaxRows != 20 || r.Check != "status <> 'pending'" || r.Residual != "only orders that are stuck" {
		t.Errorf("rule = %+v", r)
	}
	if d.Quota != "120/hour" {
		t.Errorf("quota = %q", d.Quota)
	}
	if d.NotBefore == nil || !d.NotBefore.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("not_before = %v", d.NotBefore)
	}
	for field, line := range map[string]int{"sentence": 1, "expires": 4, "allow": 6, "allow[0]": 7, "allow[0].op": 7,
		"allow[0].fence": 10, "allow[0].max_rows": 12, "quota": 14,
		// Line falls back to the closest enclosing field.
		"allow[0].columns.x": 9, "allow[0].nope": 7, "nope": 0} {
		if got := d.Line(field); got != line {
			t.Errorf("Line(%q) = %d, want %d", field, got, line)
		}
	}
}

func TestParseTimesAreUTC(t *testing.T) {
	t.Parallel()
	src := strings.Replace(validHeader, "2027-01-01T00:00:00Z", "2027-01-01T02:00:00+02:00", 1) + selectOrders
	d, err := Parse([]byte(src), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.Expires.Location() != time.UTC || !d.Expires.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("expires = %v, want 2027-01-01T00:00:00Z in UTC", d.Expires)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	many := validHeader + strings.Repeat(selectOrders, MaxRules+1)
	tests := []struct {
		name string
		src  string
		// want are substrings of the error, each "file:line: field: message".
		want []string
	}{
		{"unknown top-level field", validHeader + selectOrders + "colour: red\n",
			[]string{"d.yaml:11: colour: unknown field"}},
		{"misspelt top-level field", strings.Replace(validHeader, "expires:", "expiry:", 1) + selectOrders,
			[]string{"d.yaml:4: expiry: unknown field (known: sentence, grantee, target, expires, not_before, quota, allow)"}},
		{"unknown rule field", validHeader + selectOrders + "    where: id = 1\n",
			[]string{"d.yaml:11: allow[0].where: unknown field (known: op, table, columns, fence, check, max_rows, residual)"}},
		{"unknown field in second rule", validHeader + selectOrders + selectOrders + "    fences: id = 1\n",
			[]string{"d.yaml:15: allow[1].fences: unknown field"}},
		{"top-level field twice", validHeader + selectOrders + "target: bank\n",
			[]string{"d.yaml:11: target: given twice"}},
		{"rule field twice", validHeader + selectOrders + "    max_rows: 1000\n",
			[]string{"d.yaml:11: allow[0].max_rows: given twice"}},
		{"sentence is a list", strings.Replace(validHeader, "Unstick pending orders.", "[a, b]", 1) + selectOrders,
			[]string{"d.yaml:1: sentence: must be a string"}},
		{"grantee is null", strings.Replace(validHeader, "agent:ops-bot", "", 1) + selectOrders,
			[]string{"d.yaml:2: grantee: must be a string"}},
		{"target is a mapping", strings.Replace(validHeader, "target: shop", "target: {name: shop}", 1) + selectOrders,
			[]string{"d.yaml:3: target: must be a string"}},
		{"allow is a mapping", validHeader + "  op: select\n",
			[]string{"d.yaml:7: allow: must be a list of rules"}},
		{"rule is a string", validHeader + "  - select orders\n",
			[]string{"d.yaml:7: allow[0]: a rule is a mapping"}},
		{"columns is a string", validHeader + strings.Replace(selectOrders, "[id, status]", "id, status", 1),
			[]string{"d.yaml:9: allow[0].columns: must be a list of column names"}},
		{"column is a list", validHeader + strings.Replace(selectOrders, "[id, status]", "[id, [status]]", 1),
			[]string{"d.yaml:9: allow[0].columns: must be a string"}},
		{"max_rows is a word", validHeader + strings.Replace(selectOrders, "max_rows: 10", "max_rows: many", 1),
			[]string{"d.yaml:10: allow[0].max_rows: must be a positive whole number"}},
		{"max_rows is zero", validHeader + strings.Replace(selectOrders, "max_rows: 10", "max_rows: 0", 1),
			[]string{"d.yaml:10: allow[0].max_rows: must be a positive whole number"}},
		{"max_rows is negative", validHeader + strings.Replace(selectOrders, "max_rows: 10", "max_rows: -5", 1),
			[]string{"d.yaml:10: allow[0].max_rows: must be a positive whole number"}},
		{"max_rows is fractional", validHeader + strings.Replace(selectOrders, "max_rows: 10", "max_rows: 1.5", 1),
			[]string{"d.yaml:10: allow[0].max_rows: must be a positive whole number"}},
		{"max_rows overflows", validHeader + strings.Replace(selectOrders, "max_rows: 10", "max_rows: 99999999999999999999", 1),
			[]string{"d.yaml:10: allow[0].max_rows: must be a positive whole number"}},
		{"expires is a word", strings.Replace(validHeader, "2027-01-01T00:00:00Z", "tomorrow", 1) + selectOrders,
			[]string{`d.yaml:4: expires: must be an RFC 3339 time such as 2026-12-08T00:00:00Z: "tomorrow"`}},
		{"expires is a date only", strings.Replace(validHeader, "2027-01-01T00:00:00Z", "2027-01-01", 1) + selectOrders,
			[]string{`d.yaml:4: expires: must be an RFC 3339 time`}},
		{"expires has no zone", strings.Replace(validHeader, "2027-01-01T00:00:00Z", "2027-01-01T00:00:00", 1) + selectOrders,
			[]string{`d.yaml:4: expires: must be an RFC 3339 time`}},
		{"not_before has month 13", strings.Replace(validHeader, "2026-12-01T00:00:00Z", "2026-13-01T00:00:00Z", 1) + selectOrders,
			[]string{`d.yaml:5: not_before: must be an RFC 3339 time`}},
		{"missing grantee and target", strings.Replace(strings.Replace(validHeader, "grantee: agent:ops-bot\n", "", 1), "target: shop\n", "", 1) + selectOrders,
			[]string{"d.yaml:1: grantee: required", "d.yaml:1: target: required"}},
		{"missing sentence", strings.Replace(validHeader, "sentence: Unstick pending orders.\n", "", 1) + selectOrders,
			[]string{"d.yaml:1: sentence: required"}},
		{"missing allow", strings.Replace(validHeader, "allow:\n", "", 1),
			[]string{"d.yaml:1: allow: required"}},
		{"rule without op and table", validHeader + "  - columns: [id]\n",
			[]string{"d.yaml:7: allow[0].op: required", "d.yaml:7: allow[0].table: required"}},
		{"empty allow", strings.Replace(validHeader, "allow:\n", "allow: []\n", 1),
			[]string{"d.yaml:6: allow: must list at least one rule"}},
		{"null allow", validHeader,
			[]string{"d.yaml:6: allow: must be a list of rules"}},
		{"over MaxRules", many,
			[]string{fmt.Sprintf("d.yaml:7: allow: %d rules is over the limit of %d", MaxRules+1, MaxRules)}},
		{"a list, not a mapping", "- op: select\n- op: update\n",
			[]string{"d.yaml:1: a delegation is a YAML mapping"}},
		{"a string, not a mapping", "just some words\n",
			[]string{"d.yaml:1: a delegation is a YAML mapping"}},
		{"empty file", "",
			[]string{"d.yaml: a delegation is a YAML mapping"}},
		{"broken YAML", "sentence: [unclosed\n",
			[]string{"d.yaml: not valid YAML"}},
		{"tab indentation", "allow:\n\t- op: select\n",
			[]string{"d.yaml: not valid YAML"}},
		{"every error at once", "colour: red\ncolour: blue\nsentence: [x]\nallow: 3\n",
			[]string{"d.yaml:1: colour: unknown field", "d.yaml:2: colour: unknown field", "d.yaml:3: sentence: must be a string",
				"d.yaml:4: allow: must be a list of rules", "d.yaml:1: grantee: required", "d.yaml:1: target: required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := Parse([]byte(tc.src), "d.yaml")
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", d)
			}
			if d != nil {
				t.Errorf("Parse returned a delegation with its error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Errors) == 0 {
				t.Fatalf("error %T is not a *ParseError with field errors", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if len(pe.Errors) < len(tc.want) {
				t.Errorf("%d field errors, want at least %d", len(pe.Errors), len(tc.want))
			}
		})
	}
}

func TestParseErrorFields(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(validHeader+selectOrders+"    max_rows: 1\n"), "")
	var pe *ParseError
	if !errors.As(err, &pe) || len(pe.Errors) != 1 {
		t.Fatalf("err = %v, want one field error", err)
	}
	want := FieldError{File: "", Line: 11, Field: "allow[0].max_rows", Msg: "given twice"}
	if *pe.Errors[0] != want {
		t.Errorf("field error = %+v, want %+v", *pe.Errors[0], want)
	}
	// Without a file name the location says "delegation".
	if got := pe.Errors[0].Error(); got != "delegation:11: allow[0].max_rows: given twice" {
		t.Errorf("Error() = %q", got)
	}
}

func TestParseMaxFileBytes(t *testing.T) {
	t.Parallel()
	base := validHeader + selectOrders
	pad := func(n int) []byte {
		// A comment pads the file without changing its meaning.
		return []byte(base + "#" + strings.Repeat("x", n-len(base)-2) + "\n")
	}
	atLimit := pad(MaxFileBytes)
	if len(atLimit) != MaxFileBytes {
		t.Fatalf("padding: %d bytes", len(atLimit))
	}
	if _, err := Parse(atLimit, "d.yaml"); err != nil {
		t.Errorf("a file of exactly MaxFileBytes: %v", err)
	}
	over := pad(MaxFileBytes + 1)
	_, err := Parse(over, "d.yaml")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a file over MaxFileBytes: err = %v", err)
	}
	want := fmt.Sprintf("d.yaml: the file is %d bytes, over the %d byte limit", MaxFileBytes+1, MaxFileBytes)
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestParseMaxRulesExactly(t *testing.T) {
	t.Parallel()
	d, err := Parse([]byte(validHeader+strings.Repeat(selectOrders, MaxRules)), "d.yaml")
	if err != nil {
		t.Fatalf("MaxRules rules: %v", err)
	}
	if len(d.Allow) != MaxRules {
		t.Errorf("%d rules, want %d", len(d.Allow), MaxRules)
	}
}
