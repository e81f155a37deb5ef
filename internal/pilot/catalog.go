package pilot

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// catalogQuery lists ordinary and partitioned tables with their columns.
// Views, materialized views and foreign tables are left out on purpose: a
// statement naming one refers as an unknown relation (docs/security.md).
// The reserved schemas are listed so that reaching them is reported as
// reserved rather than unknown.
const catalogQuery = `
SELECT n.nspname, c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
       GREATEST(c.reltuples, -1)::bigint, a.attnotnull
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
ORDER BY n.nspname, c.relname, a.attnum`

// constraintQuery lists the constraints and triggers of the same tables
// (sqlcheck.Constraint), by column name. Unique, primary key and
// exclusion constraints are read from their indexes, with unique indexes
// that back no constraint: the index's key columns, and the columns its
// expressions and predicate read (pg_depend), INCLUDE columns left out.
// A foreign key's copies for the partitions of the table it references
// are left out (their conparentid is a constraint of the same table): the
// key is listed once, referencing the partitioned table. Disabled and
// internal triggers (those behind foreign keys) are left out, and those
// that fire only on TRUNCATE.
const constraintQuery = `
SELECT n.nspname, c.relname, x.kind, x.name, x.cols, x.ref_schema, x.ref_table, x.ref_cols, x.on_delete, x.on_update, x.events, x.not_valid, x.def
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL (
  SELECT 'check' AS kind, k.conname AS name,
         ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = ANY (k.conkey) ORDER BY a.attnum)::text[] AS cols,
         NULL::text AS ref_schema, NULL::text AS ref_table, NULL::text[] AS ref_cols,
         NULL::text AS on_delete, NULL::text AS on_update, NULL::text[] AS events,
         NOT k.convalidated AS not_valid, pg_catalog.pg_get_constraintdef(k.oid) AS def
  FROM pg_catalog.pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'c'
  UNION ALL
  SELECT CASE WHEN i.indisprimary THEN 'primary key' WHEN i.indisexclusion THEN 'exclusion' ELSE 'unique' END,
         COALESCE(k.conname, ic.relname),
         ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND (
                 a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])
                 OR NOT a.attnum = ANY ((i.indkey::int2[])[i.indnkeyatts:]) AND EXISTS (
                   SELECT 1 FROM pg_catalog.pg_depend d
                   WHERE d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = i.indexrelid
                     AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = c.oid AND d.refobjsubid = a.attnum))
               ORDER BY a.attnum)::text[],
         NULL, NULL, NULL, NULL, NULL, NULL, false,
         COALESCE(pg_catalog.pg_get_constraintdef(k.oid), pg_catalog.pg_get_indexdef(i.indexrelid))
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
  LEFT JOIN pg_catalog.pg_constraint k ON k.conindid = i.indexrelid AND k.conrelid = c.oid AND k.contype IN ('p', 'u', 'x')
  WHERE i.indrelid = c.oid AND (i.indisunique OR i.indisexclusion)
  UNION ALL
  SELECT 'foreign key', k.conname,
         ARRAY(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY u(n, o) JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = u.n ORDER BY u.o)::text[],
         rn.nspname, r.relname,
         ARRAY(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY u(n, o) JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum = u.n ORDER BY u.o)::text[],
         k.confdeltype::text, k.confupdtype::text, NULL, false, pg_catalog.pg_get_constraintdef(k.oid)
  FROM pg_catalog.pg_constraint k
  JOIN pg_catalog.pg_class r ON r.oid = k.confrelid
  JOIN pg_catalog.pg_namespace rn ON rn.oid = r.relnamespace
  WHERE k.conrelid = c.oid AND k.contype = 'f'
    AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint p WHERE p.oid = k.conparentid AND p.conrelid = k.conrelid)
  UNION ALL
  SELECT 'trigger', t.tgname,
         ARRAY(SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = ANY (t.tgattr::int2[]) ORDER BY a.attnum)::text[],
         NULL, NULL, NULL, NULL, NULL,
         array_remove(ARRAY[CASE WHEN t.tgtype & 4 <> 0 THEN 'insert' END, CASE WHEN t.tgtype & 16 <> 0 THEN 'update' END,
                            CASE WHEN t.tgtype & 8 <> 0 THEN 'delete' END], NULL),
         false, pg_catalog.pg_get_triggerdef(t.oid)
  FROM pg_catalog.pg_trigger t
  WHERE t.tgrelid = c.oid AND NOT t.tgisinternal AND t.tgenabled <> 'D' AND t.tgtype & (4 | 8 | 16) <> 0
) x
WHERE c.relkind IN ('r', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
ORDER BY n.nspname, c.relname, x.kind, x.name`

// Querier is the part of pgx a catalog read needs (a conn, pool or tx).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LoadCatalog reads the target's tables and columns for the static check.
func LoadCatalog(ctx context.Context, q Querier, searchPath []string) (*sqlcheck.Catalog, error) {
	rows, err := q.Query(ctx, catalogQuery)
	if err != nil {
		return nil, fmt.Errorf("pilot: load catalog: %w", err)
	}
	defer rows.Close()
	var tables []sqlcheck.Table
	idx := map[sqlcheck.TableName]int{}
	for rows.Next() {
		var schema, rel, col, typ string
		var est int64
		var notNull bool
		if err := rows.Scan(&schema, &rel, &col, &typ, &est, &notNull); err != nil {
			return nil, fmt.Errorf("pilot: load catalog: %w", err)
		}
		name := sqlcheck.TableName{Schema: schema, Name: rel}
		i, ok := idx[name]
		if !ok {
			i = len(tables)
			idx[name] = i
			tables = append(tables, sqlcheck.Table{Name: name, EstimatedRows: est})
		}
		tables[i].Columns = append(tables[i].Columns, sqlcheck.Column{Name: col, Type: typ, NotNull: notNull})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pilot: load catalog: %w", err)
	}
	if err := loadConstraints(ctx, q, tables, idx); err != nil {
		return nil, err
	}
	return sqlcheck.NewCatalog(tables, searchPath)
}

// loadConstraints reads constraintQuery onto tables.
func loadConstraints(ctx context.Context, q Querier, tables []sqlcheck.Table, idx map[sqlcheck.TableName]int) error {
	rows, err := q.Query(ctx, constraintQuery)
	if err != nil {
		return fmt.Errorf("pilot: load catalog: constraints: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema, rel, kind, name, def string
		var refSchema, refTable, onDelete, onUpdate *string
		var cols, refCols, events []string
		var notValid bool
		if err := rows.Scan(&schema, &rel, &kind, &name, &cols, &refSchema, &refTable, &refCols, &onDelete, &onUpdate, &events, &notValid, &def); err != nil {
			return fmt.Errorf("pilot: load catalog: constraints: %w", err)
		}
		i, ok := idx[sqlcheck.TableName{Schema: schema, Name: rel}]
		if !ok {
			continue // a table without columns
		}
		k := sqlcheck.Constraint{Kind: sqlcheck.ConstraintKind(kind), Name: name, Columns: cols, RefColumns: refCols,
			Events: events, NotValid: notValid, Def: def}
		if k.Columns == nil {
			k.Columns = []string{}
		}
		if refSchema != nil && refTable != nil {
			k.RefTable = &sqlcheck.TableName{Schema: *refSchema, Name: *refTable}
		}
		if onDelete != nil && onUpdate != nil {
			k.OnDelete, k.OnUpdate = sqlcheck.FKAction(*onDelete), sqlcheck.FKAction(*onUpdate)
		}
		tables[i].Constraints = append(tables[i].Constraints, k)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pilot: load catalog: constraints: %w", err)
	}
	return nil
}

// LoadCatalogDSN connects to dsn, reads the catalog and disconnects.
func LoadCatalogDSN(ctx context.Context, dsn string, searchPath []string) (*sqlcheck.Catalog, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pilot: load catalog: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return LoadCatalog(ctx, conn, searchPath)
}
