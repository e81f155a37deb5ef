package sqlcheck

import (
	"fmt"
	"sort"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// Facts is what a statement does, as extracted from its parse tree.
type Facts struct {
	// Kind is the statement's operation.
	Kind Op `json:"kind"`
	// Target is the table written by an INSERT, UPDATE or DELETE.
	Target *TableName `json:"target,omitempty"`
	// Relations is every catalog table referenced anywhere, sorted.
	Relations []TableName `json:"relations"`
	// Reads maps each table to the columns read from it (sorted). A table that
	// is scanned for reading appears even with no column (count(*)).
	Reads map[TableName][]string `json:"-"`
	// Written is the columns an INSERT or UPDATE sets, sorted.
	Written []string `json:"written,omitempty"`
	// Implicit is, for an INSERT without a column list, the columns its
	// values go to, in order: the catalog's first columns, which the
	// Pilot writes as the statement's column list, so the target fills
	// exactly the columns checked (a bounded catalog's, never one the
	// bound leaves out).
	Implicit []string `json:"implicit,omitempty"`
	// Functions and Operators called, sorted and deduplicated.
	Functions []string `json:"functions,omitempty"`
	Operators []string `json:"operators,omitempty"`
	// References lists every place a catalog table is named, with the
	// RangeVar node in the tree, so the Pilot can add guards at each one.
	References []Reference `json:"-"`
}

// Reference is one occurrence of a catalog table in the parse tree.
type Reference struct {
	Table TableName
	// RangeVar is the name as written in the tree.
	RangeVar *pg.RangeVar
	// Item is the FROM item wrapping RangeVar, which the Pilot may replace
	// with a fenced subquery; nil for the target of a write.
	Item *pg.Node
	// Role says how the statement uses this occurrence.
	Role RefRole
}

// RefRole is how a statement uses one reference to a table.
type RefRole int

const (
	// RoleRead is a FROM/JOIN/USING item or a subquery's relation.
	RoleRead RefRole = iota
	// RoleTarget is the relation an INSERT, UPDATE or DELETE writes.
	RoleTarget
)

// maxWalkDepth bounds recursion in the walker; deeper trees refer.
const maxWalkDepth = 1000

type rte struct {
	name    string   // alias or relation name, what column refs qualify with
	table   *Table   // catalog table, or nil
	cols    []string // output columns of a subquery, CTE, function or join alias
	unknown bool     // output columns unknown (a function without a column list)
	join    []*rte   // for a join with an alias: the items it covers
}

type scope struct {
	parent *scope
	items  []*rte
	ctes   map[string]*rte
	// outputs are the output column names of the SELECT whose ORDER BY,
	// GROUP BY or DISTINCT ON is being walked (they may name outputs).
	outputs map[string]bool
}

func (s *scope) child() *scope { return &scope{parent: s} }

type walker struct {
	cat       *Catalog
	reasons   []Reason
	seen      map[string]bool
	reads     map[TableName]map[string]bool
	relations map[TableName]bool
	written   map[string]bool
	implicit  []string
	funcs     map[string]bool
	ops       map[string]bool
	refs      []Reference
	depth     int
}

func newWalker(cat *Catalog) *walker {
	return &walker{
		cat:       cat,
		seen:      map[string]bool{},
		reads:     map[TableName]map[string]bool{},
		relations: map[TableName]bool{},
		written:   map[string]bool{},
		funcs:     map[string]bool{},
		ops:       map[string]bool{},
	}
}

func (w *walker) refer(code, format string, args ...any) {
	r := reasonf(code, format, args...)
	key := r.Code + "\x00" + r.Message
	if w.seen[key] {
		return
	}
	w.seen[key] = true
	w.reasons = append(w.reasons, r)
}

func (w *walker) read(t *Table, cols ...string) {
	m := w.reads[t.Name]
	if m == nil {
		m = map[string]bool{}
		w.reads[t.Name] = m
	}
	for _, c := range cols {
		m[c] = true
	}
}

func (w *walker) facts(kind Op, target *TableName) *Facts {
	f := &Facts{Kind: kind, Target: target, Reads: map[TableName][]string{}, References: w.refs}
	for t := range w.relations {
		f.Relations = append(f.Relations, t)
	}
	sortTables(f.Relations)
	for t, cols := range w.reads {
		f.Reads[t] = sortedKeys(cols)
	}
	f.Written = sortedKeys(w.written)
	f.Implicit = w.implicit
	f.Functions = sortedKeys(w.funcs)
	f.Operators = sortedKeys(w.ops)
	return f
}

func sortTables(ts []TableName) {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Schema != ts[j].Schema {
			return ts[i].Schema < ts[j].Schema
		}
		return ts[i].Name < ts[j].Name
	})
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- statements ----

// statement walks the one top-level statement and returns its kind and
// target. Anything but SELECT, INSERT, UPDATE or DELETE refers.
func (w *walker) statement(n *pg.Node) (Op, *TableName) {
	switch s := n.GetNode().(type) {
	case *pg.Node_SelectStmt:
		w.selectStmt(s.SelectStmt, &scope{})
		return OpSelect, nil
	case *pg.Node_InsertStmt:
		return OpInsert, w.insertStmt(s.InsertStmt, &scope{})
	case *pg.Node_UpdateStmt:
		return OpUpdate, w.updateStmt(s.UpdateStmt, &scope{})
	case *pg.Node_DeleteStmt:
		return OpDelete, w.deleteStmt(s.DeleteStmt, &scope{})
	case nil:
		w.refer(CodeEmptyStatement, "the statement is empty")
		return "", nil
	default:
		w.refer(CodeStatementNotAllow, "%s statements are not allowed: only SELECT, INSERT, UPDATE and DELETE", statementName(n))
		return "", nil
	}
}

// statementName names a statement node for a reason ("ExplainStmt" -> "EXPLAIN").
func statementName(n *pg.Node) string {
	t := fmt.Sprintf("%T", n.GetNode())
	t = strings.TrimPrefix(t, "*pg_query.Node_")
	if name, ok := statementNames[t]; ok {
		return name
	}
	return t
}

var statementNames = map[string]string{
	"ExplainStmt": "EXPLAIN", "CopyStmt": "COPY", "DoStmt": "DO", "CallStmt": "CALL",
	"VariableSetStmt": "SET/RESET", "VariableShowStmt": "SHOW", "LockStmt": "LOCK",
	"TransactionStmt": "transaction control", "PrepareStmt": "PREPARE", "ExecuteStmt": "EXECUTE",
	"DeallocateStmt": "DEALLOCATE", "ListenStmt": "LISTEN", "NotifyStmt": "NOTIFY", "UnlistenStmt": "UNLISTEN",
	"MergeStmt": "MERGE", "TruncateStmt": "TRUNCATE", "VacuumStmt": "VACUUM/ANALYZE", "GrantStmt": "GRANT/REVOKE",
	"DeclareCursorStmt": "DECLARE CURSOR", "FetchStmt": "FETCH", "ClosePortalStmt": "CLOSE",
	"CreateTableAsStmt": "CREATE TABLE AS", "RefreshMatViewStmt": "REFRESH MATERIALIZED VIEW",
	"DiscardStmt": "DISCARD", "LoadStmt": "LOAD", "CheckPointStmt": "CHECKPOINT", "CreateStmt": "CREATE TABLE",
	"DropStmt": "DROP", "AlterTableStmt": "ALTER TABLE", "IndexStmt": "CREATE INDEX", "CreateFunctionStmt": "CREATE FUNCTION",
	"CreateRoleStmt": "CREATE ROLE", "AlterRoleStmt": "ALTER ROLE", "ViewStmt": "CREATE VIEW", "CreateSchemaStmt": "CREATE SCHEMA",
	"CreateTrigStmt": "CREATE TRIGGER", "RuleStmt": "CREATE RULE", "CommentStmt": "COMMENT", "ReindexStmt": "REINDEX",
	"ClusterStmt": "CLUSTER", "AlterSystemStmt": "ALTER SYSTEM", "CreateExtensionStmt": "CREATE EXTENSION",
	"SelectStmt": "SELECT", "InsertStmt": "INSERT", "UpdateStmt": "UPDATE", "DeleteStmt": "DELETE",
}

func (w *walker) with(wc *pg.WithClause, sc *scope) {
	if wc == nil {
		return
	}
	if wc.Recursive {
		w.refer(CodeRecursiveCTE, "WITH RECURSIVE is not supported")
	}
	if sc.ctes == nil {
		sc.ctes = map[string]*rte{}
	}
	for _, c := range wc.Ctes {
		cte := c.GetCommonTableExpr()
		if cte == nil {
			w.unknownNode(c, "WITH list")
			continue
		}
		if t, ok := w.cat.Resolve("", cte.Ctename); ok {
			w.refer(CodeCTEShadowsTable, "the CTE %s has the name of the table %s", QuoteIdent(cte.Ctename), t.Name)
		}
		if cte.SearchClause != nil || cte.CycleClause != nil {
			w.refer(CodeRecursiveCTE, "SEARCH and CYCLE clauses are not supported")
		}
		var cols []string
		switch q := cte.Ctequery.GetNode().(type) {
		case *pg.Node_SelectStmt:
			// A non-recursive CTE sees only the CTEs before it.
			cols = w.selectStmt(q.SelectStmt, sc.child())
		case *pg.Node_InsertStmt, *pg.Node_UpdateStmt, *pg.Node_DeleteStmt, *pg.Node_MergeStmt:
			w.refer(CodeWritableCTE, "data-modifying statements in WITH are not allowed")
			continue
		default:
			w.unknownNode(cte.Ctequery, "WITH query")
			continue
		}
		if alias := stringList(cte.Aliascolnames); len(alias) > 0 {
			cols = overlayNames(cols, alias)
		}
		sc.ctes[cte.Ctename] = &rte{name: cte.Ctename, cols: cols, unknown: cols == nil}
	}
}

// selectStmt walks a SELECT (or VALUES, or set operation) in a new scope
// whose parent is outer, and returns its output column names when known.
func (w *walker) selectStmt(s *pg.SelectStmt, outer *scope) []string {
	if !w.enter() {
		return nil
	}
	defer w.leave()
	sc := outer.child()
	w.with(s.WithClause, sc)
	if s.IntoClause != nil {
		w.refer(CodeSelectInto, "SELECT INTO creates a table and is not allowed")
	}
	if len(s.LockingClause) > 0 {
		w.refer(CodeLockingClause, "locking clauses (FOR UPDATE, FOR SHARE, ...) are not allowed")
	}
	var outputs []string
	switch {
	case s.Op != pg.SetOperation_SETOP_NONE && s.Op != pg.SetOperation_SET_OPERATION_UNDEFINED:
		if s.Larg == nil || s.Rarg == nil {
			w.refer(CodeUnknownNode, "a set operation without both sides")
			return nil
		}
		outputs = w.selectStmt(s.Larg, sc)
		w.selectStmt(s.Rarg, sc)
		// ORDER BY and LIMIT of a set operation see only its output columns.
		osc := sc.child()
		osc.items = []*rte{{name: "", cols: outputs, unknown: outputs == nil}}
		osc.outputs = nameSet(outputs)
		w.sortClause(s.SortClause, osc)
		w.expr(s.LimitCount, osc)
		w.expr(s.LimitOffset, osc)
		return outputs
	case len(s.ValuesLists) > 0:
		for i, row := range s.ValuesLists {
			items := row.GetList()
			if items == nil {
				w.unknownNode(row, "VALUES")
				continue
			}
			for _, e := range items.Items {
				w.expr(e, sc)
			}
			if i == 0 {
				for j := range items.Items {
					outputs = append(outputs, fmt.Sprintf("column%d", j+1))
				}
			}
		}
		w.sortClause(s.SortClause, sc)
		w.expr(s.LimitCount, sc)
		w.expr(s.LimitOffset, sc)
		return outputs
	}
	for _, f := range s.FromClause {
		w.fromItem(f, sc)
	}
	unknown := false
	for _, t := range s.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			w.unknownNode(t, "select list")
			continue
		}
		w.expr(rt.Val, sc)
		names, ok := w.outputNames(rt, sc)
		if !ok {
			unknown = true
		}
		outputs = append(outputs, names...)
	}
	w.expr(s.WhereClause, sc)
	osc := &scope{parent: sc.parent, items: sc.items, ctes: sc.ctes}
	osc.outputs = nameSet(outputs)
	for _, g := range s.GroupClause {
		w.groupExpr(g, sc, osc)
	}
	w.expr(s.HavingClause, sc)
	for _, d := range s.DistinctClause {
		w.groupExpr(d, sc, osc)
	}
	for _, wd := range s.WindowClause {
		w.windowDef(wd.GetWindowDef(), sc, wd)
	}
	w.sortClause(s.SortClause, osc)
	w.expr(s.LimitCount, sc)
	w.expr(s.LimitOffset, sc)
	if unknown {
		return nil
	}
	return outputs
}

// uniqueNames is names without repeats, in order.
func uniqueNames(names []string) []string {
	var out []string
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func nameSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// groupExpr walks a GROUP BY or DISTINCT ON item: input columns first, and a
// bare name that is no input column may name an output column.
func (w *walker) groupExpr(n *pg.Node, sc, osc *scope) {
	if cr := n.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
		if name := cr.Fields[0].GetString_(); name != nil && !w.isInputColumn(name.Sval, sc) && osc.outputs[name.Sval] {
			return
		}
	}
	if gs := n.GetGroupingSet(); gs != nil {
		for _, c := range gs.Content {
			w.groupExpr(c, sc, osc)
		}
		return
	}
	w.expr(n, sc)
}

func (w *walker) sortClause(items []*pg.Node, sc *scope) {
	for _, it := range items {
		sb := it.GetSortBy()
		if sb == nil {
			w.unknownNode(it, "ORDER BY")
			continue
		}
		if len(sb.UseOp) > 0 {
			w.operator(sb.UseOp)
		}
		// ORDER BY prefers output column names over input columns.
		if cr := sb.Node.GetColumnRef(); cr != nil && len(cr.Fields) == 1 {
			if name := cr.Fields[0].GetString_(); name != nil && sc.outputs[name.Sval] {
				continue
			}
		}
		w.expr(sb.Node, sc)
	}
}

func (w *walker) isInputColumn(name string, sc *scope) bool {
	for _, it := range sc.items {
		if it.has(name) {
			return true
		}
	}
	return false
}

func (r *rte) has(col string) bool {
	if r.table != nil {
		return r.table.Has(col)
	}
	for _, c := range r.cols {
		if c == col {
			return true
		}
	}
	return false
}

// outputNames returns the output column names of one select-list item.
func (w *walker) outputNames(rt *pg.ResTarget, sc *scope) ([]string, bool) {
	if rt.Name != "" {
		return []string{rt.Name}, true
	}
	switch v := rt.Val.GetNode().(type) {
	case *pg.Node_ColumnRef:
		f := v.ColumnRef.Fields
		if len(f) == 0 {
			return nil, false
		}
		if f[len(f)-1].GetAStar() != nil {
			var items []*rte
			if len(f) == 1 {
				items = sc.items
			} else if it := w.lookupItem(stringList(f[:len(f)-1]), sc); it != nil {
				items = []*rte{it}
			}
			var out []string
			for _, it := range items {
				if it.unknown {
					return nil, false
				}
				if it.table != nil {
					out = append(out, it.table.ColumnNames()...)
				} else {
					out = append(out, it.cols...)
				}
			}
			return out, true
		}
		if s := f[len(f)-1].GetString_(); s != nil {
			return []string{s.Sval}, true
		}
	case *pg.Node_FuncCall:
		names := stringList(v.FuncCall.Funcname)
		if len(names) > 0 {
			return []string{names[len(names)-1]}, true
		}
	case *pg.Node_TypeCast:
		if cr := v.TypeCast.Arg.GetColumnRef(); cr != nil && len(cr.Fields) > 0 {
			if s := cr.Fields[len(cr.Fields)-1].GetString_(); s != nil {
				return []string{s.Sval}, true
			}
		}
	}
	return []string{"?column?"}, true
}

func (w *walker) insertStmt(s *pg.InsertStmt, outer *scope) *TableName {
	sc := outer.child()
	w.with(s.WithClause, sc)
	t := w.relation(s.Relation, nil, sc, RoleTarget)
	if t == nil {
		// Still walk the rest for every other reason.
		w.expr(s.SelectStmt, sc)
		return nil
	}
	var cols []string
	for _, c := range s.Cols {
		rt := c.GetResTarget()
		if rt == nil {
			w.unknownNode(c, "INSERT column list")
			continue
		}
		for _, ind := range rt.Indirection {
			w.indirection(ind, sc)
		}
		cols = append(cols, rt.Name)
	}
	nvalues := -1
	if sel := s.SelectStmt.GetSelectStmt(); sel != nil {
		// The inserted query does not see the target table.
		out := w.selectStmt(sel, sc)
		if out != nil {
			nvalues = len(out)
		}
	} else if s.SelectStmt != nil {
		w.unknownNode(s.SelectStmt, "INSERT source")
	}
	if len(cols) == 0 && s.SelectStmt != nil {
		all := t.table.ColumnNames()
		if nvalues < 0 || nvalues > len(all) {
			nvalues = len(all)
		}
		cols = all[:nvalues]
		w.implicit = cols
	}
	for _, c := range cols {
		if !t.table.Has(c) {
			w.refer(CodeUnknownColumn, "column %s does not exist in %s", QuoteIdent(c), t.table.Name)
			continue
		}
		w.written[c] = true
	}
	if s.Override != pg.OverridingKind_OVERRIDING_NOT_SET && s.Override != pg.OverridingKind_OVERRIDING_KIND_UNDEFINED {
		w.refer(CodeUnsupported, "OVERRIDING SYSTEM/USER VALUE is not supported")
	}
	tsc := sc.child()
	tsc.items = []*rte{t}
	if oc := s.OnConflictClause; oc != nil {
		switch oc.Action {
		case pg.OnConflictAction_ONCONFLICT_NOTHING:
			if oc.Infer == nil {
				w.refer(CodeOnConflictNoTarget, "ON CONFLICT DO NOTHING needs an explicit conflict target")
			}
		default:
			w.refer(CodeOnConflictUpdate, "INSERT ... ON CONFLICT DO UPDATE is not allowed: send a separate UPDATE")
		}
		if inf := oc.Infer; inf != nil {
			if inf.Conname != "" {
				w.refer(CodeOnConflictNoTarget, "ON CONFLICT ON CONSTRAINT is not supported: name the conflict columns")
			}
			for _, ie := range inf.IndexElems {
				el := ie.GetIndexElem()
				if el == nil {
					w.unknownNode(ie, "conflict target")
					continue
				}
				if el.Name != "" {
					// The conflict target reveals whether a row exists: a read.
					w.columnRef([]string{el.Name}, tsc)
				}
				w.expr(el.Expr, tsc)
			}
			w.expr(inf.WhereClause, tsc)
		}
		for _, t := range oc.TargetList {
			if rt := t.GetResTarget(); rt != nil {
				w.expr(rt.Val, tsc)
			}
		}
		w.expr(oc.WhereClause, tsc)
	}
	w.returning(s.ReturningList, tsc)
	return &t.table.Name
}

func (w *walker) updateStmt(s *pg.UpdateStmt, outer *scope) *TableName {
	sc := outer.child()
	w.with(s.WithClause, sc)
	t := w.relation(s.Relation, nil, sc, RoleTarget)
	if t != nil {
		sc.items = append(sc.items, t)
	} else {
		// Referred already: its columns are not each reported too.
		sc.items = append(sc.items, unknownTarget(s.Relation))
	}
	for _, f := range s.FromClause {
		w.fromItem(f, sc)
	}
	walkedMulti := map[*pg.Node]bool{}
	for _, n := range s.TargetList {
		rt := n.GetResTarget()
		if rt == nil {
			w.unknownNode(n, "SET list")
			continue
		}
		if t != nil {
			if !t.table.Has(rt.Name) {
				w.refer(CodeUnknownColumn, "column %s does not exist in %s", QuoteIdent(rt.Name), t.table.Name)
			} else {
				w.written[rt.Name] = true
			}
		}
		for _, ind := range rt.Indirection {
			w.indirection(ind, sc)
		}
		if ma := rt.Val.GetMultiAssignRef(); ma != nil {
			if !walkedMulti[ma.Source] {
				walkedMulti[ma.Source] = true
				w.expr(ma.Source, sc)
			}
			continue
		}
		w.expr(rt.Val, sc)
	}
	w.expr(s.WhereClause, sc)
	w.returning(s.ReturningList, sc)
	if t == nil {
		return nil
	}
	return &t.table.Name
}

func (w *walker) deleteStmt(s *pg.DeleteStmt, outer *scope) *TableName {
	sc := outer.child()
	w.with(s.WithClause, sc)
	t := w.relation(s.Relation, nil, sc, RoleTarget)
	if t != nil {
		sc.items = append(sc.items, t)
	} else {
		// Referred already: its columns are not each reported too.
		sc.items = append(sc.items, unknownTarget(s.Relation))
	}
	for _, f := range s.UsingClause {
		w.fromItem(f, sc)
	}
	w.expr(s.WhereClause, sc)
	w.returning(s.ReturningList, sc)
	if t == nil {
		return nil
	}
	return &t.table.Name
}

func (w *walker) returning(list []*pg.Node, sc *scope) {
	for _, n := range list {
		rt := n.GetResTarget()
		if rt == nil {
			w.unknownNode(n, "RETURNING")
			continue
		}
		w.expr(rt.Val, sc)
	}
}

// ---- FROM ----

// relation resolves a RangeVar against the CTEs in scope and the catalog.
// It records the table and returns its range entry, or nil after referring.
func (w *walker) relation(rv *pg.RangeVar, item *pg.Node, sc *scope, role RefRole) *rte {
	if rv == nil {
		w.refer(CodeUnknownNode, "a statement without a relation")
		return nil
	}
	name := rv.Relname
	if rv.Alias != nil && rv.Alias.Aliasname != "" {
		name = rv.Alias.Aliasname
	}
	if rv.Catalogname != "" {
		w.refer(CodeUnknownRelation, "cross-database reference %s.%s.%s is not allowed", QuoteIdent(rv.Catalogname), QuoteIdent(rv.Schemaname), QuoteIdent(rv.Relname))
		return nil
	}
	if rv.Schemaname == "" && role == RoleRead {
		if cte := lookupCTE(rv.Relname, sc); cte != nil {
			r := &rte{name: name, cols: cte.cols, unknown: cte.unknown}
			if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
				r.cols = overlayNames(r.cols, stringList(rv.Alias.Colnames))
			}
			return r
		}
	}
	if IsReservedSchema(rv.Schemaname) {
		w.refer(CodeReservedSchema, "relation %s.%s is in a reserved schema", QuoteIdent(rv.Schemaname), QuoteIdent(rv.Relname))
		return nil
	}
	if rv.Schemaname == "" && strings.HasPrefix(rv.Relname, "pg_") {
		w.refer(CodeReservedSchema, "relation %s may resolve to the system catalog (names beginning with pg_)", QuoteIdent(rv.Relname))
		return nil
	}
	t, ok := w.cat.Resolve(rv.Schemaname, rv.Relname)
	if !ok {
		if rv.Schemaname != "" {
			w.refer(CodeUnknownRelation, "relation %s.%s is not in %s", QuoteIdent(rv.Schemaname), QuoteIdent(rv.Relname), w.cat.what())
		} else {
			w.refer(CodeUnknownRelation, "relation %s is not in %s (search path %s)", QuoteIdent(rv.Relname), w.cat.what(), strings.Join(w.cat.searchPath, ", "))
		}
		if role == RoleRead {
			// In scope with columns unknown, so its columns are not each
			// reported unknown too: the statement refers already.
			return &rte{name: name, unknown: true}
		}
		return nil
	}
	if IsReservedSchema(t.Name.Schema) {
		w.refer(CodeReservedSchema, "relation %s is in a reserved schema", t.Name)
		return nil
	}
	w.relations[t.Name] = true
	w.refs = append(w.refs, Reference{Table: t.Name, RangeVar: rv, Item: item, Role: role})
	if role == RoleRead {
		w.read(t) // scanned for reading, even when no column is named
	}
	r := &rte{name: name, table: t}
	if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
		w.refer(CodeUnsupported, "column aliases on a table (%s) are not supported", QuoteIdent(name))
	}
	return r
}

// unknownTarget stands in scope for a written relation the walker could
// not resolve: one with unknown columns.
func unknownTarget(rv *pg.RangeVar) *rte {
	r := &rte{unknown: true}
	if rv != nil {
		r.name = rv.Relname
		if rv.Alias != nil && rv.Alias.Aliasname != "" {
			r.name = rv.Alias.Aliasname
		}
	}
	return r
}

func lookupCTE(name string, sc *scope) *rte {
	for s := sc; s != nil; s = s.parent {
		if c, ok := s.ctes[name]; ok {
			return c
		}
	}
	return nil
}

func overlayNames(cols, alias []string) []string {
	out := append([]string(nil), alias...)
	if len(cols) > len(alias) {
		out = append(out, cols[len(alias):]...)
	}
	return out
}

// fromItem adds the range entries of one FROM item to sc.
func (w *walker) fromItem(n *pg.Node, sc *scope) []*rte {
	if !w.enter() {
		return nil
	}
	defer w.leave()
	switch f := n.GetNode().(type) {
	case *pg.Node_RangeVar:
		r := w.relation(f.RangeVar, n, sc, RoleRead)
		if r == nil {
			return nil
		}
		sc.items = append(sc.items, r)
		return []*rte{r}
	case *pg.Node_RangeSubselect:
		sub := f.RangeSubselect.Subquery.GetSelectStmt()
		if sub == nil {
			w.unknownNode(f.RangeSubselect.Subquery, "subquery in FROM")
			return nil
		}
		parent := sc.parent
		if f.RangeSubselect.Lateral {
			parent = sc
		}
		if parent == nil {
			parent = &scope{}
		}
		// The subquery sees the CTEs of this level either way.
		cols := w.selectStmt(sub, &scope{parent: parent, ctes: sc.ctes})
		r := &rte{cols: cols, unknown: cols == nil}
		if a := f.RangeSubselect.Alias; a != nil {
			r.name = a.Aliasname
			if len(a.Colnames) > 0 {
				r.cols = overlayNames(r.cols, stringList(a.Colnames))
				r.unknown = false
			}
		}
		sc.items = append(sc.items, r)
		return []*rte{r}
	case *pg.Node_RangeFunction:
		rf := f.RangeFunction
		// A function in FROM is always LATERAL (the keyword is noise): its
		// arguments see the FROM items to its left, which are already in sc,
		// before any outer level. Resolving them against the outer levels
		// only would credit a read to the wrong table.
		fsc := sc
		var fname string
		for _, fn := range rf.Functions {
			// Each item is a List of (function call, column definition list).
			l := fn.GetList()
			if l == nil || len(l.Items) == 0 {
				w.unknownNode(fn, "function in FROM")
				continue
			}
			call := l.Items[0]
			if fc := call.GetFuncCall(); fc != nil {
				if names := stringList(fc.Funcname); len(names) > 0 && fname == "" {
					fname = names[len(names)-1]
				}
			}
			w.expr(call, fsc)
			for _, cd := range l.Items[1:] {
				if cd.GetList() != nil && len(cd.GetList().Items) > 0 {
					w.refer(CodeUnsupported, "column definition lists on functions in FROM are not supported")
				}
			}
		}
		if len(rf.Coldeflist) > 0 {
			w.refer(CodeUnsupported, "column definition lists on functions in FROM are not supported")
		}
		r := &rte{name: fname, unknown: true}
		if a := rf.Alias; a != nil {
			r.name = a.Aliasname
			if len(a.Colnames) > 0 {
				r.cols = stringList(a.Colnames)
				r.unknown = false
			}
		}
		if rf.Ordinality && !r.unknown {
			r.cols = append(r.cols, "ordinality")
		}
		sc.items = append(sc.items, r)
		return []*rte{r}
	case *pg.Node_JoinExpr:
		j := f.JoinExpr
		left := w.fromItem(j.Larg, sc)
		right := w.fromItem(j.Rarg, sc)
		both := append(append([]*rte(nil), left...), right...)
		for _, u := range stringList(j.UsingClause) {
			w.columnRef([]string{u}, &scope{items: both})
		}
		if j.IsNatural {
			// NATURAL joins compare every column of the same name, of
			// tables and of subqueries, CTEs, VALUES and functions with
			// column aliases alike (a subquery's email joins a table's).
			seen := map[string]int{}
			for _, it := range both {
				cols := it.cols
				if it.table != nil {
					cols = it.table.ColumnNames()
				}
				for _, c := range uniqueNames(cols) {
					seen[c]++
				}
			}
			for c, k := range seen {
				if k > 1 {
					w.columnRef([]string{c}, &scope{items: both})
				}
			}
			for _, it := range both {
				if it.table == nil && it.unknown {
					w.refer(CodeUnsupported, "NATURAL JOIN with a relation of unknown columns")
				}
			}
		}
		// ON sees only this join's own inputs, then the outer levels: not
		// the FROM items before it in a comma list, which PostgreSQL hides
		// here (a name they share resolves to an outer level instead).
		w.expr(j.Quals, &scope{parent: sc.parent, items: both, ctes: sc.ctes})
		if j.Alias != nil && len(j.Alias.Colnames) > 0 {
			// They rename the join's columns in an order (merged columns
			// first) the walker does not follow: a renamed column would be
			// credited to the column whose name it took.
			w.refer(CodeUnsupported, "column aliases on a join (%s) are not supported", QuoteIdent(j.Alias.Aliasname))
		}
		if j.Alias != nil && j.Alias.Aliasname != "" {
			r := &rte{name: j.Alias.Aliasname, join: both}
			for _, it := range both {
				if it.table != nil {
					r.cols = append(r.cols, it.table.ColumnNames()...)
				} else {
					r.cols = append(r.cols, it.cols...)
					r.unknown = r.unknown || it.unknown
				}
			}
			sc.items = append(sc.items, r)
			return []*rte{r}
		}
		if j.JoinUsingAlias != nil {
			sc.items = append(sc.items, &rte{name: j.JoinUsingAlias.Aliasname, join: both, cols: stringList(j.UsingClause)})
		}
		return both
	case *pg.Node_RangeTableSample:
		w.refer(CodeUnsupported, "TABLESAMPLE is not supported")
		return nil
	case *pg.Node_RangeTableFunc:
		w.refer(CodeUnsupported, "XMLTABLE is not supported")
		return nil
	case *pg.Node_JsonTable:
		w.refer(CodeUnsupported, "JSON_TABLE is not supported")
		return nil
	default:
		w.unknownNode(n, "FROM")
		return nil
	}
}

// ---- expressions ----

func (w *walker) enter() bool {
	w.depth++
	if w.depth > maxWalkDepth {
		w.refer(CodeInputTooDeep, "the statement nests deeper than %d levels", maxWalkDepth)
		return false
	}
	return true
}

func (w *walker) leave() { w.depth-- }

func (w *walker) unknownNode(n *pg.Node, where string) {
	t := strings.TrimPrefix(fmt.Sprintf("%T", n.GetNode()), "*pg_query.Node_")
	w.refer(CodeUnknownNode, "the checker does not know %s in %s", t, where)
}

// expr walks one expression. Every node type it does not know refers.
func (w *walker) expr(n *pg.Node, sc *scope) {
	if n == nil || n.GetNode() == nil {
		return
	}
	if !w.enter() {
		return
	}
	defer w.leave()
	switch e := n.GetNode().(type) {
	case *pg.Node_AConst, *pg.Node_SetToDefault, *pg.Node_Integer, *pg.Node_Float, *pg.Node_Boolean, *pg.Node_String_:
		// Constants read nothing. (Bare Integer/String appear in typmods.)
	case *pg.Node_ColumnRef:
		w.columnRefNode(e.ColumnRef, sc)
	case *pg.Node_ParamRef:
		w.refer(CodeParamNotAllowed, "parameter placeholders ($%d) are not allowed: send literal values", e.ParamRef.Number)
	case *pg.Node_AExpr:
		w.aExpr(e.AExpr)
		w.expr(e.AExpr.Lexpr, sc)
		w.expr(e.AExpr.Rexpr, sc)
	case *pg.Node_BoolExpr:
		for _, a := range e.BoolExpr.Args {
			w.expr(a, sc)
		}
	case *pg.Node_NullTest:
		w.expr(e.NullTest.Arg, sc)
	case *pg.Node_BooleanTest:
		w.expr(e.BooleanTest.Arg, sc)
	case *pg.Node_FuncCall:
		w.funcCall(e.FuncCall, sc)
	case *pg.Node_TypeCast:
		w.typeName(e.TypeCast.TypeName, sc)
		w.expr(e.TypeCast.Arg, sc)
	case *pg.Node_CollateClause:
		w.expr(e.CollateClause.Arg, sc)
	case *pg.Node_CaseExpr:
		w.expr(e.CaseExpr.Arg, sc)
		for _, a := range e.CaseExpr.Args {
			w.expr(a, sc)
		}
		w.expr(e.CaseExpr.Defresult, sc)
	case *pg.Node_CaseWhen:
		w.expr(e.CaseWhen.Expr, sc)
		w.expr(e.CaseWhen.Result, sc)
	case *pg.Node_CoalesceExpr:
		for _, a := range e.CoalesceExpr.Args {
			w.expr(a, sc)
		}
	case *pg.Node_MinMaxExpr:
		for _, a := range e.MinMaxExpr.Args {
			w.expr(a, sc)
		}
	case *pg.Node_NullIfExpr:
		for _, a := range e.NullIfExpr.Args {
			w.expr(a, sc)
		}
	case *pg.Node_RowExpr:
		for _, a := range e.RowExpr.Args {
			w.expr(a, sc)
		}
	case *pg.Node_AArrayExpr:
		for _, a := range e.AArrayExpr.Elements {
			w.expr(a, sc)
		}
	case *pg.Node_List:
		for _, a := range e.List.Items {
			w.expr(a, sc)
		}
	case *pg.Node_AIndirection:
		w.expr(e.AIndirection.Arg, sc)
		for _, ind := range e.AIndirection.Indirection {
			w.indirection(ind, sc)
		}
	case *pg.Node_SubLink:
		if len(e.SubLink.OperName) > 0 {
			w.operator(e.SubLink.OperName)
		}
		w.expr(e.SubLink.Testexpr, sc)
		sub := e.SubLink.Subselect.GetSelectStmt()
		if sub == nil {
			w.unknownNode(e.SubLink.Subselect, "subquery")
			return
		}
		w.selectStmt(sub, sc)
	case *pg.Node_SqlvalueFunction:
		w.sqlValueFunction(e.SqlvalueFunction)
	case *pg.Node_GroupingFunc:
		for _, a := range e.GroupingFunc.Args {
			w.expr(a, sc)
		}
	case *pg.Node_GroupingSet:
		for _, a := range e.GroupingSet.Content {
			w.expr(a, sc)
		}
	case *pg.Node_NamedArgExpr:
		w.expr(e.NamedArgExpr.Arg, sc)
	case *pg.Node_SelectStmt:
		// A bare SELECT in expression position (INSERT source handled by the caller).
		w.selectStmt(e.SelectStmt, sc)
	case *pg.Node_XmlExpr, *pg.Node_XmlSerialize:
		w.refer(CodeUnsupported, "XML expressions are not supported")
	case *pg.Node_JsonObjectConstructor, *pg.Node_JsonArrayConstructor, *pg.Node_JsonArrayQueryConstructor,
		*pg.Node_JsonObjectAgg, *pg.Node_JsonArrayAgg, *pg.Node_JsonFuncExpr, *pg.Node_JsonParseExpr,
		*pg.Node_JsonScalarExpr, *pg.Node_JsonSerializeExpr, *pg.Node_JsonIsPredicate, *pg.Node_JsonValueExpr:
		w.refer(CodeUnsupported, "SQL/JSON syntax is not supported: use the jsonb functions")
	case *pg.Node_CurrentOfExpr:
		w.refer(CodeUnsupported, "WHERE CURRENT OF is not supported")
	case *pg.Node_MultiAssignRef:
		w.expr(e.MultiAssignRef.Source, sc)
	default:
		w.unknownNode(n, "an expression")
	}
}

func (w *walker) indirection(n *pg.Node, sc *scope) {
	switch i := n.GetNode().(type) {
	case *pg.Node_AIndices:
		w.expr(i.AIndices.Lidx, sc)
		w.expr(i.AIndices.Uidx, sc)
	case *pg.Node_String_, *pg.Node_AStar:
		// Field selection reads the composite value already counted.
	default:
		w.unknownNode(n, "subscript")
	}
}

func (w *walker) columnRefNode(cr *pg.ColumnRef, sc *scope) {
	var names []string
	star := false
	for i, f := range cr.Fields {
		switch v := f.GetNode().(type) {
		case *pg.Node_String_:
			names = append(names, v.String_.Sval)
		case *pg.Node_AStar:
			if i != len(cr.Fields)-1 {
				w.unknownNode(f, "column reference")
				return
			}
			star = true
		default:
			w.unknownNode(f, "column reference")
			return
		}
	}
	if star {
		w.star(names, sc)
		return
	}
	w.columnRef(names, sc)
}

// star expands * (current level) or rel.* against the catalog.
func (w *walker) star(qual []string, sc *scope) {
	if len(qual) == 0 {
		for _, it := range sc.items {
			w.readAll(it)
		}
		return
	}
	it := w.lookupItem(qual, sc)
	if it == nil {
		w.refer(CodeUnknownColumn, "%s.* does not name a relation in scope", strings.Join(quoteAll(qual), "."))
		return
	}
	w.readAll(it)
}

func (w *walker) readAll(it *rte) {
	if it.table != nil {
		w.read(it.table, it.table.ColumnNames()...)
	}
	for _, j := range it.join {
		w.readAll(j)
	}
}

// lookupItem finds the range entry a qualifier names, innermost level first.
func (w *walker) lookupItem(qual []string, sc *scope) *rte {
	for s := sc; s != nil; s = s.parent {
		for _, it := range s.items {
			switch len(qual) {
			case 1:
				if it.name == qual[0] {
					return it
				}
			case 2:
				if it.table != nil && it.table.Name.Schema == qual[0] && it.table.Name.Name == qual[1] && it.name == it.table.Name.Name {
					return it
				}
			}
		}
	}
	return nil
}

// columnRef attributes a column reference to the table(s) it may read.
// Attribution errs toward more reads, never fewer: an ambiguity resolves to
// every table the name could reach.
func (w *walker) columnRef(names []string, sc *scope) {
	if len(names) > 0 && systemColumns[names[len(names)-1]] {
		col := names[len(names)-1]
		// Where the catalog cannot name a relation's columns (a function
		// in FROM), a system column would be counted as the function's,
		// and PostgreSQL gives it to a table that is written as itself: its
		// place in the heap and its transaction ids depend on rows and
		// columns outside the bound (invariant 10). No catalog column has
		// such a name; an output named like one refers too.
		w.refer(CodeUnknownColumn, "%s is a system column, which no statement may read", QuoteIdent(col))
		return
	}
	switch len(names) {
	case 1:
		col := names[0]
		for s := sc; s != nil; s = s.parent {
			var hits []*rte
			maybe := false
			for _, it := range s.items {
				if it.has(col) {
					hits = append(hits, it)
				} else if it.unknown {
					maybe = true
				}
			}
			if len(hits) > 0 {
				for _, h := range hits {
					w.readColumn(h, col)
				}
				return
			}
			if maybe {
				// A relation with unknown columns might supply it; so might
				// any table further out. Count it as read from all of them.
				for o := s; o != nil; o = o.parent {
					for _, it := range o.items {
						if it.table != nil && it.table.Has(col) {
							w.read(it.table, col)
						}
					}
				}
				// And if no relation supplies it after all, PostgreSQL
				// reads it as a whole-row reference to the relation of
				// that name (c in SELECT c::text FROM customers c,
				// generate_series(1, 1) g), which reads every column.
				if it := w.lookupItem(names, sc); it != nil {
					w.readAll(it)
				}
				return
			}
		}
		// Not a column: a whole-row reference to a relation reads every column.
		if it := w.lookupItem(names, sc); it != nil {
			w.readAll(it)
			return
		}
		w.refer(CodeUnknownColumn, "column %s does not exist in any relation in scope", QuoteIdent(col))
	case 2, 3:
		qual, col := names[:len(names)-1], names[len(names)-1]
		it := w.lookupItem(qual, sc)
		if it == nil {
			w.refer(CodeUnknownColumn, "%s does not name a relation in scope", strings.Join(quoteAll(qual), "."))
			return
		}
		if it.table != nil && !it.table.Has(col) {
			w.refer(CodeUnknownColumn, "column %s does not exist in %s", QuoteIdent(col), it.table.Name)
			return
		}
		if !it.has(col) && !it.unknown {
			w.refer(CodeUnknownColumn, "column %s.%s does not exist", QuoteIdent(qual[len(qual)-1]), QuoteIdent(col))
			return
		}
		if !it.has(col) {
			// Perhaps no column of it: then PostgreSQL reads rel.f as
			// f(rel), a function of the whole row (j.to_jsonb of a join
			// with a function in it reads every column of the join).
			w.readAll(it)
		}
		w.readColumn(it, col)
	default:
		w.refer(CodeUnknownColumn, "column reference %s has too many parts", strings.Join(quoteAll(names), "."))
	}
}

// systemColumns are PostgreSQL's system columns, which every table has
// and no table may name a column of its own after.
var systemColumns = map[string]bool{"ctid": true, "xmin": true, "xmax": true, "cmin": true, "cmax": true, "tableoid": true}

func (w *walker) readColumn(it *rte, col string) {
	if it.table != nil {
		w.read(it.table, col)
		return
	}
	for _, j := range it.join {
		if j.has(col) || j.unknown {
			w.readColumn(j, col)
		}
	}
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = QuoteIdent(n)
	}
	return out
}

func stringList(nodes []*pg.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if s := n.GetString_(); s != nil {
			out = append(out, s.Sval)
		}
	}
	return out
}

func (w *walker) funcCall(fc *pg.FuncCall, sc *scope) {
	names := stringList(fc.Funcname)
	if len(names) != len(fc.Funcname) || len(names) == 0 {
		w.refer(CodeFunctionNotAllowed, "a function with an unreadable name")
	} else {
		w.function(names)
	}
	for _, a := range fc.Args {
		w.expr(a, sc)
	}
	for _, o := range fc.AggOrder {
		if sb := o.GetSortBy(); sb != nil {
			if len(sb.UseOp) > 0 {
				w.operator(sb.UseOp)
			}
			w.expr(sb.Node, sc)
		} else {
			w.expr(o, sc)
		}
	}
	w.expr(fc.AggFilter, sc)
	if fc.Over != nil {
		w.windowDef(fc.Over, sc, nil)
	}
}

func (w *walker) windowDef(wd *pg.WindowDef, sc *scope, n *pg.Node) {
	if wd == nil {
		if n != nil {
			w.unknownNode(n, "WINDOW")
		}
		return
	}
	for _, p := range wd.PartitionClause {
		w.expr(p, sc)
	}
	for _, o := range wd.OrderClause {
		if sb := o.GetSortBy(); sb != nil {
			if len(sb.UseOp) > 0 {
				w.operator(sb.UseOp)
			}
			w.expr(sb.Node, sc)
		} else {
			w.expr(o, sc)
		}
	}
	w.expr(wd.StartOffset, sc)
	w.expr(wd.EndOffset, sc)
}

func (w *walker) function(names []string) {
	name := strings.Join(names, ".")
	w.funcs[name] = true
	if len(names) == 2 && names[0] != "pg_catalog" || len(names) > 2 {
		w.refer(CodeFunctionNotAllowed, "function %s is outside pg_catalog", strings.Join(quoteAll(names), "."))
		return
	}
	base := names[len(names)-1]
	if !AllowedFunction(base) {
		w.refer(CodeFunctionNotAllowed, "function %s is not on the allow-list of side-effect-free built-ins", QuoteIdent(base))
	}
}

func (w *walker) aExpr(a *pg.A_Expr) {
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP, pg.A_Expr_Kind_AEXPR_OP_ANY, pg.A_Expr_Kind_AEXPR_OP_ALL,
		pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT, pg.A_Expr_Kind_AEXPR_NULLIF,
		pg.A_Expr_Kind_AEXPR_IN, pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE, pg.A_Expr_Kind_AEXPR_SIMILAR,
		pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN, pg.A_Expr_Kind_AEXPR_BETWEEN_SYM,
		pg.A_Expr_Kind_AEXPR_NOT_BETWEEN_SYM:
		w.operator(a.Name)
	default:
		w.refer(CodeUnknownNode, "the checker does not know the expression kind %s", a.Kind)
	}
}

func (w *walker) operator(name []*pg.Node) {
	parts := stringList(name)
	if len(parts) != len(name) || len(parts) == 0 {
		w.refer(CodeOperatorNotAllowed, "an operator with an unreadable name")
		return
	}
	op := parts[len(parts)-1]
	w.ops[strings.Join(parts, ".")] = true
	if len(parts) > 2 || len(parts) == 2 && parts[0] != "pg_catalog" {
		w.refer(CodeOperatorNotAllowed, "operator %s is outside pg_catalog", strings.Join(parts, "."))
		return
	}
	// BETWEEN and friends carry their keyword as the name.
	switch strings.ToUpper(op) {
	case "BETWEEN", "NOT BETWEEN", "BETWEEN SYMMETRIC", "NOT BETWEEN SYMMETRIC":
		return
	}
	if !allowedOperators[op] {
		w.refer(CodeOperatorNotAllowed, "operator %s is not on the allow-list", op)
	}
}

func (w *walker) typeName(tn *pg.TypeName, sc *scope) {
	if tn == nil {
		return
	}
	names := stringList(tn.Names)
	if len(names) != len(tn.Names) || len(names) == 0 {
		w.refer(CodeTypeNotAllowed, "a type with an unreadable name")
		return
	}
	if tn.PctType || tn.Setof {
		w.refer(CodeTypeNotAllowed, "%%TYPE and SETOF are not allowed in casts")
	}
	if len(names) > 2 || len(names) == 2 && names[0] != "pg_catalog" {
		w.refer(CodeTypeNotAllowed, "type %s is outside pg_catalog", strings.Join(quoteAll(names), "."))
	} else if base := names[len(names)-1]; !allowedTypes[base] {
		w.refer(CodeTypeNotAllowed, "cast to type %s is not allowed", QuoteIdent(base))
	}
	for _, m := range tn.Typmods {
		// PostgreSQL takes only constants here (it rejects anything else at
		// analysis), and the deparser drops what is not a constant, so the
		// canonical text would differ from the checked statement.
		if m.GetAConst() == nil {
			w.refer(CodeTypeNotAllowed, "type modifiers of %s must be constants", QuoteIdent(names[len(names)-1]))
			continue
		}
		w.expr(m, sc)
	}
}

func (w *walker) sqlValueFunction(f *pg.SQLValueFunction) {
	switch f.Op {
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME,
		pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP,
		pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N, pg.SQLValueFunctionOp_SVFOP_LOCALTIME,
		pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP,
		pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
		w.funcs[strings.ToLower(strings.TrimPrefix(f.Op.String(), "SVFOP_"))] = true
	default:
		w.refer(CodeFunctionNotAllowed, "%s reveals session state and is not allowed", strings.TrimPrefix(f.Op.String(), "SVFOP_"))
	}
}
