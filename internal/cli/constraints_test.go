package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
)

// bankSQL is a target whose constraints read columns a delegation may
// leave out: a check comparing two columns, a unique key over two, a
// trigger and a foreign key.
const bankSQL = `
CREATE TABLE public.customers (id bigint PRIMARY KEY, name text);
CREATE TABLE public.accounts (
    id bigint PRIMARY KEY,
    balance numeric NOT NULL,
    credit_limit numeric NOT NULL,
    tenant integer,
    email text,
    customer_id bigint REFERENCES public.customers(id),
    CHECK (balance <= credit_limit),
    UNIQUE (email, tenant)
);
CREATE FUNCTION public.audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER audit_balance AFTER UPDATE OF balance ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.audit();
INSERT INTO public.customers VALUES (1, 'a');
INSERT INTO public.accounts VALUES (1, 10, 500, 1, 'a@example.com', 1);
`

// bankDelegation writes balance and email, and inserts accounts with a
// customer, reading the columns of accounts given.
func bankDelegation(readAccounts, extra string) string {
	return `sentence: Adjust balances and emails of account 1, and open accounts.
grantee: agent:demo
target: bank
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.accounts
    columns: [` + readAccounts + `]
    max_rows: 10
  - op: update
    table: public.accounts
    columns: [balance, email]
    fence: id = 1
    max_rows: 1
  - op: insert
    table: public.accounts
    columns: [id, balance, credit_limit, customer_id]
    max_rows: 1
` + extra
}

// TestCompileLintsHiddenConstraintsOnATarget: against a live target, the
// compile report (and the output of sign) states, on the write rule,
// each constraint that lets a write tell the grantee something of a
// column it cannot read: the check of balance against credit_limit, the
// unique key over email and tenant, the foreign key to customers, and
// the trigger. Where the grantee may read those columns, only the trigger
// is left (it can read anything).
func TestCompileLintsHiddenConstraintsOnATarget(t *testing.T) {
	t.Parallel()
	dsn := pgtmptest.NewDatabase(t, pgtmptest.Start(t))
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), bankSQL); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	dir := t.TempDir()
	for name, src := range map[string]string{
		"hidden.yaml": bankDelegation("id, balance, email", ""),
		"readable.yaml": bankDelegation("id, balance, credit_limit, tenant, email, customer_id", `  - op: select
    table: public.customers
    columns: [id]
    max_rows: 10
`),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	compile := func(file string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := cli.Do([]string{"delegation", "compile", filepath.Join(dir, file), "--target", dsn}, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("compile %s: exit %d: %s%s", file, code, out.String(), errb.String())
		}
		return out.String()
	}
	check := "allow[1].columns: writing balance reveals whether the row passes check accounts_check on public.accounts, CHECK ((balance <= credit_limit)), " +
		"and so something of credit_limit, which no select rule on public.accounts lets the grantee read: repeated writes can find its value"
	unique := "allow[1].columns: writing email reveals whether another row of public.accounts has the same values in unique key accounts_email_tenant_key on public.accounts, " +
		"UNIQUE (email, tenant), and so something of tenant, which no select rule on public.accounts lets the grantee read"
	fk := "allow[2].columns: writing customer_id reveals whether public.customers has a row with that key, by foreign key accounts_customer_id_fkey on public.accounts, " +
		"FOREIGN KEY (customer_id) REFERENCES customers(id): no select rule on public.customers lets the grantee read id"
	trigger := "allow[1]: trigger audit_balance on public.accounts runs on this update and can read every column of any table: " +
		"its effects and errors may reveal values the bound does not list (CREATE TRIGGER audit_balance AFTER UPDATE OF balance ON public.accounts FOR EACH ROW EXECUTE FUNCTION audit())"
	out := compile("hidden.yaml")
	for _, w := range []string{check, unique, fk, trigger} {
		if !containsLine(out, w) {
			t.Errorf("the report lacks the lint\n  %s\nin:\n%s", w, out)
		}
	}
	out = compile("readable.yaml")
	for _, n := range []string{"accounts_check", "accounts_email_tenant_key", "accounts_customer_id_fkey", "accounts_pkey"} {
		if strings.Contains(out, n) {
			t.Errorf("the columns %s reads are readable, but the report names it:\n%s", n, out)
		}
	}
	if !containsLine(out, trigger) {
		t.Errorf("a trigger can read anything: the report lacks\n  %s\nin:\n%s", trigger, out)
	}

	// sign prints them with the signature.
	var kout, kerr bytes.Buffer
	if code := cli.Do([]string{"keygen", "--out", filepath.Join(dir, "alice"), "--name", "alice", "--targets", "bank"}, strings.NewReader(""), &kout, &kerr); code != 0 {
		t.Fatalf("keygen: %s", kerr.String())
	}
	kout.Reset()
	if code := cli.Do([]string{"delegation", "sign", filepath.Join(dir, "hidden.yaml"), "--target", dsn, "--key", filepath.Join(dir, "alice"),
		"--out", filepath.Join(dir, "hidden.sig")}, strings.NewReader(""), &kout, &kerr); code != 0 {
		t.Fatalf("sign: exit %d: %s", code, kerr.String())
	}
	if !strings.Contains(kout.String(), "\nLints (advice; the signature accepts them):\n") || !containsLine(kout.String(), check) {
		t.Errorf("sign does not state the check's lint:\n%s", kout.String())
	}
}

// containsLine reports whether a line of out ends with want.
func containsLine(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, want) {
			return true
		}
	}
	return false
}
