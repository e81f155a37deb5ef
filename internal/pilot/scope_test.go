package pilot_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestScopeResolvesAsTheCheckDid: the Pilot checks a statement against the
// bound's catalog, where a table outside the bound does not exist; a name
// that PostgreSQL would resolve to such a table (earlier on the pinned
// search path) must still reach the table the check resolved it to, for a
// write's target as for a read, never the hidden one.
func TestScopeResolvesAsTheCheckDid(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA app;
		CREATE TABLE app.customers (id bigint PRIMARY KEY, name text NOT NULL, region text NOT NULL);
		INSERT INTO app.customers VALUES (3, 'hidden row', 'EU');`, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	p, err := pilot.New(ctx, pilot.Config{Target: "shop", DSN: f.dsn, SearchPath: []string{"app", "public"}}, f.pilotVerifier, f.signers)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f.pilot = p
	f.addBound(t, "public-names", []byte(`sentence: read and fix the names of customers
grantee: agent:demo
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    max_rows: 5
  - op: update
    table: public.customers
    columns: [name]
    max_rows: 1
`))
	res, err := p.Execute(ctx, f.request(t, "public-names", "UPDATE customers SET name = 'Changed' WHERE id = 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || res.RowsAffected != 1 {
		t.Fatalf("update: %s %v, want it run on public.customers", res.Outcome, res.Reasons)
	}
	var hidden, public string
	if err := conn.QueryRow(ctx, "SELECT (SELECT name FROM app.customers WHERE id = 3), (SELECT name FROM public.customers WHERE id = 3)").Scan(&hidden, &public); err != nil {
		t.Fatal(err)
	}
	if hidden != "hidden row" || public != "Changed" {
		t.Fatalf("app.customers 3 is %q, public.customers 3 is %q: the write reached the table outside the bound", hidden, public)
	}
	res, err = p.Execute(ctx, f.request(t, "public-names", "SELECT name FROM customers WHERE id = 3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Executed || len(res.Rows) != 1 || byName(res)[0]["name"] != "Changed" {
		t.Fatalf("read: %s %v rows %v, want public.customers' row", res.Outcome, res.Reasons, res.Rows)
	}
}
