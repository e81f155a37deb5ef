package cover

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// DefaultSampleRows is how many rows SampleRows reads per table.
const DefaultSampleRows = 50

// SampleRows reads up to limit rows of t in a read-only transaction that
// is rolled back, every column as text, typed by the catalog. It is for
// the gates only: the rows go into a report a human reads, never to an
// agent.
func SampleRows(ctx context.Context, conn *pgx.Conn, t *sqlcheck.Table, limit int) ([]Row, error) {
	if limit <= 0 {
		limit = DefaultSampleRows
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("cover: sample %s: %w", t.Name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read-only, nothing to keep
	cols := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = sqlcheck.QuoteIdent(c.Name) + "::text"
	}
	// ORDER BY nothing: any rows will do, and a sequential read of the
	// first pages is the cheapest; the timeout bounds a huge table.
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '5s'"); err != nil {
		return nil, fmt.Errorf("cover: sample %s: %w", t.Name, err)
	}
	rows, err := tx.Query(ctx, fmt.Sprintf("SELECT %s FROM %s LIMIT %d", strings.Join(cols, ", "), t.Name, limit))
	if err != nil {
		return nil, fmt.Errorf("cover: sample %s: %w", t.Name, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		vals := make([]*string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("cover: sample %s: %w", t.Name, err)
		}
		r := Row{}
		for i, c := range t.Columns {
			if vals[i] == nil {
				r[c.Name] = nil
				continue
			}
			v, err := ParseValue(*vals[i], kindOf(c.Type))
			if err != nil {
				v = *vals[i] // a type the evaluator reads as text
			}
			r[c.Name] = v
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cover: sample %s: %w", t.Name, err)
	}
	return out, nil
}

const sideEffectsQuery = `
SELECT n.nspname, c.relname, 'trigger', t.tgname,
       pg_catalog.pg_get_triggerdef(t.oid)
FROM pg_catalog.pg_trigger t
JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE NOT t.tgisinternal
UNION ALL
SELECT n.nspname, c.relname, 'rule', r.rulename, pg_catalog.pg_get_ruledef(r.oid)
FROM pg_catalog.pg_rewrite r
JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE r.rulename <> '_RETURN'
UNION ALL
SELECT pn.nspname, p.relname, 'cascade', k.conname,
       'deleting or updating a row of ' || quote_ident(pn.nspname) || '.' || quote_ident(p.relname) ||
       ' changes rows of ' || quote_ident(n.nspname) || '.' || quote_ident(c.relname) || ': ' ||
       pg_catalog.pg_get_constraintdef(k.oid)
FROM pg_catalog.pg_constraint k
JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_class p ON p.oid = k.confrelid
JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
WHERE k.contype = 'f' AND (k.confdeltype IN ('c', 'n', 'd') OR k.confupdtype IN ('c', 'n', 'd'))
ORDER BY 1, 2, 3, 4`

// SideEffects lists the triggers, rewrite rules and foreign-key cascades
// (ON DELETE/UPDATE CASCADE, SET NULL, SET DEFAULT) on the given tables: a
// cascade is listed on the referenced table, where a write starts it.
func SideEffects(ctx context.Context, conn *pgx.Conn, tables []sqlcheck.TableName) ([]bound.SideEffect, error) {
	in := map[sqlcheck.TableName]bool{}
	for _, t := range tables {
		in[t] = true
	}
	rows, err := conn.Query(ctx, sideEffectsQuery)
	if err != nil {
		return nil, fmt.Errorf("cover: side effects: %w", err)
	}
	defer rows.Close()
	out := []bound.SideEffect{}
	for rows.Next() {
		var schema, rel, kind, name, detail string
		if err := rows.Scan(&schema, &rel, &kind, &name, &detail); err != nil {
			return nil, fmt.Errorf("cover: side effects: %w", err)
		}
		tn := sqlcheck.TableName{Schema: schema, Name: rel}
		if in[tn] {
			out = append(out, bound.SideEffect{Table: tn.String(), Kind: kind, Name: name, Detail: detail})
		}
	}
	return out, rows.Err()
}
