package sqlcheck_test

import (
	"encoding/json"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// TestParseSchemaDDLConstraints: a schema file's constraints and triggers,
// as pg_dump writes them and as column constraints, are read onto their
// tables with the columns each reads, PostgreSQL's names for the unnamed
// ones, and their definitions.
func TestParseSchemaDDLConstraints(t *testing.T) {
	t.Parallel()
	cat, err := sqlcheck.ParseSchemaDDL(`
CREATE TABLE public.customers (id bigint PRIMARY KEY, name text);
CREATE TABLE public.accounts (
    id bigint NOT NULL,
    balance numeric NOT NULL CHECK (balance > -1e6),
    credit_limit numeric NOT NULL,
    tenant integer,
    email text UNIQUE,
    customer_id bigint REFERENCES public.customers(id) ON DELETE CASCADE,
    CHECK (balance <= credit_limit),
    UNIQUE (email, tenant) INCLUDE (balance)
);
ALTER TABLE ONLY public.accounts ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.accounts ADD CONSTRAINT floor CHECK (balance > -1000) NOT VALID;
CREATE UNIQUE INDEX accounts_lower_email ON public.accounts USING btree (lower(email)) WHERE (tenant > 0);
CREATE INDEX accounts_tenant ON public.accounts (tenant);
CREATE TABLE public.rooms (room integer, during tstzrange, hidden integer,
    EXCLUDE USING gist (room WITH =, during WITH &&) WHERE (hidden > 0));
CREATE TRIGGER audit AFTER UPDATE OF credit_limit, balance OR DELETE ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.audit();
CREATE TRIGGER wipe BEFORE TRUNCATE ON public.accounts EXECUTE FUNCTION public.audit();
CREATE TRIGGER elsewhere BEFORE INSERT ON public.nowhere FOR EACH ROW EXECUTE FUNCTION public.audit();
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	accounts, _ := cat.Table(sqlcheck.TableName{Schema: "public", Name: "accounts"})
	customers := sqlcheck.TableName{Schema: "public", Name: "customers"}
	want := []sqlcheck.Constraint{
		{Kind: sqlcheck.ConstraintCheck, Name: "accounts_balance_check", Columns: []string{"balance"}, Def: "CHECK (balance > -1e6)"},
		{Kind: sqlcheck.ConstraintUnique, Name: "accounts_email_key", Columns: []string{"email"}, Def: "UNIQUE (email)"},
		{Kind: sqlcheck.ConstraintForeignKey, Name: "accounts_customer_id_fkey", Columns: []string{"customer_id"}, RefTable: &customers, RefColumns: []string{"id"},
			OnDelete: "cascade", OnUpdate: "no action", Def: "FOREIGN KEY (customer_id) REFERENCES public.customers (id) ON DELETE CASCADE"},
		{Kind: sqlcheck.ConstraintCheck, Name: "accounts_check", Columns: []string{"balance", "credit_limit"}, Def: "CHECK (balance <= credit_limit)"},
		{Kind: sqlcheck.ConstraintUnique, Name: "accounts_email_tenant_balance_key", Columns: []string{"email", "tenant"}, Def: "UNIQUE (email, tenant) INCLUDE (balance)"},
		{Kind: sqlcheck.ConstraintPrimaryKey, Name: "accounts_pkey", Columns: []string{"id"}, Def: "PRIMARY KEY (id)"},
		{Kind: sqlcheck.ConstraintCheck, Name: "floor", Columns: []string{"balance"}, NotValid: true, Def: "CHECK (balance > -1000) NOT VALID"},
		{Kind: sqlcheck.ConstraintUnique, Name: "accounts_lower_email", Columns: []string{"email", "tenant"},
			Def: "CREATE UNIQUE INDEX accounts_lower_email ON public.accounts USING btree (lower(email)) WHERE tenant > 0"},
		{Kind: sqlcheck.ConstraintTrigger, Name: "audit", Columns: []string{"credit_limit", "balance"}, Events: []string{"update", "delete"},
			Def: "CREATE TRIGGER audit AFTER DELETE OR UPDATE OF credit_limit, balance ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.audit()"},
	}
	if got, w := js(t, accounts.Constraints), js(t, want); got != w {
		t.Errorf("accounts:\n got %s\nwant %s", got, w)
	}
	rooms, _ := cat.Table(sqlcheck.TableName{Schema: "public", Name: "rooms"})
	wantRooms := []sqlcheck.Constraint{{Kind: sqlcheck.ConstraintExclusion, Name: "rooms_room_during_excl", Columns: []string{"room", "during", "hidden"},
		Def: "EXCLUDE USING gist (room WITH =, during WITH &&) WHERE (hidden > 0)"}}
	if got, w := js(t, rooms.Constraints), js(t, wantRooms); got != w {
		t.Errorf("rooms:\n got %s\nwant %s", got, w)
	}
	fks := cat.ForeignKeysTo(customers)
	if len(fks) != 1 || fks[0].Table.Name != "accounts" || fks[0].Constraint.Name != "accounts_customer_id_fkey" {
		t.Errorf("foreign keys to customers: %+v", fks)
	}
	if !want[2].Checks(sqlcheck.OpUpdate) || want[2].Checks(sqlcheck.OpDelete) || want[0].Checks(sqlcheck.OpDelete) {
		t.Error("Checks: NO ACTION checks, CASCADE acts, a check constraint is no foreign key")
	}
	if !want[8].Fires(sqlcheck.OpUpdate, []string{"balance"}) || want[8].Fires(sqlcheck.OpUpdate, []string{"email"}) ||
		!want[8].Fires(sqlcheck.OpDelete, nil) || want[8].Fires(sqlcheck.OpInsert, []string{"balance"}) || want[0].Fires(sqlcheck.OpUpdate, []string{"balance"}) {
		t.Error("Fires: an update trigger fires on its UPDATE OF columns and its other events only; a check never fires")
	}
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWithoutEstimatesDropsDefinitions: the catalog shown to anyone who
// reaches the upload route (a refused upload carries its report) names a
// constraint's kind and columns, never its definition.
func TestWithoutEstimatesDropsDefinitions(t *testing.T) {
	cat, err := sqlcheck.ParseSchemaDDL(`CREATE TABLE public.accounts (id int PRIMARY KEY, balance int, credit_limit int, CHECK (balance <= credit_limit));`, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := cat.Table(sqlcheck.TableName{Schema: "public", Name: "accounts"})
	bare, _ := cat.WithoutEstimates().Table(sqlcheck.TableName{Schema: "public", Name: "accounts"})
	if len(full.Constraints) == 0 || len(bare.Constraints) != len(full.Constraints) {
		t.Fatalf("constraints %v, without estimates %v", full.Constraints, bare.Constraints)
	}
	for i, k := range bare.Constraints {
		if k.Def != "" || full.Constraints[i].Def == "" || k.Kind != full.Constraints[i].Kind || len(k.Columns) != len(full.Constraints[i].Columns) {
			t.Errorf("constraint %d: %+v, from %+v", i, k, full.Constraints[i])
		}
	}
}
