package bound

import (
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// shopCatalog parses examples/shop.sql, the demo target's schema.
func shopCatalog(t testing.TB) *sqlcheck.Catalog {
	t.Helper()
	ddl, err := examples.FS.ReadFile("shop.sql")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcheck.ParseSchemaDDL(string(ddl), nil)
	if err != nil {
		t.Fatalf("ParseSchemaDDL(shop.sql): %v", err)
	}
	return cat
}

// ddlCatalog parses DDL with the given search path.
func ddlCatalog(t testing.TB, ddl string, searchPath ...string) *sqlcheck.Catalog {
	t.Helper()
	cat, err := sqlcheck.ParseSchemaDDL(ddl, searchPath)
	if err != nil {
		t.Fatalf("ParseSchemaDDL: %v", err)
	}
	return cat
}

// mustParse parses a delegation that must be well formed.
func mustParse(t testing.TB, src string) *Delegation {
	t.Helper()
	d, err := Parse([]byte(src), "d.yaml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return d
}

// compileSrc parses and compiles a delegation against cat.
func compileSrc(t testing.TB, src string, cat *sqlcheck.Catalog) (*Bound, *Report) {
	t.Helper()
	b, rep := Compile(mustParse(t, src), cat, Options{})
	if rep == nil {
		t.Fatal("Compile returned no report")
	}
	return b, rep
}

// compileExample compiles one examples/*.yaml against shop.sql.
func compileExample(t testing.TB, name string) (*Bound, *Report) {
	t.Helper()
	data, err := examples.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Parse(data, name)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return Compile(d, shopCatalog(t), Options{})
}

// delegationWith is validHeader followed by rules written as YAML list
// items; the first rule starts on line 7.
func delegationWith(rules ...string) string {
	return validHeader + strings.Join(rules, "")
}

// rule writes one rule as a YAML list item from "key: value" lines.
func rule(lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		if i == 0 {
			b.WriteString("  - " + l + "\n")
		} else {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

// findProblem returns the problem on field whose message contains msg.
func findProblem(ps []Problem, field, msg string) (Problem, bool) {
	for _, p := range ps {
		if p.Field == field && strings.Contains(p.Message, msg) {
			return p, true
		}
	}
	return Problem{}, false
}

// canonical renders b canonically, failing the test on error.
func canonical(t testing.TB, b *Bound) []byte {
	t.Helper()
	c, err := b.Canonical()
	if err != nil {
		t.Fatalf("Canonical: %v", err)
	}
	return c
}
