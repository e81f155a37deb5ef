package sqlcheck_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// benchDelegation covers the typical statements below, against the corpus
// schema.
const benchDelegation = `sentence: Support work on EU customers, their orders and audit notes.
grantee: agent:bench-bot
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
  - op: insert
    table: public.customers
    columns: [name, email, region]
    check: region in ('EU', 'US')
    max_rows: 10
  - op: select
    table: public.orders
    columns: [id, customer_id, status, total_cents, created_at, updated_at]
  - op: update
    table: public.orders
    columns: [status, updated_at]
    fence: status = 'pending'
    max_rows: 1
  - op: select
    table: public.audit_notes
    columns: [id, order_id, body]
`

// typicalStatements are what an agent sends most: each conforms.
var typicalStatements = []struct{ name, sql string }{
	{"update-one-row", "UPDATE orders SET status = 'failed', updated_at = now() WHERE id = 42"},
	{"join3-subquery", "SELECT c.name, o.id, o.status, n.body FROM customers c " +
		"JOIN orders o ON o.customer_id = c.id JOIN audit_notes n ON n.order_id = o.id " +
		"WHERE o.total_cents > (SELECT avg(total_cents) FROM orders WHERE status = 'paid') " +
		"AND c.region = 'EU' AND o.created_at > now() - interval '7 days' ORDER BY o.id DESC LIMIT 20"},
	{"insert-10-rows", insert10()},
}

func insert10() string {
	var rows []string
	for i := range 10 {
		rows = append(rows, fmt.Sprintf("('Customer %d', 'c%d@example.eu', 'EU')", i, i))
	}
	return "INSERT INTO customers (name, email, region) VALUES " + strings.Join(rows, ", ")
}

func benchRules(b *testing.B, cat *sqlcheck.Catalog) []sqlcheck.Rule {
	b.Helper()
	d, err := bound.Parse([]byte(benchDelegation), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	bd, rep := bound.Compile(d, cat, bound.Options{})
	if !rep.Signable {
		b.Fatalf("bench delegation not signable: %+v", rep.Problems)
	}
	rules, err := bd.CheckRules()
	if err != nil {
		b.Fatal(err)
	}
	return rules
}

// BenchmarkCheck is parse + walk + decide + deparse of one typical
// statement: the whole static check a statement pays.
func BenchmarkCheck(b *testing.B) {
	c := loadCorpus(b)
	rules := benchRules(b, c.Checker.Catalog)
	for _, st := range typicalStatements {
		b.Run(st.name, func(b *testing.B) {
			if d := c.Checker.Check(st.sql, rules); d.Outcome != sqlcheck.Conforms {
				b.Fatalf("%s: %s %v", st.name, d.Outcome, d.ReasonStrings())
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(st.sql)))
			cpu, n := processCPU(), 0
			for b.Loop() {
				c.Checker.Check(st.sql, rules)
				n++
			}
			reportCPU(b, processCPU()-cpu, n)
		})
	}
}

// BenchmarkPhases splits the check of the join into its parts, to show
// where the time goes: the scanner pass of the input caps, the C parser
// (with its protobuf round trip), the deparse, quoting one name for a
// reason, the whole analysis, and the decision over an analysis.
func BenchmarkPhases(b *testing.B) {
	c := loadCorpus(b)
	rules := benchRules(b, c.Checker.Catalog)
	sql := typicalStatements[1].sql
	tree, err := pg.Parse(sql)
	if err != nil {
		b.Fatal(err)
	}
	a := sqlcheck.Analyze(sql, c.Checker.Catalog, sqlcheck.Limits{})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pg.Scan(sql); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pg.Parse(sql); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("deparse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pg.Deparse(tree); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("analyze", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sqlcheck.Analyze(sql, c.Checker.Catalog, sqlcheck.Limits{})
		}
	})
	b.Run("quote-ident", func(b *testing.B) {
		// Reasons quote every name they mention; each quote asks the
		// scanner whether the name is a keyword.
		b.ReportAllocs()
		for b.Loop() {
			sqlcheck.QuoteIdent("total_cents")
		}
	})
	b.Run("decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sqlcheck.Check(a, rules)
		}
	})
}

// BenchmarkCorpusMedian decides the must_pass cases round-robin, one per
// op, and reports the median time of one decision.
func BenchmarkCorpusMedian(b *testing.B) {
	c := loadCorpus(b)
	type job struct {
		sql   string
		rules []sqlcheck.Rule
	}
	var jobs []job
	for _, f := range c.Files {
		if f.Stem != "must_pass" {
			continue
		}
		for _, cc := range f.Cases {
			jobs = append(jobs, job{cc.SQL, c.Rules[cc.Delegation]})
		}
	}
	if len(jobs) < 20 {
		b.Fatalf("only %d must_pass cases", len(jobs))
	}
	samples := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	i := 0
	cpu := processCPU()
	for b.Loop() {
		j := jobs[i%len(jobs)]
		i++
		start := time.Now()
		c.Checker.Check(j.sql, j.rules)
		if len(samples) < cap(samples) {
			samples = append(samples, time.Since(start))
		}
	}
	reportCPU(b, processCPU()-cpu, i)
	sort.Slice(samples, func(x, y int) bool { return samples[x] < samples[y] })
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "ns/decision-median")
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "ns/decision-p99")
}

// reportCPU reports the process CPU time per op, when it was measured.
func reportCPU(b *testing.B, cpu time.Duration, n int) {
	if cpu > 0 && n > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
	}
}
