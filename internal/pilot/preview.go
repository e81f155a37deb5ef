package pilot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// The preview (DESIGN.md section 3 and invariant 10).
//
// A referred statement is outside every signed bound, so nothing of it may
// run before a human asks: not on referral, not in a transaction that
// rolls back (its row locks, sequence draws, memory and time are all
// observable by the agent that sent it). When a human asks (the console's
// request page, `queue show`, the humans' API), the Pilot computes its
// preview instead: one SELECT, built from the checked tree, of the rows
// the statement would reach and the values it would write, in a READ ONLY
// REPEATABLE READ transaction with a short statement timeout. A SELECT
// takes no row locks, draws no sequence value and fires no trigger; the
// transaction could not write if the text tried. Values the statement
// computes when it runs (now(), gen_random_uuid(), a column's DEFAULT,
// whose nextval would draw from a sequence) are shown as written, never
// evaluated; the triggers, foreign key actions and rules the statement
// would set off are listed from the catalog, never run.
//
// The preview's Digest is what an approval signs. The Pilot executes an
// approved statement in one snapshot: it computes the same preview again
// inside the statement's own transaction, runs the statement only if the
// digest is the one the approver signed, and commits only if the
// statement reached as many rows and wrote exactly the values the preview
// showed (ExecuteApproved). Any difference rolls back and the request
// goes back to the queue for a fresh preview.

// MaxPreviewRows is how many rows a preview counts and digests. A
// statement that reaches more cannot be approved from its preview: deny
// it, or run it by hand.
const MaxPreviewRows = 100000

// DefaultPreviewTimeout bounds a preview's query (Config.PreviewTimeout).
const DefaultPreviewTimeout = 3 * time.Second

// ErrNotPreviewable is returned for a statement the Pilot cannot preview,
// with the reason: it did not pass the static check's structural rules
// (another statement kind, a function off the allow-list, ...), the
// target refused the preview's query, or the preview cannot compute what
// it would write (an assignment to part of a column).
var ErrNotPreviewable = errors.New("statement cannot be previewed")

// Preview is what a referred statement would do, read without running it.
// It is evidence for the humans who decide, never for the agent: its row
// images hold columns no rule lists. Values are untrusted data.
type Preview struct {
	Kind string `json:"kind"`
	// Table is the table a write would change.
	Table string `json:"table,omitempty"`
	// Rows is how many rows the statement would reach (UPDATE, DELETE),
	// add (INSERT) or return (SELECT), counted up to MaxPreviewRows.
	Rows int64 `json:"rows"`
	// TooMany says it reaches more than MaxPreviewRows: this preview does
	// not bind them all, and cannot be approved.
	TooMany bool `json:"too_many"`
	// Before holds whole rows: those an UPDATE or DELETE would reach, or
	// those a SELECT would return (the first Config.MaxImageRows).
	Before []map[string]any `json:"before"`
	// After holds, for an UPDATE, the values its SET would write in each
	// row reached (paired with Before by position), and for an INSERT the
	// rows it would add: the columns whose values are known before it
	// runs.
	After []map[string]any `json:"after"`
	// AsWritten holds, per After row, the columns whose values are
	// computed only when the statement runs, as the statement wrote them
	// (now(), gen_random_uuid(), DEFAULT): shown, never evaluated.
	AsWritten       []map[string]string `json:"as_written"`
	ImagesTruncated bool                `json:"images_truncated"`
	// Defaults are, for a write, the columns the table fills itself (a
	// DEFAULT the statement leaves to it, an identity, a generated
	// column), with their expressions from the catalog, never evaluated.
	Defaults map[string]string `json:"defaults,omitempty"`
	// Fires lists the triggers, foreign keys and rules the statement would
	// set off, from the catalog. The preview runs none of them.
	Fires []string `json:"fires"`
	// Returns is the RETURNING list, whose rows the agent would receive.
	Returns string `json:"returns,omitempty"`
	// Limits says, in plain language, what this preview cannot show.
	Limits []string `json:"limits"`
	// PreviewSQL is the read-only query that computed it.
	PreviewSQL string `json:"preview_sql"`
	// Digest binds an approval to this preview: the kind, the table, the
	// count, every row reached with the values written to it, the
	// defaults and what fires. Computed again at execution.
	Digest string `json:"digest"`
	// Taken is when it was computed.
	Taken time.Time `json:"taken"`

	// written is the multiset digest of what an approved execution's
	// images must be: the values known before it runs of every row an
	// UPDATE or INSERT writes, the whole rows a DELETE removes.
	written string
}

// Limits every preview has.
var previewLimits = []string{
	"A preview reads; it did not run the statement. It shows the rows as they were when it was taken: if they change before the statement runs, the approval goes back to the queue.",
	"Triggers, foreign key actions and rules are listed, not run: what they would change is not shown.",
	"Values computed when the statement runs (now(), gen_random_uuid(), DEFAULT) are shown as written, not evaluated.",
}

// previewPlan is a statement's preview query and what execution compares.
type previewPlan struct {
	kind  sqlcheck.Op
	table *sqlcheck.TableName
	// sql selects, per row reached, b (the whole row before), a (the
	// values known before it runs, for UPDATE and INSERT) and x (the
	// values shown as written), each jsonb or NULL.
	sql string
	// compared are the written columns whose values a holds: what the
	// approved execution compares with the rows it writes.
	compared []string
	// supplied are the columns an INSERT or UPDATE sets (defaults: the
	// rest, for an INSERT), and defaulted those it sets to DEFAULT (in
	// some row, for an INSERT).
	supplied  []string
	defaulted map[string]bool
	returns   string
	limits    []string
}

// Preview computes a referred statement's preview (see above). It needs no
// delegation and no marque: it is evidence, never authority, and it is
// computed only when a human asks for it. It returns the preview and its
// JSON.
func (p *Pilot) Preview(ctx context.Context, sql string) (*Preview, []byte, error) {
	a, err := p.analyzeRaw(sql)
	if err != nil {
		return nil, nil, err
	}
	plan, err := buildPreview(a, p.Catalog())
	if err != nil {
		return nil, nil, err
	}
	t, err := p.beginAt(ctx, false, true)
	if err != nil {
		return nil, nil, fmt.Errorf("pilot: preview: %w", err)
	}
	defer t.Close() // read-only: nothing to commit
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('transaction_read_only', 'on', true), set_config('statement_timeout', $1, true)`,
		fmt.Sprintf("%dms", p.cfg.PreviewTimeout.Milliseconds()))
	if p.cfg.Role != "" {
		b.Queue(`SELECT set_config('role', $1, true)`, p.cfg.Role)
	}
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, fmt.Errorf("pilot: preview: %w", err)
	}
	pv, err := plan.run(ctx, t.conn, p.cfg.MaxImageRows)
	if err != nil {
		return nil, nil, err
	}
	pv.Taken = p.cfg.Clock().UTC()
	js, err := json.Marshal(pv)
	if err != nil {
		return nil, nil, err
	}
	return pv, js, nil
}

// run computes the preview in tx, an open transaction: the rows, their
// digest, the defaults and what fires. images caps the rows kept for
// display; every row is counted and digested.
func (pp *previewPlan) run(ctx context.Context, tx querier, images int) (*Preview, error) {
	pv := &Preview{Kind: string(pp.kind), Before: []map[string]any{}, After: []map[string]any{},
		AsWritten: []map[string]string{}, Fires: []string{}, Returns: pp.returns, PreviewSQL: pp.sql,
		Limits: append(append([]string{}, previewLimits...), pp.limits...)}
	if pp.table != nil {
		pv.Table = pp.table.String()
	}
	rows, err := tx.Query(ctx, pp.sql)
	if err != nil {
		return nil, fmt.Errorf("%w: the target refused its preview: %v", ErrNotPreviewable, err)
	}
	var hashes [][32]byte
	var written []map[string]any
	for rows.Next() {
		if pv.Rows >= MaxPreviewRows {
			pv.TooMany = true
			break
		}
		pv.Rows++
		var b, a map[string]any
		var x map[string]string
		if err := rows.Scan(&b, &a, &x); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%w: %v", ErrNotPreviewable, err)
		}
		hashes = append(hashes, rowHash(b, a, x))
		switch pp.kind {
		case sqlcheck.OpUpdate, sqlcheck.OpInsert:
			written = append(written, a)
		case sqlcheck.OpDelete:
			written = append(written, b)
		}
		if int(pv.Rows) > images {
			pv.ImagesTruncated = true
			continue
		}
		if b != nil {
			pv.Before = append(pv.Before, b)
		}
		if pp.kind == sqlcheck.OpUpdate || pp.kind == sqlcheck.OpInsert {
			if a == nil {
				a = map[string]any{}
			}
			if x == nil {
				x = map[string]string{}
			}
			pv.After = append(pv.After, a)
			pv.AsWritten = append(pv.AsWritten, x)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: the target refused its preview: %v", ErrNotPreviewable, err)
	}
	if pp.table != nil {
		if pv.Defaults, err = pp.defaults(ctx, tx); err != nil {
			return nil, err
		}
		if pv.Fires, err = pp.fires(ctx, tx); err != nil {
			return nil, err
		}
		for _, f := range pv.Fires {
			if strings.HasPrefix(f, "trigger ") {
				pv.Limits = append(pv.Limits, "A trigger listed here runs when the statement runs: if it changes a value the statement writes, the approved run differs from this preview, is rolled back, and the request comes back to the queue. Such a statement cannot be approved from its preview: deny it, or run it by hand.")
				break
			}
		}
	}
	pv.Digest = previewDigest(pv, hashes)
	pv.written = multisetDigest(written)
	return pv, nil
}

// rowHash is one row's contribution to the digest: its before image, the
// values written and those shown as written, as JSON (keys sorted).
func rowHash(b, a map[string]any, x map[string]string) [32]byte {
	js, _ := json.Marshal([]any{b, a, x})
	return sha256.Sum256(js)
}

// previewDigest is the digest an approval signs. Rows are a multiset: the
// order a query returns them in is not part of it.
func previewDigest(pv *Preview, hashes [][32]byte) string {
	sort.Slice(hashes, func(i, j int) bool { return string(hashes[i][:]) < string(hashes[j][:]) })
	h := sha256.New()
	for _, r := range hashes {
		h.Write(r[:])
	}
	js, _ := json.Marshal(map[string]any{"kind": pv.Kind, "table": pv.Table, "rows": pv.Rows, "too_many": pv.TooMany,
		"rows_sha256": hex.EncodeToString(h.Sum(nil)), "defaults": pv.Defaults, "fires": pv.Fires})
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:])
}

// multisetDigest is the digest of images regardless of their order: what
// an approved write's RETURNING images are compared with.
func multisetDigest(images []map[string]any) string {
	rows := make([]string, len(images))
	for i, img := range images {
		b, _ := json.Marshal(img)
		rows[i] = string(b)
	}
	sort.Strings(rows)
	js, _ := json.Marshal(rows)
	return Digest(js)
}

// defaultsQuery lists a table's columns that it fills itself.
const defaultsQuery = `SELECT a.attname::text, CASE
    WHEN a.attgenerated = 's' THEN 'generated always as ' || pg_catalog.pg_get_expr(d.adbin, d.adrelid)
    WHEN a.attidentity = 'a' THEN 'identity (generated always)'
    WHEN a.attidentity = 'd' THEN 'identity (generated by default)'
    ELSE 'default ' || pg_catalog.pg_get_expr(d.adbin, d.adrelid) END
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
  AND (d.adbin IS NOT NULL OR a.attidentity <> '')`

// defaults are the columns the table fills itself: for an INSERT those it
// does not supply (or supplies as DEFAULT), for an UPDATE its generated
// columns and those it sets to DEFAULT.
func (pp *previewPlan) defaults(ctx context.Context, tx querier) (map[string]string, error) {
	rows, err := tx.Query(ctx, defaultsQuery, pp.table.String())
	if err != nil {
		return nil, fmt.Errorf("%w: the catalog: %v", ErrNotPreviewable, err)
	}
	defer rows.Close()
	out := map[string]string{}
	supplied := map[string]bool{}
	for _, c := range pp.supplied {
		supplied[c] = true
	}
	for rows.Next() {
		var col, expr string
		if err := rows.Scan(&col, &expr); err != nil {
			return nil, fmt.Errorf("%w: the catalog: %v", ErrNotPreviewable, err)
		}
		generated := strings.HasPrefix(expr, "generated")
		switch pp.kind {
		case sqlcheck.OpInsert:
			if !supplied[col] || pp.defaulted[col] {
				out[col] = expr
			}
		case sqlcheck.OpUpdate:
			if generated || pp.defaulted[col] {
				out[col] = expr
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: the catalog: %v", ErrNotPreviewable, err)
	}
	if pp.kind == sqlcheck.OpDelete {
		return nil, nil
	}
	return out, nil
}

// firesQuery lists what a write of a table sets off: its enabled triggers
// for the event ($2: pg_trigger's tgtype bit), the foreign keys that
// reference it (when $3: an UPDATE or DELETE), and its rules for the event
// ($4: pg_rewrite's ev_type), on the table and every partition under it.
const firesQuery = `WITH rel AS (SELECT $1::regclass AS relid UNION SELECT relid FROM pg_catalog.pg_partition_tree($1::regclass))
SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text || ': ' || pg_catalog.pg_get_triggerdef(t.oid)
FROM pg_catalog.pg_trigger t
WHERE t.tgrelid IN (SELECT relid FROM rel) AND NOT t.tgisinternal AND t.tgenabled <> 'D' AND (t.tgtype::int & $2::int) <> 0
UNION ALL
SELECT 'foreign key ' || c.conname || ' of ' || c.conrelid::regclass::text || ': ' || pg_catalog.pg_get_constraintdef(c.oid)
FROM pg_catalog.pg_constraint c
WHERE $3::bool AND c.contype = 'f' AND c.confrelid IN (SELECT relid FROM rel) AND c.conparentid = 0
UNION ALL
SELECT 'rule ' || r.rulename || ' on ' || r.ev_class::regclass::text || ': ' || pg_catalog.pg_get_ruledef(r.oid)
FROM pg_catalog.pg_rewrite r
WHERE r.ev_class IN (SELECT relid FROM rel) AND r.rulename <> '_RETURN' AND r.ev_type = $4::"char"
ORDER BY 1`

func (pp *previewPlan) fires(ctx context.Context, tx querier) ([]string, error) {
	var bit int
	var ev string
	switch pp.kind {
	case sqlcheck.OpInsert:
		bit, ev = 1<<2, "3"
	case sqlcheck.OpDelete:
		bit, ev = 1<<3, "4"
	case sqlcheck.OpUpdate:
		bit, ev = 1<<4, "2"
	default:
		return []string{}, nil
	}
	rows, err := tx.Query(ctx, firesQuery, pp.table.String(), bit, pp.kind != sqlcheck.OpInsert, ev)
	if err != nil {
		return nil, fmt.Errorf("%w: the catalog: %v", ErrNotPreviewable, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("%w: the catalog: %v", ErrNotPreviewable, err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// Names the preview query gives its own items.
const (
	previewSource = "harbormaster_source"
	previewBefore = "b"
	previewAfter  = "a"
	previewAsIs   = "x"
)

// buildPreview builds the preview query of an analyzed statement (which
// it does not change): see previewPlan.
func buildPreview(a *sqlcheck.Analysis, cat *sqlcheck.Catalog) (*previewPlan, error) {
	stmt := proto.Clone(a.Stmt()).(*pg.Node)
	pp := &previewPlan{kind: a.Facts.Kind, table: a.Facts.Target, defaulted: map[string]bool{}}
	sel := &pg.SelectStmt{Op: pg.SetOperation_SETOP_NONE}
	var b, av, x *pg.Node
	var err error
	switch s := stmt.GetNode().(type) {
	case *pg.Node_SelectStmt:
		b = toJSONB(previewSource, nil)
		sel.FromClause = []*pg.Node{subselect(stmt, previewSource, nil)}
	case *pg.Node_UpdateStmt:
		u := s.UpdateStmt
		alias := relAlias(u.Relation)
		tbl, ok := cat.Table(*a.Facts.Target)
		if !ok {
			return nil, fmt.Errorf("%w: table %s left the catalog", ErrNotPreviewable, a.Facts.Target)
		}
		var known, asIs []pair
		for _, t := range u.TargetList {
			rt := t.GetResTarget()
			if rt == nil || len(rt.Indirection) > 0 || rt.Val.GetMultiAssignRef() != nil {
				return nil, fmt.Errorf("%w: it cannot compute an assignment to part of a column or to several columns at once; ask for one assignment per column", ErrNotPreviewable)
			}
			pp.supplied = append(pp.supplied, rt.Name)
			if rt.Val.GetSetToDefault() != nil {
				pp.defaulted[rt.Name] = true
			}
			if runTimeValue(rt.Val) {
				asIs = append(asIs, pair{rt.Name, pg.MakeAConstStrNode(exprText(rt.Val), -1)})
				continue
			}
			v, err := castTo(rt.Val, tbl, rt.Name)
			if err != nil {
				return nil, err
			}
			known = append(known, pair{rt.Name, v})
			pp.compared = append(pp.compared, rt.Name)
		}
		b, av, x = toJSONB(alias, nil), object(known), object(asIs)
		sel.FromClause = append([]*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: u.Relation}}}, u.FromClause...)
		sel.WhereClause, sel.WithClause = u.WhereClause, u.WithClause
		if len(u.FromClause) > 0 {
			// A row joined to several FROM rows is updated once.
			sel.DistinctClause = oncePerRow(alias)
		}
		pp.returns = returningText(u.ReturningList)
	case *pg.Node_DeleteStmt:
		d := s.DeleteStmt
		alias := relAlias(d.Relation)
		b = toJSONB(alias, nil)
		sel.FromClause = append([]*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: d.Relation}}}, d.UsingClause...)
		sel.WhereClause, sel.WithClause = d.WhereClause, d.WithClause
		if len(d.UsingClause) > 0 {
			sel.DistinctClause = oncePerRow(alias)
		}
		pp.returns = returningText(d.ReturningList)
	case *pg.Node_InsertStmt:
		if av, x, err = pp.insert(s.InsertStmt, cat, sel); err != nil {
			return nil, err
		}
		pp.returns = returningText(s.InsertStmt.ReturningList)
	default:
		return nil, fmt.Errorf("%w: not a SELECT, INSERT, UPDATE or DELETE", ErrNotPreviewable)
	}
	null := func(n *pg.Node) *pg.Node {
		if n == nil {
			return &pg.Node{Node: &pg.Node_AConst{AConst: &pg.A_Const{Isnull: true, Location: -1}}}
		}
		return n
	}
	sel.TargetList = []*pg.Node{
		pg.MakeResTargetNodeWithNameAndVal(previewBefore, asJSONB(null(b)), -1),
		pg.MakeResTargetNodeWithNameAndVal(previewAfter, asJSONB(null(av)), -1),
		pg.MakeResTargetNodeWithNameAndVal(previewAsIs, asJSONB(null(x)), -1),
	}
	sel.LimitCount, sel.LimitOption = pg.MakeAConstIntNode(MaxPreviewRows+1, -1), pg.LimitOption_LIMIT_OPTION_COUNT
	if pp.sql, err = deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotPreviewable, err)
	}
	if pp.returns != "" {
		pp.limits = append(pp.limits, "Approved, it returns to the agent, for every row it writes: "+pp.returns+".")
	}
	return pp, nil
}

// insert builds the preview of an INSERT: the rows its VALUES or SELECT
// would add, as the subquery source(c1, c2, ...), and returns the values
// known before it runs (a) and those shown as written (x).
func (pp *previewPlan) insert(ins *pg.InsertStmt, cat *sqlcheck.Catalog, sel *pg.SelectStmt) (*pg.Node, *pg.Node, error) {
	tbl, ok := cat.Table(*pp.table)
	if !ok {
		return nil, nil, fmt.Errorf("%w: table %s left the catalog", ErrNotPreviewable, pp.table)
	}
	sel.WithClause = ins.WithClause
	if ins.SelectStmt == nil {
		// DEFAULT VALUES: one row, every column the table's own.
		return object(nil), object(nil), nil
	}
	src := ins.SelectStmt.GetSelectStmt()
	if src == nil {
		return nil, nil, fmt.Errorf("%w: an INSERT source it does not know", ErrNotPreviewable)
	}
	var cols []string
	for _, c := range ins.Cols {
		rt := c.GetResTarget()
		if rt == nil || len(rt.Indirection) > 0 {
			return nil, nil, fmt.Errorf("%w: it cannot compute an assignment to part of a column", ErrNotPreviewable)
		}
		cols = append(cols, rt.Name)
	}
	if len(cols) == 0 {
		// INSERT INTO t VALUES / SELECT: the table's first columns.
		n := len(tbl.Columns)
		switch {
		case len(src.ValuesLists) > 0:
			n = len(src.ValuesLists[0].GetList().GetItems())
		case src.Op == pg.SetOperation_SETOP_NONE && !hasStar(src.TargetList):
			n = len(src.TargetList)
		}
		if n > len(tbl.Columns) {
			return nil, nil, fmt.Errorf("%w: it inserts more values than %s has columns", ErrNotPreviewable, pp.table)
		}
		cols = tbl.ColumnNames()[:n]
	}
	pp.supplied = cols
	// A column any of whose values is computed when the statement runs
	// (or is DEFAULT) is shown as written in every row: its values become
	// their own text.
	asIs := make([]bool, len(cols))
	switch {
	case len(src.ValuesLists) > 0:
		for _, row := range src.ValuesLists {
			for j, item := range row.GetList().GetItems() {
				if j < len(asIs) && (runTimeValue(item) || item.GetSetToDefault() != nil) {
					asIs[j] = true
				}
				if j < len(cols) && item.GetSetToDefault() != nil {
					pp.defaulted[cols[j]] = true
				}
			}
		}
		for _, row := range src.ValuesLists {
			items := row.GetList().GetItems()
			for j, item := range items {
				if j < len(asIs) && asIs[j] {
					items[j] = pg.MakeAConstStrNode(exprText(item), -1)
				}
			}
		}
	case src.Op == pg.SetOperation_SETOP_NONE:
		for j, t := range src.TargetList {
			rt := t.GetResTarget()
			if j < len(asIs) && rt != nil && rt.Val != nil && runTimeValue(rt.Val) {
				asIs[j] = true
				rt.Val = pg.MakeAConstStrNode(exprText(rt.Val), -1)
			}
		}
	}
	names := make([]*pg.Node, len(cols))
	for j := range cols {
		names[j] = pg.MakeStrNode(fmt.Sprintf("c%d", j+1))
	}
	sel.FromClause = []*pg.Node{subselect(ins.SelectStmt, previewSource, names)}
	var known, shown []pair
	column := func(j int) *pg.Node {
		return pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(previewSource), pg.MakeStrNode(fmt.Sprintf("c%d", j+1))}, -1)
	}
	for j, c := range cols {
		if asIs[j] {
			shown = append(shown, pair{c, column(j)})
			continue
		}
		v, err := castTo(column(j), tbl, c)
		if err != nil {
			return nil, nil, err
		}
		known = append(known, pair{c, v})
		pp.compared = append(pp.compared, c)
	}
	if oc := ins.OnConflictClause; oc != nil {
		pp.limits = append(pp.limits, "ON CONFLICT DO NOTHING: rows that conflict with rows already in the table are left out of the preview; rows of this statement that conflict with each other are not.")
		if cond, ok := pp.noConflict(oc, cols, asIs, tbl, column); ok {
			sel.WhereClause = cond
		} else {
			pp.limits = append(pp.limits, "It cannot tell which rows conflict (a conflict column is not given a value it knows), so it shows every row: an approval goes back to the queue if some conflict.")
		}
	}
	return object(known), object(shown), nil
}

// noConflict is NOT EXISTS (a row of the table with the same conflict
// columns): the rows ON CONFLICT DO NOTHING would insert.
func (pp *previewPlan) noConflict(oc *pg.OnConflictClause, cols []string, asIs []bool, tbl *sqlcheck.Table, column func(int) *pg.Node) (*pg.Node, bool) {
	if oc.Infer == nil || len(oc.Infer.IndexElems) == 0 || oc.Infer.WhereClause != nil {
		return nil, false
	}
	const other = "harbormaster_existing"
	var conds []*pg.Node
	for _, e := range oc.Infer.IndexElems {
		ie := e.GetIndexElem()
		if ie == nil || ie.Name == "" {
			return nil, false
		}
		j := -1
		for i, c := range cols {
			if c == ie.Name {
				j = i
			}
		}
		if j < 0 || asIs[j] {
			return nil, false
		}
		v, err := castTo(column(j), tbl, ie.Name)
		if err != nil {
			return nil, false
		}
		conds = append(conds, pg.MakeAExprNode(pg.A_Expr_Kind_AEXPR_OP, []*pg.Node{pg.MakeStrNode("=")},
			pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(other), pg.MakeStrNode(ie.Name)}, -1), v, -1))
	}
	var where *pg.Node
	for _, c := range conds {
		where = and(where, c)
	}
	sub := &pg.SelectStmt{
		FromClause:  []*pg.Node{pg.MakeFullRangeVarNode(pp.table.Schema, pp.table.Name, other, -1)},
		WhereClause: where,
		Op:          pg.SetOperation_SETOP_NONE,
	}
	exists := &pg.Node{Node: &pg.Node_SubLink{SubLink: &pg.SubLink{SubLinkType: pg.SubLinkType_EXISTS_SUBLINK,
		Subselect: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}}}}}
	return pg.MakeBoolExprNode(pg.BoolExprType_NOT_EXPR, []*pg.Node{exists}, -1), true
}

// pair is one key and value of a jsonb_build_object.
type pair struct {
	key string
	val *pg.Node
}

// object is jsonb_build_object(k1, v1, ...), in pieces joined by || when
// there are more pairs than a function takes arguments.
func object(pairs []pair) *pg.Node {
	const perCall = 50
	var out *pg.Node
	for i := 0; i == 0 || i < len(pairs); i += perCall {
		end := min(i+perCall, len(pairs))
		var args []*pg.Node
		for _, p := range pairs[i:end] {
			args = append(args, pg.MakeAConstStrNode(p.key, -1), p.val)
		}
		call := pg.MakeFuncCallNode([]*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode("jsonb_build_object")}, args, -1)
		if out == nil {
			out = call
		} else {
			out = pg.MakeAExprNode(pg.A_Expr_Kind_AEXPR_OP, []*pg.Node{pg.MakeStrNode("||")}, out, call, -1)
		}
	}
	return out
}

// asJSONB is CAST(n AS jsonb).
func asJSONB(n *pg.Node) *pg.Node {
	return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: n, Location: -1,
		TypeName: &pg.TypeName{Names: []*pg.Node{pg.MakeStrNode("pg_catalog"), pg.MakeStrNode("jsonb")}, Typemod: -1, Location: -1}}}}
}

// castTo is CAST(v AS the column's type): the value the column would
// hold, so the preview's values compare equal with those written.
func castTo(v *pg.Node, tbl *sqlcheck.Table, col string) (*pg.Node, error) {
	for _, c := range tbl.Columns {
		if c.Name != col {
			continue
		}
		res, err := pg.Parse("SELECT NULL::" + c.Type)
		if err != nil || len(res.Stmts) != 1 {
			return nil, fmt.Errorf("%w: the type of %s (%s): %v", ErrNotPreviewable, col, c.Type, err)
		}
		tc := res.Stmts[0].Stmt.GetSelectStmt().GetTargetList()[0].GetResTarget().GetVal().GetTypeCast()
		if tc == nil {
			return nil, fmt.Errorf("%w: the type of %s (%s)", ErrNotPreviewable, col, c.Type)
		}
		return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: v, TypeName: tc.TypeName, Location: -1}}}, nil
	}
	return nil, fmt.Errorf("%w: %s has no column %s", ErrNotPreviewable, tbl.Name, col)
}

// subselect is (stmt) AS alias(names...).
func subselect(stmt *pg.Node, alias string, names []*pg.Node) *pg.Node {
	return &pg.Node{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
		Subquery: stmt, Alias: &pg.Alias{Aliasname: alias, Colnames: names}}}}
}

// oncePerRow is DISTINCT ON (alias.tableoid, alias.ctid): each row of the
// target once, as an UPDATE or DELETE with a join reaches it.
func oncePerRow(alias string) []*pg.Node {
	col := func(name string) *pg.Node {
		return pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(name)}, -1)
	}
	return []*pg.Node{col("tableoid"), col("ctid")}
}

// runTimeValue reports whether an expression's value is known only when
// the statement runs: it reads the clock or chance (now(), CURRENT_DATE,
// gen_random_uuid()), or draws from a sequence. The preview shows such a
// value as written; evaluating it would show a value that is not the one
// written, or draw a sequence value nobody can give back.
func runTimeValue(n *pg.Node) bool {
	found := false
	sqlcheck.Visit(n.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg.SQLValueFunction, *pg.SetToDefault:
			found = true
		case *pg.FuncCall:
			if len(x.Funcname) > 0 {
				if s := x.Funcname[len(x.Funcname)-1].GetString_(); s != nil && runTimeFunctions[strings.ToLower(s.Sval)] {
					found = true
				}
			}
		case *pg.SelectStmt:
			return false // a subquery's value is read, as of the snapshot
		}
		return !found
	})
	return found
}

// runTimeFunctions are the functions whose value differs from one
// transaction to the next.
var runTimeFunctions = map[string]bool{
	"now": true, "transaction_timestamp": true, "statement_timestamp": true, "clock_timestamp": true,
	"timeofday": true, "gen_random_uuid": true, "random": true, "nextval": true, "currval": true, "lastval": true,
}

// exprText is an expression as SQL text (DEFAULT for SetToDefault).
func exprText(n *pg.Node) string {
	if n.GetSetToDefault() != nil {
		return "DEFAULT"
	}
	sel := &pg.SelectStmt{TargetList: []*pg.Node{pg.MakeResTargetNodeWithVal(proto.Clone(n).(*pg.Node), -1)}, Op: pg.SetOperation_SETOP_NONE}
	text, err := deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}})
	if err != nil {
		return "(an expression)"
	}
	return strings.TrimPrefix(text, "SELECT ")
}

// returningText is a RETURNING list as SQL text, or "".
func returningText(list []*pg.Node) string {
	if len(list) == 0 {
		return ""
	}
	sel := &pg.SelectStmt{TargetList: list, Op: pg.SetOperation_SETOP_NONE}
	text, err := deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}})
	if err != nil {
		return "(a RETURNING list)"
	}
	return strings.TrimPrefix(text, "SELECT ")
}

func hasStar(list []*pg.Node) bool {
	for _, t := range list {
		if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return true
		}
	}
	return false
}
