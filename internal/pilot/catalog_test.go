package pilot_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// constraintsDDL names every constraint, so that PostgreSQL and the
// schema-file reader agree on the names.
const constraintsDDL = `
CREATE TABLE public.customers (id bigint NOT NULL, name text);
ALTER TABLE ONLY public.customers ADD CONSTRAINT customers_pkey PRIMARY KEY (id);
CREATE TABLE public.accounts (
    id bigint NOT NULL,
    balance numeric NOT NULL,
    credit_limit numeric NOT NULL,
    tenant integer,
    email text,
    customer_id bigint,
    CONSTRAINT accounts_check CHECK (balance <= credit_limit),
    CONSTRAINT accounts_email_tenant_key UNIQUE (email, tenant) INCLUDE (balance)
);
ALTER TABLE ONLY public.accounts ADD CONSTRAINT accounts_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.accounts ADD CONSTRAINT accounts_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE;
ALTER TABLE public.accounts ADD CONSTRAINT floor CHECK (balance > -1000) NOT VALID;
CREATE UNIQUE INDEX accounts_lower_email ON public.accounts USING btree (lower(email)) WHERE (tenant > 0);
CREATE INDEX accounts_tenant ON public.accounts USING btree (tenant);
CREATE TABLE public.bookings (id bigint NOT NULL, during tstzrange, hidden integer,
    CONSTRAINT bookings_during_excl EXCLUDE USING gist (during WITH &&) WHERE (hidden > 0));
CREATE FUNCTION public.audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER audit AFTER DELETE OR UPDATE OF credit_limit ON public.accounts FOR EACH ROW EXECUTE FUNCTION public.audit();
CREATE TRIGGER stamp BEFORE INSERT ON public.accounts FOR EACH STATEMENT EXECUTE FUNCTION public.audit();
CREATE TRIGGER wipe BEFORE TRUNCATE ON public.accounts FOR EACH STATEMENT EXECUTE FUNCTION public.audit();
`

// TestLoadCatalogConstraints: a live target's constraints and triggers
// are read with the columns each reads, as the schema file of the same
// DDL has them (the lints must not depend on which one compile reads);
// INCLUDE columns are left out and predicate columns counted, foreign
// keys' own triggers and disabled triggers are not listed, and a foreign
// key to a partitioned table is listed once.
func TestLoadCatalogConstraints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, constraintsDDL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	live, err := pilot.LoadCatalog(ctx, conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	file, err := sqlcheck.ParseSchemaDDL(constraintsDDL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ft := range file.Tables() {
		lt, ok := live.Table(ft.Name)
		if !ok {
			t.Fatalf("%s is not in the live catalog", ft.Name)
		}
		if got, want := shape(lt.Constraints), shape(ft.Constraints); got != want {
			t.Errorf("%s, live:\n%s\nfrom the schema file:\n%s", ft.Name, got, want)
		}
		for _, k := range lt.Constraints {
			if k.Def == "" {
				t.Errorf("%s %s has no definition", ft.Name, k.Name)
			}
		}
	}
	accounts, _ := live.Table(sqlcheck.TableName{Schema: "public", Name: "accounts"})
	if i := slices.IndexFunc(accounts.Constraints, func(k sqlcheck.Constraint) bool { return k.Name == "accounts_check" }); i < 0 ||
		accounts.Constraints[i].Def != "CHECK ((balance <= credit_limit))" {
		t.Errorf("accounts_check as PostgreSQL prints it: %+v", accounts.Constraints)
	}

	// A disabled trigger does not fire; a foreign key to a partitioned
	// table has a copy for each partition, not listed.
	if _, err := conn.Exec(ctx, `
ALTER TABLE public.accounts DISABLE TRIGGER stamp;
CREATE TABLE public.parts (id integer NOT NULL, k integer NOT NULL, CONSTRAINT parts_pkey PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE public.parts1 PARTITION OF public.parts FOR VALUES IN (1);
CREATE TABLE public.refs (id integer, pid integer, pk integer, CONSTRAINT refs_fkey FOREIGN KEY (pid, pk) REFERENCES public.parts (id, k));`); err != nil {
		t.Fatal(err)
	}
	if live, err = pilot.LoadCatalog(ctx, conn, nil); err != nil {
		t.Fatal(err)
	}
	accounts, _ = live.Table(sqlcheck.TableName{Schema: "public", Name: "accounts"})
	if strings.Contains(shape(accounts.Constraints), "stamp") {
		t.Errorf("a disabled trigger is listed: %s", shape(accounts.Constraints))
	}
	refs, _ := live.Table(sqlcheck.TableName{Schema: "public", Name: "refs"})
	if got := shape(refs.Constraints); got != `{"kind":"foreign key","name":"refs_fkey","columns":["pid","pk"],"ref_table":{"schema":"public","name":"parts"},"ref_columns":["id","k"],"on_delete":"no action","on_update":"no action","def":""}` {
		t.Errorf("refs: %s", got)
	}
	if fks := live.ForeignKeysTo(sqlcheck.TableName{Schema: "public", Name: "parts"}); len(fks) != 1 {
		t.Errorf("foreign keys to parts: %+v", fks)
	}
	parts1, _ := live.Table(sqlcheck.TableName{Schema: "public", Name: "parts1"})
	if got := shape(parts1.Constraints); !strings.Contains(got, `"name":"parts1_pkey","columns":["id","k"]`) {
		t.Errorf("parts1: %s", got)
	}
}

// shape renders constraints sorted, with their column sets sorted (a
// foreign key's in key order) and without their definitions, which
// PostgreSQL and the deparser print differently.
func shape(ks []sqlcheck.Constraint) string {
	var lines []string
	for _, k := range ks {
		k.Def = ""
		k.Columns = slices.Clone(k.Columns)
		if k.Kind != sqlcheck.ConstraintForeignKey {
			slices.Sort(k.Columns)
		}
		k.Events = slices.Clone(k.Events)
		slices.Sort(k.Events)
		b, _ := json.Marshal(k)
		lines = append(lines, string(b))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
