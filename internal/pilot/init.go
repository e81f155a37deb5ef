package pilot

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// InitSQL creates Harbormaster's schema in a target: the receipts table
// (whose primary key makes each marque single-use, across any number of
// Pilots; a void receipt burns a marque that never ran, for
// reconciliation) and the guard functions: fence_violation; row_cap,
// which a write's RETURNING calls on every row it writes and which raises
// at the (max_rows+1)-th (rowcap.go); and max_rows, which a folded write's
// receipt calls with its exact row count. The planner cannot fold a
// volatile function call away, so a guard arm that is never taken never
// raises.
// The Pilot creates its fence views in the same schema as statements need
// them (views.go); harbormaster.drop_fence_views() drops them all, for a
// migration that alters a fenced table (a view depends on its table's
// columns), and the Pilot recreates them on next use. It is idempotent.
const InitSQL = `
CREATE SCHEMA IF NOT EXISTS harbormaster;
REVOKE ALL ON SCHEMA harbormaster FROM PUBLIC;
GRANT USAGE ON SCHEMA harbormaster TO PUBLIC;
CREATE TABLE IF NOT EXISTS harbormaster.receipts (
    marque_id        text PRIMARY KEY,
    request_id       text NOT NULL,
    principal        text NOT NULL,
    target           text NOT NULL,
    statement_sha256 text NOT NULL,
    path             text NOT NULL,
    rows_affected    bigint,
    txid             xid8 NOT NULL DEFAULT pg_current_xact_id(),
    executed_at      timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE harbormaster.receipts ADD COLUMN IF NOT EXISTS void boolean NOT NULL DEFAULT false;
REVOKE ALL ON harbormaster.receipts FROM PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.max_rows(n bigint, cap bigint) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN
        IF n > cap THEN
            RAISE EXCEPTION 'harbormaster guard: max_rows violated' USING ERRCODE = 'HM002',
                DETAIL = format('it would affect %s rows; max_rows is %s', n, cap);
        END IF;
        RETURN n;
    END $$;
REVOKE ALL ON FUNCTION harbormaster.max_rows(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION harbormaster.max_rows(bigint, bigint) TO PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.row_cap_start() RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config('harbormaster.row_count', '0', true)::bigint $$;
REVOKE ALL ON FUNCTION harbormaster.row_cap_start() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION harbormaster.row_cap_start() TO PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.row_cap_exceeded(cap bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN
        RAISE EXCEPTION 'harbormaster guard: max_rows violated' USING ERRCODE = 'HM002',
            DETAIL = format('it affects more than %s rows; max_rows is %s', cap, cap);
    END $$;
REVOKE ALL ON FUNCTION harbormaster.row_cap_exceeded(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION harbormaster.row_cap_exceeded(bigint) TO PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.row_cap(cap bigint, start bigint) RETURNS boolean
    LANGUAGE sql VOLATILE
    AS $$ SELECT CASE WHEN pg_catalog.set_config('harbormaster.row_count',
            (start + pg_catalog.current_setting('harbormaster.row_count')::bigint + 1)::text, true)::bigint > cap
        THEN harbormaster.row_cap_exceeded(cap) ELSE true END $$;
REVOKE ALL ON FUNCTION harbormaster.row_cap(bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION harbormaster.row_cap(bigint, bigint) TO PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.fence_violation(reason text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RAISE EXCEPTION 'harbormaster guard: % violated', reason USING ERRCODE = 'HM001'; END $$;
REVOKE ALL ON FUNCTION harbormaster.fence_violation(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION harbormaster.fence_violation(text) TO PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.drop_fence_views() RETURNS integer
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE v record; n integer := 0;
BEGIN
    FOR v IN SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
             WHERE s.nspname = 'harbormaster' AND c.relkind = 'v' AND c.relname LIKE 'fence\_%' LOOP
        EXECUTE format('DROP VIEW harbormaster.%I', v.relname);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;
REVOKE ALL ON FUNCTION harbormaster.drop_fence_views() FROM PUBLIC;
CREATE TABLE IF NOT EXISTS harbormaster.catalog_generation (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n   bigint NOT NULL
);
-- It starts at the microsecond it was created, so a counter dropped and
-- created again never reads a value a Pilot learned of the old one.
INSERT INTO harbormaster.catalog_generation (n)
    VALUES ((extract(epoch FROM clock_timestamp()) * 1000000)::bigint) ON CONFLICT DO NOTHING;
REVOKE ALL ON harbormaster.catalog_generation FROM PUBLIC;
GRANT SELECT ON harbormaster.catalog_generation TO PUBLIC;
CREATE OR REPLACE FUNCTION harbormaster.bump_catalog_generation() RETURNS event_trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog
    AS $$ BEGIN
        -- Without the counter no write leaves its question out (the folded
        -- write reads the counter), so DDL goes on. Temporary objects and
        -- views (a fence view, say) cannot carry a key action, a trigger a
        -- key answers, or a table under another, nor can privileges,
        -- comments or labels: they leave it. Each move goes to at least
        -- the microsecond, so a counter a restore, a failover or a
        -- replica carried back never reads a value again.
        IF pg_catalog.to_regclass('harbormaster.catalog_generation') IS NOT NULL
           AND EXISTS (SELECT FROM pg_catalog.pg_event_trigger_ddl_commands() c
                       WHERE (c.schema_name IS NULL OR c.schema_name NOT LIKE 'pg\_temp%')
                         AND c.object_type <> 'view'
                         AND c.command_tag NOT IN ('GRANT', 'REVOKE', 'COMMENT', 'SECURITY LABEL')) THEN
            UPDATE harbormaster.catalog_generation
                SET n = greatest(n + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
        END IF;
    END $$;
REVOKE ALL ON FUNCTION harbormaster.bump_catalog_generation() FROM PUBLIC;
`

// ErrNotSuperuser: arming the catalog generation needs a superuser.
var ErrNotSuperuser = errors.New("creating the catalog generation's event trigger needs a superuser (or a superuser runs GenerationTriggerSQL; docs/operations.md)")

// GenerationTriggerSQL arms the catalog generation (cascade.go): an event
// trigger, which only a superuser may create, and which every DDL
// transaction in the database then runs (docs/operations.md says what that
// costs an operator). InitTargetArmed runs it when asked and its role may;
// otherwise a superuser can run it once. Until then every governed UPDATE
// and DELETE asks the catalog for foreign key actions as it runs. It is
// idempotent.
const GenerationTriggerSQL = `
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger WHERE evtname = 'harbormaster_catalog_generation') THEN
        CREATE EVENT TRIGGER harbormaster_catalog_generation ON ddl_command_end
            EXECUTE FUNCTION harbormaster.bump_catalog_generation();
    END IF;
    ALTER EVENT TRIGGER harbormaster_catalog_generation ENABLE ALWAYS;
END $$;
`

// InitTarget runs InitSQL against dsn.
func InitTarget(ctx context.Context, dsn string) error {
	_, err := InitTargetArmed(ctx, dsn, false)
	return err
}

// InitTargetArmed is InitTarget, and with arm also GenerationTriggerSQL,
// which needs a superuser (ErrNotSuperuser otherwise). armed reports
// whether the catalog generation is armed when it is done: its event
// trigger in place, ALWAYS enabled, calling the counter's function (what
// a folded write checks).
func InitTargetArmed(ctx context.Context, dsn string, arm bool) (armed bool, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, fmt.Errorf("pilot: target init: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Our own fixed DDL: the simple protocol runs it as one batch.
	if arm {
		// Before anything is created: asked to arm, it arms or changes
		// nothing.
		var superuser bool
		if err := conn.QueryRow(ctx, `SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user`).Scan(&superuser); err != nil {
			return false, fmt.Errorf("pilot: target init: %w", err)
		}
		if !superuser {
			return false, fmt.Errorf("pilot: target init: %w", ErrNotSuperuser)
		}
	}
	if _, err := conn.Exec(ctx, InitSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, fmt.Errorf("pilot: target init: %w", err)
	}
	if arm {
		if _, err := conn.Exec(ctx, GenerationTriggerSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			return false, fmt.Errorf("pilot: target init: the catalog generation's event trigger: %w", err)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT "+generationNow+" IS NOT NULL").Scan(&armed); err != nil {
		return false, fmt.Errorf("pilot: target init: %w", err)
	}
	return armed, nil
}
