package bound

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/examples"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// FuzzParse feeds arbitrary bytes to the delegation reader: it must never
// panic, must either return a delegation or an ErrInvalid error (never
// both, never neither), and every field error must carry a message.
func FuzzParse(f *testing.F) {
	names, err := fs.Glob(examples.FS, "*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range names {
		data, err := examples.FS.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"null",
		"~",
		"[]",
		"{}",
		"- a\n- b\n",
		"sentence: [unclosed\n",
		"allow:\n\t- op: select\n",
		validHeader,
		validHeader + selectOrders,
		validHeader + selectOrders + "colour: red\n",
		validHeader + selectOrders + "    max_rows: 1\n",
		validHeader + "  - select\n",
		validHeader + "  - op: [select]\n    table: {a: b}\n    columns: [[id]]\n    max_rows: -1\n",
		"sentence: &a x\ngrantee: *a\ntarget: *a\nallow: *a\n",
		"a: &a [*a]\n",
		"? [a, b]\n: c\n",
		"!!binary sentence: x\n",
		"sentence: !!str 1\nexpires: !!timestamp 2026-01-01\n",
		"expires: 2026-12-08T00:00:00+25:00\nallow: [{op: select, max_rows: 9223372036854775808}]\n",
		"---\n...\n---\n",
		"sentence: \"\\0\"\n",
		"\xff\xfe\x00s\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, "f.yaml")
		if (d == nil) == (err == nil) {
			t.Fatalf("Parse returned delegation %v and error %v", d, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Errors) == 0 {
				t.Fatalf("error %T has no field errors", err)
			}
			for _, fe := range pe.Errors {
				if fe.Msg == "" {
					t.Fatalf("field error without a message: %+v", fe)
				}
			}
			return
		}
		if len(d.Allow) == 0 || len(d.Allow) > MaxRules {
			t.Fatalf("accepted %d rules", len(d.Allow))
		}
		if d.Sentence != strings.TrimSpace(d.Sentence) {
			t.Fatalf("sentence not trimmed: %q", d.Sentence)
		}
		for _, r := range d.Allow {
			if r.MaxRows != nil && *r.MaxRows <= 0 {
				t.Fatalf("accepted max_rows %d", *r.MaxRows)
			}
		}
	})
}

// FuzzCompile feeds arbitrary fence and check text into Compile against
// examples/shop.sql. It must never panic. When the result is signable, the
// compiled fence and check are fixed points: they re-parse through
// sqlcheck.CompileExpr to the same canonical text, and compiling the
// canonical text again gives the same delegation id. When it is not
// signable, the only problems are on the fuzzed fields (everything else in
// the delegation is valid), and no refused text reaches the bound.
func FuzzCompile(f *testing.F) {
	for _, s := range [][2]string{
		{"status = 'pending' and created_at < now() - interval '1 day'", "status in ('failed', 'retrying')"},
		{"region = 'EU'", ""},
		{"", "status <> 'pending'"},
		{"true) OR (1=1", "true"},
		{"true; DROP TABLE x", "true UNION SELECT 1"},
		{"true ORDER BY 1", "true LIMIT 1"},
		{"id in (select id from public.customers)", "exists (select 1)"},
		{"pg_sleep(1) is null", "nextval('s') > 0"},
		{"count(*) > 1", "row_number() over () > 1"},
		{"id = $1", "id::regclass is not null"},
		{"status = 'a' COLLATE \"C\"", "created_at AT TIME ZONE 'UTC' > now()"},
		{"id = any(array[1, 2])", "status ~ '^x' and status !~* 'y'"},
		{"case when id > 0 then true else false end", "coalesce(status, '') = ''"},
		{"(status, id) = ('a', 1)", "id between 1 and 10"},
		{"status is distinct from 'x'", "not (id in (1, 2, 3))"},
		{"id > -1::bigint", "- id < 0"},
		{"e'\\x41' = status", "U&'\\0041' = status"},
		{"$$x$$ = status", "B'101'::int = id"},
		{"orders.status = 'x'", "public.orders.id = 1"},
		{"true --", "true /*"},
		{"status = 'x' and (id = 1 or (id = 2 and (id = 3)))", "((((((((true))))))))"},
		{"\x00", "\xff"},
		// Deparse fixed points checked by hand; kept as regressions.
		{"-(-1) < id", "id > - -1"},
		{"status::text::varchar = 'a'", "x'1f'::int = id"},
		{"1e5 > id", "'a' || 'b' = status"},
		{"interval '1' day > created_at - created_at", "created_at > timestamp '2020-01-01'"},
		{"NOT NOT true", "status IS NOT NULL IS TRUE"},
		{"(id > 1) = (id < 5)", "status LIKE 'a%' ESCAPE '!'"},
		{"status SIMILAR TO 'a'", "ROW(1, 2) = ROW(id, id)"},
		{"extract(epoch from created_at) > 0", "created_at::date = current_date"},
		{"position('a' in status) > 0", "substring(status from 1 for 2) = 'ab'"},
		{"trim(both 'x' from status) = ''", "status is nfc normalized"},
		{"id::numeric(10,2) > 1.5", "id OPERATOR(pg_catalog.=) 1"},
		{"status = E'a\\nb'", "id = -9223372036854775808"},
		{"status = 'a' OR status = 'b' AND id = 1", "(status = 'a' OR status = 'b') AND id = 1"},
		{"now() at time zone 'utc' > created_at", "created_at > '2020-01-01' at time zone 'utc'"},
		{"id = (array[1,2])[1]", "(array[1,2])[1:2] = array[1]"},
		{"created_at < now() - interval '1 day' hour", "created_at::timestamp(3) > now()"},
		{"id = 0x10", "id = 1_000"},
		{"current_user = 'x'", "xmlroot(xml '<a/>', version no value) is not null"},
	} {
		f.Add(s[0], s[1])
	}
	cat := shopCatalog(f)
	orders, ok := cat.Table(sqlcheck.TableName{Schema: "public", Name: "orders"})
	if !ok {
		f.Fatal("shop.sql has no public.orders")
	}
	five := int64(5)
	expires := mustParse(f, delegationWith(selectOrders)).Expires
	delegation := func(fence, check string) *Delegation {
		return &Delegation{
			Sentence: "fuzz", Grantee: "agent:fuzz", Target: "shop",
			Expires: expires,
			Allow: []RuleSpec{
				{Op: "select", Table: "public.orders", Columns: []string{"id"}, Fence: fence, MaxRows: &five},
				{Op: "update", Table: "public.orders", Columns: []string{"updated_at"}, Fence: fence, Check: check, MaxRows: &five},
				{Op: "insert", Table: "public.orders", Columns: []string{"id"}, Check: check, MaxRows: &five},
				{Op: "delete", Table: "public.orders", Fence: fence, MaxRows: &five},
			},
			Lines: map[string]int{},
		}
	}
	f.Fuzz(func(t *testing.T, fence, check string) {
		b, rep := Compile(delegation(fence, check), cat, Options{})
		if b == nil || rep == nil {
			t.Fatal("Compile returned no bound or no report")
		}
		if len(b.Rules) != 4 || len(rep.Rules) != 4 {
			t.Fatalf("%d rules compiled, want 4 (only fences and checks vary)", len(b.Rules))
		}
		if !rep.Signable {
			for _, p := range rep.Problems {
				if !strings.HasSuffix(p.Field, ".fence") && !strings.HasSuffix(p.Field, ".check") {
					t.Fatalf("problem outside the fuzzed fields: %+v", p)
				}
			}
			if rep.DelegationID != "" {
				t.Fatalf("unsignable report with id %s", rep.DelegationID)
			}
			return
		}
		for i, r := range b.Rules {
			for _, e := range []struct{ kind, text string }{{"fence", r.Fence}, {"check", r.Check}} {
				if e.text == "" {
					continue
				}
				again, reasons := sqlcheck.CompileExpr(e.text, orders, cat)
				if len(reasons) > 0 {
					t.Fatalf("rule %d: canonical %s %q (from %q) is refused on re-parse: %v", i, e.kind, e.text, fence+" / "+check, reasons)
				}
				if again.Canonical != e.text {
					t.Fatalf("rule %d: canonical %s is not a fixed point:\n first %q\nsecond %q", i, e.kind, e.text, again.Canonical)
				}
			}
		}
		// Compiling the canonical text gives the same signed bytes.
		_, rep2 := Compile(delegation(b.Rules[0].Fence, b.Rules[1].Check), cat, Options{})
		if !rep2.Signable || rep2.DelegationID != rep.DelegationID {
			t.Fatalf("recompiling the canonical fence %q and check %q: signable %v id %s, want %s (%+v)",
				b.Rules[0].Fence, b.Rules[1].Check, rep2.Signable, rep2.DelegationID, rep.DelegationID, rep2.Problems)
		}
		c, err := b.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseCanonical(c); err != nil {
			t.Fatalf("ParseCanonical of a signable bound: %v", err)
		}
	})
}
