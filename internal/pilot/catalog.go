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
       GREATEST(c.reltuples, -1)::bigint
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
ORDER BY n.nspname, c.relname, a.attnum`

// cascadeQuery lists, per table, the foreign keys referencing it or a
// table under it (inheritance children and partitions, which a write of
// the table reaches) whose action changes rows of another table: CASCADE,
// SET NULL or SET DEFAULT, on delete, and on update with the referenced
// columns; and whether such an ON DELETE action is declared on a
// partition under it (not cloned from one on the table: a row a
// cross-partition UPDATE moves is deleted from its partition).
const cascadeQuery = `
WITH RECURSIVE under (top, rel) AS (
    SELECT c.oid, c.oid FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'p')
  UNION
    SELECT u.top, i.inhrelid FROM under u JOIN pg_catalog.pg_inherits i ON i.inhparent = u.rel
)
SELECT n.nspname, c.relname,
       bool_or(k.confdeltype IN ('c', 'n', 'd')),
       coalesce(array_agg(DISTINCT a.attname::text) FILTER (WHERE k.confupdtype IN ('c', 'n', 'd') AND a.attname IS NOT NULL), '{}'),
       bool_or(u.rel <> u.top AND r.relispartition AND k.conparentid = 0 AND k.confdeltype IN ('c', 'n', 'd'))
FROM under u
JOIN pg_catalog.pg_constraint k ON k.contype = 'f' AND k.confrelid = u.rel
JOIN pg_catalog.pg_class c ON c.oid = u.top
JOIN pg_catalog.pg_class r ON r.oid = u.rel
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = ANY (k.confkey)
WHERE k.confdeltype IN ('c', 'n', 'd') OR k.confupdtype IN ('c', 'n', 'd')
GROUP BY n.nspname, c.relname`

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
		if err := rows.Scan(&schema, &rel, &col, &typ, &est); err != nil {
			return nil, fmt.Errorf("pilot: load catalog: %w", err)
		}
		name := sqlcheck.TableName{Schema: schema, Name: rel}
		i, ok := idx[name]
		if !ok {
			i = len(tables)
			idx[name] = i
			tables = append(tables, sqlcheck.Table{Name: name, EstimatedRows: est})
		}
		tables[i].Columns = append(tables[i].Columns, sqlcheck.Column{Name: col, Type: typ})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pilot: load catalog: %w", err)
	}
	rows.Close()
	// The guards refer a write whose foreign keys' actions reach rows of
	// other tables, which no rule fences or counts (BuildGuards).
	rows, err = q.Query(ctx, cascadeQuery)
	if err != nil {
		return nil, fmt.Errorf("pilot: load catalog: foreign keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema, rel string
		var del, move bool
		var upd []string
		if err := rows.Scan(&schema, &rel, &del, &upd, &move); err != nil {
			return nil, fmt.Errorf("pilot: load catalog: foreign keys: %w", err)
		}
		if i, ok := idx[sqlcheck.TableName{Schema: schema, Name: rel}]; ok {
			tables[i].DeleteCascades, tables[i].UpdateCascades, tables[i].MoveCascades = del, upd, move
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pilot: load catalog: foreign keys: %w", err)
	}
	return sqlcheck.NewCatalog(tables, searchPath)
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
