package cover

import (
	"strings"
	"testing"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

func evalCatalog(t testing.TB) (*sqlcheck.Catalog, *sqlcheck.Table) {
	cat, err := sqlcheck.ParseSchemaDDL(draftSchema, []string{"public"})
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := cat.Resolve("public", "orders")
	return cat, tb
}

// TestEvaluator: the evaluator agrees with PostgreSQL's semantics on the
// forms fences and checks use, NULL included, and refuses what it does
// not know (so the gates fail closed).
func TestEvaluator(t *testing.T) {
	t.Parallel()
	cat, tb := evalCatalog(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	row := Row{"id": int64(3), "customer_id": int64(7), "status": "pending", "total_cents": int64(1500),
		"created_at": now.Add(-48 * time.Hour), "updated_at": now}
	nullRow := copyRow(row)
	nullRow["status"] = nil
	ev := (&Env{Catalog: cat, Now: now}).evaluator(tb)
	for _, c := range []struct {
		expr string
		row  Row
		want any
	}{
		{"status = 'pending'", row, true},
		{"status = 'pending' and created_at < now() - interval '1 day'", row, true},
		{"created_at > now() - interval '1 day'", row, false},
		{"status in ('failed', 'retrying')", row, false},
		{"status not in ('failed', 'retrying')", row, true},
		{"total_cents between 1000 and 2000", row, true},
		{"total_cents not between 1000 and 2000", row, false},
		{"id = '3'", row, true},
		{"total_cents / 100 >= 15", row, true},
		{"status like 'pend%'", row, true},
		{"upper(status) = 'PENDING'", row, true},
		{"status is null", row, false},
		{"status = 'pending'", nullRow, nil},
		{"status = 'pending' or true", nullRow, true},
		{"status = 'pending' and false", nullRow, false},
		{"status in ('a', 'b')", nullRow, nil},
		{"coalesce(status, 'none') = 'none'", nullRow, true},
		{"status is distinct from 'pending'", nullRow, true},
		{"(status = 'pending') is not true", nullRow, true},
		{"created_at < '2026-12-01T00:00:00Z'", row, true},
		{"-total_cents < 0", row, true},
	} {
		x, reasons := sqlcheck.CompileExpr(c.expr, tb, cat)
		if len(reasons) > 0 {
			t.Fatalf("%s: %v", c.expr, reasons)
		}
		got, err := ev.Truth(x.Node, c.row)
		if err != nil || got != c.want {
			t.Errorf("%s = %v (%v), want %v", c.expr, got, err, c.want)
		}
	}
	for _, expr := range []string{"date_trunc('day', created_at) = created_at", "status ~ 'p.*'", "status = any(array['a'])"} {
		x, reasons := sqlcheck.CompileExpr(expr, tb, cat)
		if len(reasons) > 0 {
			continue
		}
		if _, err := ev.Truth(x.Node, row); err == nil {
			t.Errorf("%s evaluated; want a refusal", expr)
		}
	}
}

// TestReword: every rewording parses, and the token-level ones deparse to
// exactly the original's canonical form (the same statement to the
// server); the tree-level ones differ only as promised.
func TestReword(t *testing.T) {
	t.Parallel()
	src := "UPDATE public.orders SET status = 'failed' WHERE id = 3 AND status = 'pending' /* why */"
	vs, err := Reword(src)
	if err != nil {
		t.Fatal(err)
	}
	canon := func(s string) string {
		tree, err := pg.Parse(s)
		if err != nil {
			t.Fatalf("%q does not parse: %v", s, err)
		}
		d, err := pg.Deparse(tree)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := canon(src)
	names := map[string]string{}
	for _, v := range vs {
		names[v.Name] = canon(v.SQL)
	}
	for _, n := range []string{"formatting", "comments added", "case", "quoting", "comments removed (canonical form)"} {
		if names[n] != base {
			t.Errorf("%s: %q, want %q", n, names[n], base)
		}
	}
	if !strings.Contains(names["table alias"], "hm_t.status") || !strings.Contains(names["conjunct order"], "WHERE status = 'pending' AND id = 3") || !strings.Contains(names["literal forms"], "id = '3'") {
		t.Errorf("tree rewordings: %v", names)
	}
	if len(vs) != 8 {
		t.Errorf("%d rewordings, want 8", len(vs))
	}
}

// TestG3CatchesStatementText: an element over the statement's text is
// not invariant under rewording; a fence is.
func TestG3CatchesStatementText(t *testing.T) {
	t.Parallel()
	cat, _ := evalCatalog(t)
	env := &Env{Catalog: cat, Now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	g := env.GateElement(Element{Op: "update", Table: "public.orders", Columns: []string{"status"}, Kind: KindStatement, Expr: `ticket: OPS-[0-9]+`})
	if g.Admitted || g.G1.OK || g.G3.OK || !strings.Contains(g.G3.Why, "comments removed") {
		t.Errorf("statement pattern: %+v", g)
	}
	g = env.GateElement(Element{Op: "update", Table: "public.orders", Columns: []string{"status"}, Kind: KindFence, Expr: "status = 'pending'"})
	if !g.G3.OK {
		t.Errorf("fence G3: %+v", g.G3)
	}
}

// FuzzEvaluate: any expression CompileExpr accepts is evaluated, gated and
// reworded without a panic.
func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"status = 'pending'", "created_at < now() - interval '1 day'", "total_cents between 1 and 2", "status like '%a_'", "not (id in (1, 2, null))", "coalesce(status, '') <> ''", "id / 0 = 1"} {
		f.Add(s)
	}
	cat, tb := evalCatalog(f)
	env := &Env{Catalog: cat, Now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	f.Fuzz(func(t *testing.T, expr string) {
		x, reasons := sqlcheck.CompileExpr(expr, tb, cat)
		if len(reasons) > 0 {
			return
		}
		_ = env.Gate(Subject{Kind: KindFence, Rule: "rule 0", Op: sqlcheck.OpUpdate, Table: tb, Expr: x, Columns: []string{"status"}})
		_, _ = Reword("SELECT id FROM public.orders WHERE " + expr)
	})
}
