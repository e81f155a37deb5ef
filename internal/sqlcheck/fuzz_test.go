package sqlcheck_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// FuzzCheck feeds arbitrary statements to the checker under the
// orders_ops delegation. Seeds are every statement of the corpus.
//
//	go test -run x -fuzz FuzzCheck -fuzztime 60s ./internal/sqlcheck/
func FuzzCheck(f *testing.F) {
	c := loadCorpus(f)
	for _, cc := range c.allCases() {
		f.Add(cc.SQL)
	}
	rules := c.Rules["orders_ops"]
	f.Fuzz(func(t *testing.T, sql string) {
		d := c.Checker.Check(sql, rules)
		switch d.Outcome {
		case sqlcheck.Conforms, sqlcheck.Survey, sqlcheck.Refer:
		default:
			t.Fatalf("decision %q", d.Outcome)
		}
		if len(d.Reasons) == 0 {
			t.Fatalf("decision %s without reasons", d.Outcome)
		}
		// A recovered panic or a tree that does not deparse is a bug even
		// though it fails closed.
		if d.HasCode(sqlcheck.CodeInternal) {
			t.Fatalf("internal error: %v", d.ReasonStrings())
		}
		if d.Outcome == sqlcheck.Refer {
			if d.Rule != nil {
				t.Fatalf("refer names rule %d", *d.Rule)
			}
		} else {
			if d.CanonicalSQL == "" || d.Rule == nil {
				t.Fatalf("%s without canonical SQL or rule: %+v", d.Outcome, d)
			}
			if n := len(comments(d.CanonicalSQL)); n > 0 {
				t.Fatalf("canonical SQL has %d comments: %q", n, d.CanonicalSQL)
			}
			again := c.Checker.Check(d.CanonicalSQL, rules)
			if again.Outcome != d.Outcome || !sameRule(again.Rule, d.Rule) {
				t.Fatalf("canonical %q re-checks to %s %v, the input %s", d.CanonicalSQL, again.Outcome, again.ReasonStrings(), d.Outcome)
			}
		}
		// Stacked statements never run on the fast path. Parse directly only
		// input small enough that the C parser cannot be driven too deep.
		if strings.Contains(sql, ";") && len(sql) <= 4096 && !strings.ContainsRune(sql, 0) {
			if tree, err := pg.Parse(sql); err == nil && len(tree.Stmts) >= 2 && d.Outcome != sqlcheck.Refer {
				t.Fatalf("%d statements decided %s", len(tree.Stmts), d.Outcome)
			}
		}
	})
}

// FuzzParseSchemaDDL feeds arbitrary DDL to the catalog loader: it never
// panics, and a catalog it returns is well formed and usable.
func FuzzParseSchemaDDL(f *testing.F) {
	for _, p := range []string{
		filepath.Join(corpusRoot, "schema.sql"),
		filepath.Join("..", "..", "examples", "shop.sql"),
	} {
		if ddl, err := os.ReadFile(p); err == nil {
			f.Add(string(ddl))
		}
	}
	for _, s := range []string{
		"CREATE TABLE t (a int, b text);",
		`CREATE TABLE s."T" ("A b" int, "" text);`,
		"CREATE TABLE t (a int); CREATE TABLE t (b int);",
		"CREATE TABLE t (a int, a int);",
		"CREATE TABLE t (LIKE u); CREATE TABLE p PARTITION OF t FOR VALUES IN (1);",
		"CREATE TABLE t (a int[] , b numeric(10,2), c pg_catalog.int8, CONSTRAINT k PRIMARY KEY (a));",
		"CREATE SCHEMA s; SET search_path = s; CREATE TABLE t (a int); CREATE VIEW v AS SELECT 1;",
		"CREATE TABLE t ();",
		"CREATE TABLE t (a int DEFAULT 1 + 1);",
		"CREATE TABLE t (a int CHECK (a > 0) REFERENCES u, b int, UNIQUE (a, b), EXCLUDE (a WITH =) WHERE (b > 0), FOREIGN KEY (a, b) REFERENCES t (b, a));",
		"CREATE TABLE t (a int); ALTER TABLE ONLY t ADD CONSTRAINT k CHECK (a > b) NOT VALID, ADD PRIMARY KEY (a); ALTER TABLE u ADD UNIQUE (x);",
		"CREATE TABLE t (a int); CREATE UNIQUE INDEX ON t ((a + 1)) WHERE a > 0; CREATE TRIGGER x BEFORE UPDATE OF a OR TRUNCATE ON t EXECUTE FUNCTION f();",
		"CREATE TABLE t OF some_type;",
		"CREATE TABLE pg_catalog.t (a int); CREATE TABLE harbormaster.t (a int);",
		"-- only a comment",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ddl string) {
		if len(ddl) > 8192 {
			// Longer input could nest deep enough to crash the C parser,
			// which ParseSchemaDDL (trusted pg_dump output) does not cap.
			return
		}
		for _, path := range [][]string{nil, {"public"}, {"s", "public"}} {
			cat, err := sqlcheck.ParseSchemaDDL(ddl, path)
			if err != nil {
				if cat != nil {
					t.Fatalf("error %v with a catalog", err)
				}
				continue
			}
			tables := cat.Tables()
			if !sort.SliceIsSorted(tables, func(i, j int) bool {
				a, b := tables[i].Name, tables[j].Name
				return a.Schema < b.Schema || a.Schema == b.Schema && a.Name < b.Name
			}) {
				t.Fatalf("tables not sorted")
			}
			for _, tb := range tables {
				if tb.Name.Schema == "" || tb.Name.Name == "" {
					t.Fatalf("table with an empty name part: %+v", tb.Name)
				}
				if got, ok := cat.Table(tb.Name); !ok || got != tb {
					t.Fatalf("table %s does not look itself up", tb.Name)
				}
				seen := map[string]bool{}
				for _, col := range tb.ColumnNames() {
					if seen[col] || !tb.Has(col) {
						t.Fatalf("column %q of %s duplicated or not found", col, tb.Name)
					}
					seen[col] = true
				}
				// Every table can be checked against; reserved ones refer.
				rules := []sqlcheck.Rule{{Op: sqlcheck.OpSelect, Table: tb.Name, Columns: tb.ColumnNames()}}
				d := (&sqlcheck.Checker{Catalog: cat}).Check("SELECT * FROM "+tb.Name.String(), rules)
				if reserved := sqlcheck.IsReservedSchema(tb.Name.Schema); reserved && d.Outcome != sqlcheck.Refer {
					t.Fatalf("reserved table %s reachable: %s", tb.Name, d.Outcome)
				} else if !reserved && d.Outcome != sqlcheck.Conforms {
					// The quoted name must read back as the same table.
					t.Fatalf("SELECT * FROM %s under a rule for it: %s %v", tb.Name, d.Outcome, d.ReasonStrings())
				}
				if d.HasCode(sqlcheck.CodeInternal) {
					t.Fatalf("internal error checking %s: %v", tb.Name, d.ReasonStrings())
				}
			}
		}
	})
}
