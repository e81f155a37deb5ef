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
