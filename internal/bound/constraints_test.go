package bound

import (
	"strings"
	"testing"
)

// bankDDL has a constraint or trigger of every kind the lint reads, in
// the forms pg_dump writes them and in column constraints.
const bankDDL = `
CREATE TABLE public.customers (id bigint PRIMARY KEY, name text, secret text);
CREATE TABLE public.accounts (
    id bigint NOT NULL,
    balance numeric NOT NULL,
    credit_limit numeric NOT NULL,
    tenant integer,
    email text,
    customer_id bigint REFERENCES public.customers(id),
    CONSTRAINT accounts_check CHECK (balance <= credit_limit),
    UNIQUE (email, tenant)
);
ALTER TABLE ONLY public.accounts ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.accounts ADD CONSTRAINT floor CHECK (balance > -1000) NOT VALID;
CREATE TRIGGER audit_limit AFTER UPDATE OF credit_limit ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.audit();
CREATE TRIGGER stamp BEFORE INSERT ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.stamp();
CREATE TABLE public.notes (id bigint, account_id bigint, body text);
ALTER TABLE ONLY public.notes ADD CONSTRAINT notes_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.accounts(id);
CREATE TABLE public.holds (id bigint, account_id bigint REFERENCES public.accounts(id) ON DELETE CASCADE ON UPDATE SET NULL);
`

// TestCompileLintsHiddenConstraints: every constraint and trigger that
// makes a write's outcome depend on a column the grantee cannot read is
// a lint on the write rule; one whose columns it can read, or that the
// write does not reach, is not.
func TestCompileLintsHiddenConstraints(t *testing.T) {
	t.Parallel()
	cat := ddlCatalog(t, bankDDL)
	sel := func(table, cols string) string {
		return rule("op: select", "table: "+table, "columns: ["+cols+"]", "max_rows: 5")
	}
	upd := func(cols string) string {
		return rule("op: update", "table: accounts", "columns: ["+cols+"]", "fence: id = 1", "max_rows: 1")
	}
	ins := func(table, cols string) string {
		return rule("op: insert", "table: "+table, "columns: ["+cols+"]", "max_rows: 1")
	}
	del := func(table string) string { return rule("op: delete", "table: "+table, "fence: id = 1", "max_rows: 1") }
	tests := []struct {
		name  string
		rules []string
		field string
		want  []string // substrings of lints on field
		not   []string // no lint says these
	}{
		{"check over a hidden column", []string{upd("balance")}, "allow[0].columns",
			[]string{"writing balance reveals whether the row passes check accounts_check on public.accounts, CHECK (balance <= credit_limit), " +
				"and so something of credit_limit, which no select rule on public.accounts lets the grantee read: repeated writes can find its value"},
			[]string{"floor"}},
		{"check whose columns the grantee reads", []string{upd("balance"), sel("accounts", "id, balance, credit_limit")}, "allow[0].columns",
			nil, []string{"accounts_check"}},
		{"check over the written column alone: the writer knows it", []string{upd("balance"), sel("accounts", "id, credit_limit")}, "allow[0].columns",
			nil, []string{"accounts_check", "floor"}},
		{"check over two written, unreadable columns", []string{upd("balance, credit_limit")}, "allow[0].columns",
			[]string{"writing balance, credit_limit reveals whether the row passes check accounts_check", "and so something of balance, credit_limit, which", "find their value"}, nil},
		{"a check not validated, on an update of another column", []string{upd("email"), sel("accounts", "id, email, tenant")}, "allow[0]",
			[]string{"updating a row of public.accounts reveals whether it passes check floor on public.accounts, CHECK (balance > -1000) NOT VALID, " +
				"which is not validated on the rows already there, and so something of balance, which no select rule"}, []string{"accounts_check"}},
		{"an insert's check reads its own row", []string{ins("accounts", "id, balance")}, "allow[0].columns",
			nil, []string{"accounts_check", "floor"}},
		{"a unique key over a hidden column", []string{upd("email"), sel("accounts", "id, email")}, "allow[0].columns",
			[]string{"writing email reveals whether another row of public.accounts has the same values in unique key accounts_email_tenant_key on public.accounts, " +
				"UNIQUE (email, tenant), and so something of tenant, which no select rule on public.accounts lets the grantee read"}, nil},
		{"a unique key the grantee reads", []string{upd("email"), sel("accounts", "id, email, tenant")}, "allow[0].columns",
			nil, []string{"accounts_email_tenant_key"}},
		{"a unique key the write leaves alone", []string{upd("balance")}, "allow[0].columns",
			nil, []string{"accounts_email_tenant_key", "accounts_pkey"}},
		{"a primary key inserted without a select rule", []string{ins("accounts", "id, balance, credit_limit")}, "allow[0].columns",
			[]string{"writing id reveals whether another row of public.accounts has the same values in primary key accounts_pkey on public.accounts, PRIMARY KEY (id), and so something of id, which"}, nil},
		{"a foreign key to a table no rule names", []string{ins("accounts", "id, customer_id"), sel("accounts", "id, customer_id")}, "allow[0].columns",
			[]string{"writing customer_id reveals whether public.customers has a row with that key, by foreign key accounts_customer_id_fkey on public.accounts, " +
				"FOREIGN KEY (customer_id) REFERENCES public.customers (id): no select rule on public.customers lets the grantee read id"}, nil},
		{"a foreign key to a table the grantee reads", []string{ins("accounts", "id, customer_id"), sel("accounts", "id, customer_id"), sel("customers", "id")}, "allow[0].columns",
			nil, []string{"accounts_customer_id_fkey"}},
		{"a delete of a referenced row", []string{del("accounts"), sel("accounts", "id")}, "allow[0]",
			[]string{"deleting a row of public.accounts reveals whether a row of public.notes references it, by foreign key notes_account_id_fkey on public.notes, " +
				"FOREIGN KEY (account_id) REFERENCES public.accounts (id): no select rule on public.notes lets the grantee read account_id"},
			[]string{"holds_account_id_fkey"}}, // CASCADE: the Pilot refers every such delete
		{"a delete of a referenced row, references readable", []string{del("accounts"), sel("accounts", "id"), sel("notes", "id, account_id")}, "allow[0]",
			nil, []string{"notes_account_id_fkey"}},
		{"an update of a referenced key", []string{upd("id"), sel("accounts", "id")}, "allow[0].columns",
			[]string{"changing id of a row of public.accounts reveals whether a row of public.notes references it"}, []string{"holds_account_id_fkey"}},
		{"an update that leaves the referenced key alone", []string{upd("balance")}, "allow[0].columns",
			nil, []string{"notes_account_id_fkey"}},
		{"an update trigger on a written column", []string{upd("credit_limit"), sel("accounts", "id, balance, credit_limit")}, "allow[0]",
			[]string{"trigger audit_limit on public.accounts runs on this update and can read every column of any table: " +
				"its effects and errors may reveal values the bound does not list (CREATE TRIGGER audit_limit AFTER UPDATE OF credit_limit ON public.accounts"}, []string{"stamp"}},
		{"an update trigger of other columns", []string{upd("balance"), sel("accounts", "id, balance, credit_limit")}, "allow[0]",
			nil, []string{"audit_limit", "stamp"}},
		{"an insert trigger", []string{ins("accounts", "id, balance, credit_limit"), sel("accounts", "id, balance, credit_limit")}, "allow[0]",
			[]string{"trigger stamp on public.accounts runs on this insert"}, []string{"audit_limit"}},
		{"reads never lint", []string{sel("accounts", "id")}, "allow[0]", nil, []string{"accounts_", "trigger"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, rep := compileSrc(t, delegationWith(tc.rules...), cat)
			if !rep.Signable {
				t.Fatalf("lints never make a delegation unsignable, but: %+v", rep.Problems)
			}
			for _, w := range tc.want {
				l, ok := findProblem(rep.Lints, tc.field, w)
				if !ok {
					t.Errorf("no lint on %s saying %q; lints:\n%s", tc.field, w, lintLines(rep.Lints))
				} else if l.Line == 0 {
					t.Errorf("lint %+v has no line", l)
				}
			}
			for _, n := range tc.not {
				for _, l := range rep.Lints {
					if strings.Contains(l.Message, n) {
						t.Errorf("unexpected lint naming %q: %s: %s", n, l.Field, l.Message)
					}
				}
			}
		})
	}
}

func lintLines(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("  " + p.Field + ": " + p.Message + "\n")
	}
	return b.String()
}
