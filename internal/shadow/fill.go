package shadow

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
)

// firstNormalOID is PostgreSQL's FirstNormalObjectId: a type OID below
// it is built in, the same in every PostgreSQL of a version.
const firstNormalOID = 16384

func ident(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

// fill makes spec's database on srv, a copy of the Manager's template
// (prepareTemplate): the postgres database renamed to the target's name,
// the bound's schemas, tables, listed columns and keys, the role with the
// bound's privileges on them, and no other database (template1 dropped).
// No row is ever written.
func fill(ctx context.Context, srv *pgtmp.Server, spec *Spec, timeout time.Duration) error {
	if spec.Target != "postgres" {
		// A database cannot be renamed from a session in it.
		if err := execIn(ctx, srv, "template1", "ALTER DATABASE postgres RENAME TO "+ident(spec.Target)); err != nil {
			return err
		}
	}
	conn, err := pgx.Connect(ctx, srv.DSN(spec.Target))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	types := map[string]string{}
	for _, t := range spec.Tables {
		for _, c := range t.Columns {
			if _, ok := types[c.Type]; !ok {
				types[c.Type] = builtinType(ctx, conn, c.Type)
			}
		}
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+";\n", a...) }
	role := ident(spec.Role)
	db := ident(spec.Target)
	w("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT %d", role, poolConns+2)
	path := make([]string, len(spec.SearchPath))
	for i, s := range spec.SearchPath {
		path[i] = ident(s)
	}
	if len(path) > 0 {
		w("ALTER ROLE %s SET search_path = %s", role, strings.Join(path, ", "))
	}
	w("ALTER ROLE %s SET default_transaction_read_only = on", role)
	w("ALTER ROLE %s SET statement_timeout = %d", role, max(timeout.Milliseconds(), 1))
	w("GRANT CONNECT ON DATABASE %s TO %s", db, role)
	schemas := map[string]bool{"public": true}
	for _, t := range spec.Tables {
		if !schemas[t.Schema] {
			schemas[t.Schema] = true
			w("CREATE SCHEMA %s", ident(t.Schema))
			w("GRANT USAGE ON SCHEMA %s TO %s", ident(t.Schema), role)
		}
		name := ident(t.Schema, t.Name)
		var cols []string
		var sel, ins, upd []string
		for _, c := range t.Columns {
			def := ident(c.Name) + " " + types[c.Type]
			if c.NotNull {
				def += " NOT NULL"
			}
			cols = append(cols, def)
			if c.Select {
				sel = append(sel, ident(c.Name))
			}
			if c.Insert {
				ins = append(ins, ident(c.Name))
			}
			if c.Update {
				upd = append(upd, ident(c.Name))
			}
		}
		w("CREATE TABLE %s (%s)", name, strings.Join(cols, ", "))
		for _, k := range t.Keys {
			kc := make([]string, len(k.Columns))
			for i, c := range k.Columns {
				kc[i] = ident(c)
			}
			switch k.Kind {
			case KindPrimaryKey:
				w("ALTER TABLE %s ADD CONSTRAINT %s PRIMARY KEY (%s)", name, ident(k.Name), strings.Join(kc, ", "))
			case KindUnique:
				w("ALTER TABLE %s ADD CONSTRAINT %s UNIQUE (%s)", name, ident(k.Name), strings.Join(kc, ", "))
			case KindUniqueIndex:
				w("CREATE UNIQUE INDEX %s ON %s (%s)", ident(k.Name), name, strings.Join(kc, ", "))
			}
		}
		for priv, list := range map[string][]string{"SELECT": sel, "INSERT": ins, "UPDATE": upd} {
			if len(list) > 0 {
				w("GRANT %s (%s) ON %s TO %s", priv, strings.Join(list, ", "), name, role)
			}
		}
		if t.Delete {
			w("GRANT DELETE ON %s TO %s", name, role)
		}
	}
	if _, err := conn.Exec(ctx, b.String(), pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	// The agent sees its target's database alone in pg_database.
	for _, stmt := range []string{"ALTER DATABASE template1 IS_TEMPLATE false", "DROP DATABASE template1"} {
		// DROP DATABASE runs alone, outside a transaction block.
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("fill: %s: %w", stmt, err)
		}
	}
	return nil
}

// execIn runs stmt as the superuser in database.
func execIn(ctx context.Context, srv *pgtmp.Server, database, stmt string) error {
	conn, err := pgx.Connect(ctx, srv.DSN(database))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("fill: %s: %w", stmt, err)
	}
	return nil
}

// builtinType is typ when it names a type PostgreSQL has built in, else
// text: the type of a column the wire front describes as text (an enum,
// a domain, a composite, an extension's type), whose OID would differ
// between targets. to_regtype parses typ as a type name and nothing else
// (PostgreSQL's parseTypeString), so typ is safe in DDL once it passes.
func builtinType(ctx context.Context, conn *pgx.Conn, typ string) string {
	var oid uint32
	err := conn.QueryRow(ctx, "SELECT COALESCE(pg_catalog.to_regtype($1)::oid, 0)", typ).Scan(&oid)
	if err != nil || oid == 0 || oid >= firstNormalOID {
		return "text"
	}
	return typ
}

// revokeBlocked is a DO block that revokes from PUBLIC the execution of
// every built-in function Check blocks, so that the role cannot call one
// even were Check bypassed (lo_create, for one, runs in a READ ONLY
// transaction).
func revokeBlocked() string {
	var pats []string
	for _, p := range blockedPrefixes {
		pats = append(pats, "'"+strings.ReplaceAll(p, "_", `\_`)+"%'")
	}
	for n := range blockedNames {
		pats = append(pats, "'"+strings.ReplaceAll(n, "_", `\_`)+"'")
	}
	slices.Sort(pats)
	return `DO $$ DECLARE f regprocedure; BEGIN
FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p WHERE p.proname LIKE ANY (ARRAY[` + strings.Join(pats, ", ") + `]) LOOP
EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
END LOOP; END $$`
}
