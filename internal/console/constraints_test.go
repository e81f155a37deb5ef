package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSignStatesConstraintsOverHiddenColumns: the signing ceremony's
// report states, as a lint on the write rule, a check that compares the
// column the delegation lets the grantee write with one it does not let
// it read (CHECK (balance <= credit_limit): repeated writes of balance
// find credit_limit), read from the target's catalog; with credit_limit
// readable, it does not.
func TestSignStatesConstraintsOverHiddenColumns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE public.accounts (id bigint PRIMARY KEY, balance numeric NOT NULL,
    credit_limit numeric NOT NULL, CHECK (balance <= credit_limit))`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := f.sys.Pilot.RefreshCatalog(ctx); err != nil {
		t.Fatal(err)
	}
	alice := client(t)
	if code, _, _ := useLink(t, alice, f.loginLink(t, f.keys.Grantor)); code != http.StatusOK {
		t.Fatal("login")
	}
	base := f.srv.URL + "/console/"
	_, body := do(t, alice, "GET", base+"sign", nil)
	csrf := csrfRE.FindStringSubmatch(body)[1]
	yaml := func(read string) string {
		return `sentence: Adjust the balance of account 1.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.accounts
    columns: [` + read + `]
    max_rows: 10
  - op: update
    table: public.accounts
    columns: [balance]
    fence: id = 1
    max_rows: 1
`
	}
	const lint = "<strong>allow[1].columns</strong>: writing balance reveals whether the row passes check accounts_check on public.accounts, " +
		"CHECK ((balance &lt;= credit_limit)), and so something of credit_limit, which no select rule on public.accounts lets the grantee read: " +
		"repeated writes can find its value"
	code, body := do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {yaml("id, balance")}})
	if code != http.StatusOK || !strings.Contains(body, `id="canonical"`) {
		t.Fatalf("the report: %d", code)
	}
	if !strings.Contains(between(t, body, `id="rep-h"`, "</section>"), lint) {
		t.Errorf("the ceremony's report lacks the lint\n  %s\nin:\n%s", lint, between(t, body, `id="rep-h"`, "</section>"))
	}
	_, body = do(t, alice, "POST", base+"sign/report", url.Values{"csrf": {csrf}, "yaml": {yaml("id, balance, credit_limit")}})
	if strings.Contains(body, "accounts_check") {
		t.Errorf("credit_limit is readable, yet the report names the check:\n%s", between(t, body, `id="rep-h"`, "</section>"))
	}
}
