package pilot

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// GuardColumn names the trailing RETURNING column the Pilot adds to a
// write to check its new rows and cap its count; it is stripped from what
// the agent sees.
const GuardColumn = "harbormaster_guard"

// Guarded is a statement with its guards added at the tree level.
type Guarded struct {
	// SQL is deparsed from the guarded tree: the only text sent to the target.
	SQL  string
	Kind sqlcheck.Op
	// MaxRows is the exact cap: rows affected for writes, rows returned for
	// reads (a read past it is truncated; a write past it rolls back).
	MaxRows int64
	// Hidden is true when the last RETURNING column is the guard column.
	Hidden bool
	// Returning is true when the statement returns rows.
	Returning bool
	// ImageSQL is SQL with one more RETURNING column, to_jsonb of the new
	// row, for a rehearsal's after images (UPDATE and INSERT).
	ImageSQL string
	// BeforeSQL selects the rows an UPDATE or DELETE reaches, with the same
	// guards, as to_jsonb images: the rehearsal's before images, and what the
	// surveyed path compares at execution.
	BeforeSQL string
	// Written is the columns an INSERT or UPDATE sets: what the surveyed
	// path compares of the after images at execution (AfterDigest).
	Written []string
	// Views are the fence views the statement reads through, which must
	// exist in the target before it runs (Pilot.ensureViews).
	Views []FenceView
	// FoldedSQL is a write folded into one statement with its row count,
	// max_rows and receipt (WithFold; fold.go).
	FoldedSQL string
	// FoldedGenerationSQL is FoldedSQL asking the target's catalog
	// generation instead of its foreign key question (WithGeneration;
	// cascade.go); GenerationParam is its parameter for the generation at
	// which CascadeSQL, the question, was last answered "no". Empty and 0
	// for a write with no such question.
	FoldedGenerationSQL string
	GenerationParam     int
	CascadeSQL          string
}

func (g *Guarded) addView(v FenceView) {
	for _, have := range g.Views {
		if have.Name == v.Name {
			return
		}
	}
	g.Views = append(g.Views, v)
}

// ErrGuard is wrapped by errors building guards; the statement refers.
var ErrGuard = errors.New("cannot build guards")

// BuildGuards adds the bound's fences, checks and caps to an analyzed
// statement that the static check decided conforms or survey. It mutates
// a's tree, which must be a fresh parse owned by the caller.
//
//   - every FROM/JOIN/USING reference to a fenced table, anywhere in the
//     tree, is replaced by the Pilot's security-barrier view of its
//     select-rule fence (views.go), read as a subquery of the rule's
//     columns and aliased as the reference was, so nothing the agent wrote
//     is evaluated on a row outside the read fence, and no column the rule
//     does not list is in what it reads;
//   - the target of an UPDATE or DELETE goes through the view of its read
//     fence (or, when the statement reads nothing of it, of its write
//     fence), and the write fence is a guard that raises on any row the
//     statement's own WHERE matched but the fence does not admit:
//     (w) AND CASE WHEN (w) THEN CASE WHEN (fence) THEN true ELSE
//     harbormaster.fence_violation('fence') END ELSE false END;
//   - every write returns one more column (GuardColumn), which raises on
//     any new row of an INSERT or UPDATE that fails the rule's check, and
//     as the (max_rows+1)-th row is written (rowcap.go);
//   - a SELECT is limited to max_rows+1 rows (the extra row marks truncation).
func BuildGuards(a *sqlcheck.Analysis, d sqlcheck.Decision, b *bound.Bound, cat *sqlcheck.Catalog, opts ...GuardOption) (*Guarded, error) {
	var o guardOptions
	for _, opt := range opts {
		opt(&o)
	}
	if d.Outcome != sqlcheck.Conforms && d.Outcome != sqlcheck.Survey {
		return nil, fmt.Errorf("%w: the statement does not conform", ErrGuard)
	}
	stmt := a.Stmt()
	if stmt == nil || a.Facts == nil {
		return nil, fmt.Errorf("%w: no statement", ErrGuard)
	}
	readRule := map[sqlcheck.TableName]bound.Rule{}
	var writeRule *bound.Rule
	for _, u := range d.Uses {
		if u.Rule < 0 || u.Rule >= len(b.Rules) {
			return nil, fmt.Errorf("%w: rule %d out of range", ErrGuard, u.Rule)
		}
		r := b.Rules[u.Rule]
		if u.Op == sqlcheck.OpSelect {
			readRule[u.Table] = r
		} else {
			rr := r
			writeRule = &rr
		}
	}
	g := &Guarded{Kind: a.Facts.Kind, Written: append([]string(nil), a.Facts.Written...)}
	// The foreign key question of an UPDATE or DELETE, as a node in the
	// tree and as SQL (WithGeneration).
	var cascade *pg.Node
	var cascadeSQL string
	// Before any reference takes an alias of the Pilot's (a fence view, a
	// subquery of the rule's columns), which a column written with its
	// schema (public.orders.id) would no longer match.
	if err := unqualifyColumns(stmt, cat); err != nil {
		return nil, err
	}
	if err := pinFromColumns(stmt, a.Facts.Target, cat); err != nil {
		return nil, err
	}
	fence := func(expr string, t sqlcheck.TableName, alias string) (*pg.Node, error) {
		tbl, ok := cat.Table(t)
		if !ok {
			return nil, fmt.Errorf("%w: table %s left the catalog", ErrGuard, t)
		}
		node, err := o.cache.compile(expr, tbl, cat)
		if err != nil {
			return nil, err
		}
		if alias != "" {
			qualify(node.ProtoReflect(), alias)
		}
		return node, nil
	}

	// Reads: every reference to a fenced table goes through the Pilot's
	// security-barrier view of that fence (DESIGN.md section 6 step 3): the
	// planner evaluates the view's fence before anything the agent wrote,
	// and pushes below it only leakproof operators (an index on id = 3
	// still serves). The reference keeps its name as the alias, so the
	// agent's column references resolve unchanged.
	useView := func(rv *pg.RangeVar, t sqlcheck.TableName, expr string) error {
		v, err := o.cache.view(expr, t, rv.Inh, cat)
		if err != nil {
			return err
		}
		alias := rv.Relname
		if rv.Alias != nil && rv.Alias.Aliasname != "" {
			alias = rv.Alias.Aliasname
		}
		rv.Catalogname, rv.Schemaname, rv.Relname, rv.Inh = "", ViewSchema, v.Name, true
		rv.Alias = &pg.Alias{Aliasname: alias}
		g.addView(v)
		return nil
	}
	for _, ref := range a.Facts.References {
		if ref.Role != sqlcheck.RoleRead {
			// The written table as the check resolved it, schema and all:
			// the check resolves a name against the bound's catalog, where
			// a table outside the bound earlier on the search path (which
			// PostgreSQL would find first) does not exist.
			if ref.RangeVar != nil {
				ref.RangeVar.Schemaname = ref.Table.Schema
			}
			continue
		}
		r, ok := readRule[ref.Table]
		if !ok {
			return nil, fmt.Errorf("%w: no read rule for %s", ErrGuard, ref.Table)
		}
		if r.Fence == "" {
			// No fence: the table is read as a subquery of the rule's
			// columns, which the planner flattens. The target expands *,
			// t.* and whole-row references when the statement runs, and a
			// column added since the catalog was read is in no rule: it
			// must not be in what they expand to (invariant 10).
			if ref.Item != nil && ref.RangeVar != nil {
				if err := deriveColumns(ref, r, cat, nil); err != nil {
					return nil, err
				}
			}
			continue
		}
		if ref.RangeVar == nil || ref.Item == nil {
			return nil, fmt.Errorf("%w: cannot fence a reference to %s", ErrGuard, ref.Table)
		}
		if err := useView(ref.RangeVar, ref.Table, r.Fence); err != nil {
			return nil, err
		}
		// And the view, which holds every column of the table, is read as
		// a subquery of the rule's columns: a whole-row reference the
		// check misread (found in review: c::text beside a function in
		// FROM) still carries no column the rule does not list.
		view := &pg.RangeVar{Schemaname: ViewSchema, Relname: ref.RangeVar.Relname, Inh: true, Relpersistence: "p"}
		if err := deriveColumns(ref, r, cat, view); err != nil {
			return nil, err
		}
	}

	switch s := stmt.GetNode().(type) {
	case *pg.Node_SelectStmt:
		g.Returning = true
		g.MaxRows = -1
		for _, r := range readRule {
			if g.MaxRows < 0 || r.MaxRows < g.MaxRows {
				g.MaxRows = r.MaxRows
			}
		}
		if g.MaxRows < 0 {
			return nil, fmt.Errorf("%w: a read without a select rule", ErrGuard)
		}
		limitRows(s.SelectStmt, g.MaxRows+1)
	case *pg.Node_UpdateStmt, *pg.Node_DeleteStmt:
		if writeRule == nil {
			return nil, fmt.Errorf("%w: a write without a write rule", ErrGuard)
		}
		g.MaxRows = writeRule.MaxRows
		var rel *pg.RangeVar
		var where **pg.Node
		var returning *[]*pg.Node
		if u, ok := s.(*pg.Node_UpdateStmt); ok {
			rel, where, returning = u.UpdateStmt.Relation, &u.UpdateStmt.WhereClause, &u.UpdateStmt.ReturningList
		}
		if del, ok := s.(*pg.Node_DeleteStmt); ok {
			rel, where, returning = del.DeleteStmt.Relation, &del.DeleteStmt.WhereClause, &del.DeleteStmt.ReturningList
		}
		target := *a.Facts.Target
		alias := rel.Relname
		if rel.Alias != nil && rel.Alias.Aliasname != "" {
			alias = rel.Alias.Aliasname
		}
		w := *where
		// The rows the statement can reach go through a barrier too: the
		// read fence of the select rule it uses when it reads the target
		// (its WHERE, SET or RETURNING name columns), so nothing it wrote
		// sees a row it may not read; when it reads nothing of the target,
		// what the bound's select rules on the table let it read at all, so
		// a blind write (DELETE FROM t) neither counts nor moves rows it
		// cannot see; only where no select rule names the table, the write
		// fence. A row it can see but may not write raises the fence guard
		// below.
		barrier := writeRule.Fence
		if r, ok := readRule[target]; ok {
			barrier = r.Fence
		} else if f, ok := readableFence(b, target); ok {
			barrier = f
		}
		if barrier == "" {
			// The target is the table itself, whose * the target expands.
			var from []*pg.Node
			if u, ok := s.(*pg.Node_UpdateStmt); ok {
				from = u.UpdateStmt.FromClause
			}
			if del, ok := s.(*pg.Node_DeleteStmt); ok {
				from = del.DeleteStmt.UsingClause
			}
			if err := pinTargetColumns(stmt.ProtoReflect(), returning, from, target, alias, cat); err != nil {
				return nil, err
			}
		}
		if barrier != "" {
			// The target is then the Pilot's view, whose columns have no
			// defaults: SET c = DEFAULT would write NULL, not the table's
			// default, a statement other than the one checked.
			if u, ok := s.(*pg.Node_UpdateStmt); ok {
				for _, tl := range u.UpdateStmt.TargetList {
					if hasSetToDefault(tl.ProtoReflect()) {
						return nil, fmt.Errorf("%w: SET column = DEFAULT is not supported through a fence (write the value)", ErrGuard)
					}
				}
			}
			if err := useView(rel, target, barrier); err != nil {
				return nil, err
			}
		}
		if writeRule.Fence != "" && writeRule.Fence != barrier {
			f, err := fence(writeRule.Fence, target, alias)
			if err != nil {
				return nil, err
			}
			violation := violationCall("fence")
			check := caseWhen(f, boolConst(true), violation)
			if w == nil {
				w = check
			} else {
				w = and(w, caseWhen(proto.Clone(w).(*pg.Node), check, boolConst(false)))
			}
		}
		// A foreign key whose action would change rows of another table,
		// which no rule fences or counts (invariant 5), raises as the
		// statement runs: the target's own catalog is asked, so a key
		// added after the Pilot read its catalog is seen too.
		cascadeSQL = cascadeExists(a.Facts.Kind, target, a.Facts.Written)
		cg, err := cascadeGuard(cascadeSQL)
		if err != nil {
			return nil, err
		}
		cascade = cg
		*where = and(w, cg)
		g.Returning = len(*returning) > 0
		if g.Returning {
			g.MaxRows = returnedCap(g.MaxRows, readRule)
		}
		var check *pg.Node
		if writeRule.Check != "" {
			if check, err = fence(writeRule.Check, target, alias); err != nil {
				return nil, err
			}
		}
		*returning = append(*returning, guardColumn(check, g.MaxRows))
		g.Hidden = true
	case *pg.Node_InsertStmt:
		if writeRule == nil {
			return nil, fmt.Errorf("%w: a write without a write rule", ErrGuard)
		}
		g.MaxRows = writeRule.MaxRows
		ins := s.InsertStmt
		alias := ins.Relation.Relname
		if ins.Relation.Alias != nil && ins.Relation.Alias.Aliasname != "" {
			alias = ins.Relation.Alias.Aliasname
		}
		// Without a column list, the values go to the columns the check
		// gave them (the first of the bound's catalog): written out, so the
		// target fills exactly those, never a column the bound leaves out.
		if len(ins.Cols) == 0 && len(a.Facts.Implicit) > 0 {
			for _, c := range a.Facts.Implicit {
				ins.Cols = append(ins.Cols, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Name: c, Location: -1}}})
			}
		}
		// The target is the table itself, in scope in RETURNING only (ON
		// CONFLICT DO UPDATE is refused by the static check).
		if err := pinTargetColumns(nil, &ins.ReturningList, nil, *a.Facts.Target, alias, cat); err != nil {
			return nil, err
		}
		g.Returning = len(ins.ReturningList) > 0
		if g.Returning {
			g.MaxRows = returnedCap(g.MaxRows, readRule)
		}
		var check *pg.Node
		if writeRule.Check != "" {
			var err error
			if check, err = fence(writeRule.Check, *a.Facts.Target, alias); err != nil {
				return nil, err
			}
		}
		ins.ReturningList = append(ins.ReturningList, guardColumn(check, g.MaxRows))
		g.Hidden = true
	default:
		return nil, fmt.Errorf("%w: unexpected statement", ErrGuard)
	}
	sql, err := pg.Deparse(&pg.ParseResult{Version: sqlcheck.ParserVersion, Stmts: []*pg.RawStmt{{Stmt: stmt}}})
	if err != nil {
		return nil, fmt.Errorf("%w: deparse: %v", ErrGuard, err)
	}
	g.SQL = sql
	if o.fold && g.Kind != sqlcheck.OpSelect {
		if g.FoldedSQL, err = foldWrite(stmt, g, o.params); err != nil {
			return nil, fmt.Errorf("%w: fold: %v", ErrGuard, err)
		}
		if o.generation && cascade != nil {
			// The same fold asking the counter instead of the question:
			// its parameter follows the receipt's six.
			orig := &pg.Node{Node: cascade.Node}
			g.GenerationParam, g.CascadeSQL = o.params+7, cascadeSQL
			err := generationGuard(cascade, g.GenerationParam)
			if err == nil {
				g.FoldedGenerationSQL, err = foldWrite(stmt, g, o.params)
			}
			cascade.Node = orig.Node
			if err != nil {
				return nil, fmt.Errorf("%w: fold: %v", ErrGuard, err)
			}
		}
	}
	if !o.evidence {
		return g, nil
	}
	// The images show only what the agent may read, and the values it
	// writes: the panel that sees them decides what the agent observes, so
	// a column no rule lets it read must not reach it (invariant 10).
	beforeCols, afterCols := imageColumns(a.Facts.Target, readRule, g.Written)
	withImage := proto.Clone(stmt).(*pg.Node)
	if _, ok := afterImageColumn(withImage, afterCols); ok {
		if g.ImageSQL, err = deparse(withImage); err != nil {
			return nil, fmt.Errorf("%w: deparse: %v", ErrGuard, err)
		}
	}
	if _, before, err := beforeImageQuery(stmt, int(g.MaxRows)+1, beforeCols); err != nil {
		return nil, fmt.Errorf("%w: before images: %v", ErrGuard, err)
	} else {
		g.BeforeSQL = before
	}
	return g, nil
}

// deriveColumns replaces the FROM item of ref by (SELECT <the rule's
// columns, in the catalog's order> FROM from) AS alias, where from is the
// table itself (nil: a table without a fence) or its fence view, so that
// what the statement reads of the table is fixed by the catalog it was
// checked against and the rule it uses.
func deriveColumns(ref sqlcheck.Reference, r bound.Rule, cat *sqlcheck.Catalog, from *pg.RangeVar) error {
	tbl, ok := cat.Table(ref.Table)
	if !ok {
		return fmt.Errorf("%w: table %s left the catalog", ErrGuard, ref.Table)
	}
	listed := make(map[string]bool, len(r.Columns))
	for _, c := range r.Columns {
		listed[c] = true
	}
	var cols []sqlcheck.Column
	for _, c := range tbl.Columns {
		if listed[c.Name] {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		return fmt.Errorf("%w: the rule on %s lists no column the catalog has", ErrGuard, ref.Table)
	}
	rv := ref.RangeVar
	alias := rv.Relname
	if rv.Alias != nil {
		if len(rv.Alias.Colnames) > 0 {
			return fmt.Errorf("%w: a column alias list on %s", ErrGuard, ref.Table)
		}
		if rv.Alias.Aliasname != "" {
			alias = rv.Alias.Aliasname
		}
	}
	if from == nil {
		from = &pg.RangeVar{Schemaname: tbl.Name.Schema, Relname: tbl.Name.Name, Inh: rv.Inh, Relpersistence: "p"}
	}
	sel := &pg.SelectStmt{
		TargetList:  columnTargets("", cols),
		FromClause:  []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: from}}},
		LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT,
		Op:          pg.SetOperation_SETOP_NONE,
	}
	ref.Item.Node = &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
		Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}},
		Alias:    &pg.Alias{Aliasname: alias},
	}}
	return nil
}

// pinTargetColumns fixes the columns of a write target that is the table
// itself (no fence view stands in for it): the target expands *, t.* and
// whole-row references when the statement runs, and a column added since
// the Pilot read its catalog is in no rule, so it must not be in what they
// expand to (invariant 10). In the statement's own RETURNING list (*
// returning), * and alias.* become the catalog's columns, qualified by
// alias; a bare * beside FROM or USING items (from) is followed by item.*
// of each, which it expands too (each is the rule's columns already: a
// subquery, or a function's own); and any other whole-row reference to
// the target under scope (the
// statement; nil for the RETURNING list alone) (alias.*
// elsewhere, alias alone where the table has no such column, schema.table)
// are refused. A name that only looks like one (an inner alias of the
// same spelling) is refused too: failing closed costs a rewrite.
func pinTargetColumns(scope protoreflect.Message, returning *[]*pg.Node, from []*pg.Node, t sqlcheck.TableName, alias string, cat *sqlcheck.Catalog) error {
	tbl, ok := cat.Table(t)
	if !ok {
		return fmt.Errorf("%w: table %s left the catalog", ErrGuard, t)
	}
	star := func(n *pg.Node) (bare, qualified bool) {
		cr := n.GetResTarget().GetVal().GetColumnRef()
		if cr == nil || len(cr.Fields) == 0 || cr.Fields[len(cr.Fields)-1].GetAStar() == nil {
			return false, false
		}
		if len(cr.Fields) == 1 {
			return true, false
		}
		q := cr.Fields[0].GetString_()
		return false, len(cr.Fields) == 2 && q != nil && q.Sval == alias
	}
	var out []*pg.Node
	for _, n := range *returning {
		bare, qualified := star(n)
		switch {
		case bare:
			out = append(out, columnTargets(alias, tbl.Columns)...)
			for _, item := range from {
				names, ok := fromItemNames(item)
				if !ok {
					return fmt.Errorf("%w: RETURNING * beside this FROM or USING item (a join with USING or NATURAL, or one without an alias): name the columns to return, or give the item an alias and return alias.*", ErrGuard)
				}
				for _, name := range names {
					out = append(out, pg.MakeResTargetNodeWithVal(pg.MakeColumnRefNode([]*pg.Node{pg.MakeStrNode(name), {Node: &pg.Node_AStar{AStar: &pg.A_Star{}}}}, -1), -1))
				}
			}
		case qualified:
			out = append(out, columnTargets(alias, tbl.Columns)...)
		default:
			out = append(out, n)
		}
	}
	*returning = out
	if scope == nil {
		scope = (&pg.List{Items: out}).ProtoReflect()
	}
	var found string
	sqlcheck.Visit(scope, func(m protoreflect.Message) bool {
		cr, ok := m.Interface().(*pg.ColumnRef)
		if !ok || found != "" {
			return found == ""
		}
		var names []string
		for _, f := range cr.Fields {
			switch {
			case f.GetString_() != nil:
				names = append(names, f.GetString_().Sval)
			case f.GetAStar() != nil:
				names = append(names, "*")
			}
		}
		switch {
		case len(names) == 1 && names[0] == alias && !tbl.Has(alias),
			len(names) == 2 && names[0] == alias && names[1] == "*",
			len(names) == 2 && names[1] == alias && names[0] != alias:
			found = strings.Join(names, ".")
		}
		return false
	})
	if found != "" {
		return fmt.Errorf("%w: %s is a whole-row reference to %s, which is written as the table itself: name its columns", ErrGuard, found, t)
	}
	return nil
}

// fromItemNames are the names whose .* list, in order, the columns a bare
// * expands a FROM item to: its alias, a table's or a single function's
// own name, a join's sides. false when none does so exactly: a join with
// USING or NATURAL and no alias merges the columns it joins on, which its
// sides' .* would repeat, and ROWS FROM (...) without an alias has no
// name.
func fromItemNames(n *pg.Node) ([]string, bool) {
	switch it := n.GetNode().(type) {
	case *pg.Node_RangeVar:
		if it.RangeVar.Alias != nil && it.RangeVar.Alias.Aliasname != "" {
			return []string{it.RangeVar.Alias.Aliasname}, true
		}
		return []string{it.RangeVar.Relname}, true
	case *pg.Node_RangeSubselect:
		if it.RangeSubselect.Alias != nil && it.RangeSubselect.Alias.Aliasname != "" {
			return []string{it.RangeSubselect.Alias.Aliasname}, true
		}
	case *pg.Node_RangeFunction:
		rf := it.RangeFunction
		if rf.Alias != nil && rf.Alias.Aliasname != "" {
			return []string{rf.Alias.Aliasname}, true
		}
		if rf.IsRowsfrom || len(rf.Functions) != 1 {
			return nil, false
		}
		// PostgreSQL names an unaliased function item after the function.
		items := rf.Functions[0].GetList().GetItems()
		if len(items) == 0 {
			return nil, false
		}
		fc := items[0].GetFuncCall()
		if fc == nil || len(fc.Funcname) == 0 || fc.Funcname[len(fc.Funcname)-1].GetString_() == nil {
			return nil, false
		}
		return []string{fc.Funcname[len(fc.Funcname)-1].GetString_().Sval}, true
	case *pg.Node_JoinExpr:
		j := it.JoinExpr
		if j.Alias != nil && j.Alias.Aliasname != "" {
			return []string{j.Alias.Aliasname}, true
		}
		if j.IsNatural || len(j.UsingClause) > 0 || j.JoinUsingAlias != nil {
			return nil, false
		}
		l, ok := fromItemNames(j.Larg)
		if !ok {
			return nil, false
		}
		r, ok := fromItemNames(j.Rarg)
		if !ok {
			return nil, false
		}
		return append(l, r...), true
	}
	return nil, false
}

// readableFence is what the bound's select rules on table t let the
// grantee read: the OR of their fences ("" when one has none), and false
// when no select rule names t.
func readableFence(b *bound.Bound, t sqlcheck.TableName) (string, bool) {
	var fences []string
	found := false
	for _, r := range b.Rules {
		if r.Op != sqlcheck.OpSelect {
			continue
		}
		if rt, err := r.TableName(); err != nil || rt != t {
			continue
		}
		if r.Fence == "" {
			return "", true
		}
		found = true
		fences = append(fences, "("+r.Fence+")")
	}
	return strings.Join(fences, " OR "), found
}

// imageColumns is the columns a write's images show, sorted: before (the
// old values of the rows it reaches) only those the select rule for its
// target lists, never nil (nil would be the whole row), and after those
// and the columns the statement writes. The old value of a column the
// agent may write but not read never reaches the panel (invariant 10);
// the value the statement writes to it was written by the agent.
func imageColumns(target *sqlcheck.TableName, readRule map[sqlcheck.TableName]bound.Rule, written []string) (before, after []string) {
	set := map[string]bool{}
	if target != nil {
		if r, ok := readRule[*target]; ok {
			for _, c := range r.Columns {
				set[c] = true
			}
		}
	}
	before = sortedKeys(set)
	for _, c := range written {
		set[c] = true
	}
	return before, sortedKeys(set)
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// limitRows caps a SELECT at n rows: LIMIT n, or LIMIT LEAST(existing, n).
func limitRows(s *pg.SelectStmt, n int64) {
	lim := pg.MakeAConstIntNode(n, -1)
	if s.LimitCount == nil || s.LimitCount.GetAConst() != nil && s.LimitCount.GetAConst().Isnull {
		s.LimitCount = lim
		if s.LimitOption != pg.LimitOption_LIMIT_OPTION_WITH_TIES {
			s.LimitOption = pg.LimitOption_LIMIT_OPTION_COUNT
		}
		return
	}
	s.LimitCount = &pg.Node{Node: &pg.Node_MinMaxExpr{MinMaxExpr: &pg.MinMaxExpr{Op: pg.MinMaxOp_IS_LEAST, Args: []*pg.Node{s.LimitCount, lim}}}}
}

func and(a, b *pg.Node) *pg.Node {
	if a == nil {
		return b
	}
	return pg.MakeBoolExprNode(pg.BoolExprType_AND_EXPR, []*pg.Node{a, b}, -1)
}

func caseWhen(cond, then, otherwise *pg.Node) *pg.Node {
	return &pg.Node{Node: &pg.Node_CaseExpr{CaseExpr: &pg.CaseExpr{
		Args:      []*pg.Node{pg.MakeCaseWhenNode(cond, then, -1)},
		Defresult: otherwise,
		Location:  -1,
	}}}
}

func boolConst(b bool) *pg.Node {
	return &pg.Node{Node: &pg.Node_AConst{AConst: &pg.A_Const{Val: &pg.A_Const_Boolval{Boolval: &pg.Boolean{Boolval: b}}, Location: -1}}}
}

// guardColumn is the hidden last RETURNING column of a write: the row
// cap, behind the check when there is one (nil: none), so a row that
// fails the check raises for the check and is not counted.
func guardColumn(check *pg.Node, maxRows int64) *pg.Node {
	guard := rowCapCall(maxRows)
	if check != nil {
		guard = caseWhen(check, guard, violationCall("check"))
	}
	return pg.MakeResTargetNodeWithNameAndVal(GuardColumn, guard, -1)
}

// violationCall is harbormaster.fence_violation('reason'): volatile, so the
// planner cannot fold it away in an arm that is never taken.
func violationCall(reason string) *pg.Node {
	return pg.MakeFuncCallNode([]*pg.Node{pg.MakeStrNode("harbormaster"), pg.MakeStrNode("fence_violation")},
		[]*pg.Node{pg.MakeAConstStrNode(reason, -1)}, -1)
}

// qualify prefixes every unqualified column reference under m with alias.
// Fences and checks have no subqueries, so every column is the table's.
func qualify(m protoreflect.Message, alias string) {
	sqlcheck.Visit(m, func(m protoreflect.Message) bool {
		cr, ok := m.Interface().(*pg.ColumnRef)
		if ok && len(cr.Fields) == 1 {
			cr.Fields = append([]*pg.Node{pg.MakeStrNode(alias)}, cr.Fields...)
		}
		return !ok
	})
}

// unqualifyColumns rewrites schema.table.column (and schema.table.*) as
// table.column, where table is a catalog table that exactly one FROM item
// of the statement is named by: an unaliased reference to that very
// table, which is the item the static check resolved it to. Any other
// name (an alias, a CTE, a subquery) of the same spelling anywhere in the
// statement could capture table.column, so the statement refers instead;
// and so does a column qualified with a catalog name too.
func unqualifyColumns(stmt *pg.Node, cat *sqlcheck.Catalog) error {
	type named struct{ plain, other int }
	names := map[string]*named{}
	count := func(name string, plain bool) {
		n := names[name]
		if n == nil {
			n = &named{}
			names[name] = n
		}
		if plain {
			n.plain++
		} else {
			n.other++
		}
	}
	var refs []*pg.ColumnRef
	sqlcheck.Visit(stmt.ProtoReflect(), func(m protoreflect.Message) bool {
		switch x := m.Interface().(type) {
		case *pg.RangeVar:
			if x.Alias != nil && x.Alias.Aliasname != "" {
				count(x.Alias.Aliasname, false)
			} else {
				count(x.Relname, true)
			}
			return false
		case *pg.Alias:
			count(x.Aliasname, false)
			return false
		case *pg.CommonTableExpr:
			count(x.Ctename, false)
		case *pg.ColumnRef:
			if len(x.Fields) >= 3 || len(x.Fields) == 2 && x.Fields[1].GetAStar() != nil {
				refs = append(refs, x)
			}
			return false
		}
		return true
	})
	for _, cr := range refs {
		switch {
		case len(cr.Fields) == 2:
			continue // table.*: not schema-qualified
		case len(cr.Fields) > 3:
			return fmt.Errorf("%w: a column reference of %d parts", ErrGuard, len(cr.Fields))
		}
		schema, table := cr.Fields[0].GetString_(), cr.Fields[1].GetString_()
		if schema == nil || table == nil {
			return fmt.Errorf("%w: a column reference of 3 parts", ErrGuard)
		}
		if _, ok := cat.Table(sqlcheck.TableName{Schema: schema.Sval, Name: table.Sval}); !ok {
			continue // table.column.field: no schema in it
		}
		if n := names[table.Sval]; n == nil || n.plain != 1 || n.other != 0 {
			return fmt.Errorf("%w: %s.%s names a table that another name in the statement could stand for once the schema is dropped", ErrGuard, schema.Sval, table.Sval)
		}
		cr.Fields = cr.Fields[1:]
	}
	return nil
}

// hasSetToDefault reports whether the tree under m holds a DEFAULT.
func hasSetToDefault(m protoreflect.Message) bool {
	found := false
	sqlcheck.Visit(m, func(m protoreflect.Message) bool {
		_, ok := m.Interface().(*pg.SetToDefault)
		found = found || ok
		return !found
	})
	return found
}

// GuardOption tunes BuildGuards.
type GuardOption func(*guardOptions)

type guardOptions struct {
	evidence   bool
	cache      *ExprCache
	fold       bool
	params     int
	generation bool
}

// WithGeneration also builds FoldedGenerationSQL for a folded write
// (WithFold): it asks the target's catalog generation instead of its
// foreign key question, and raises when it moved since the question was
// last answered "no" (cascade.go). The target has
// harbormaster.catalog_generation.
func WithGeneration() GuardOption { return func(o *guardOptions) { o.generation = true } }

// WithFold also builds FoldedSQL for a write whose statement binds params
// parameters ($1..$params): the receipt's parameters follow them.
func WithFold(params int) GuardOption {
	return func(o *guardOptions) { o.fold, o.params = true, params }
}

// WithEvidence also builds the rehearsal's image queries (ImageSQL,
// BeforeSQL), which only rehearsals and the surveyed path need.
func WithEvidence() GuardOption { return func(o *guardOptions) { o.evidence = true } }

// WithExprCache reuses compiled fences and checks across statements.
func WithExprCache(c *ExprCache) GuardOption { return func(o *guardOptions) { o.cache = c } }

// ExprCache holds signed fences and checks compiled against one catalog, so
// each statement clones a parsed tree instead of parsing the text again. It
// is safe for concurrent use; a nil cache compiles every time.
type ExprCache struct {
	mu    sync.Mutex
	m     map[exprKey]*pg.Node
	views map[viewKey]FenceView
}

type exprKey struct {
	cat   *sqlcheck.Catalog
	table sqlcheck.TableName
	expr  string
}

// maxCachedExprs bounds the cache; it is cleared when full.
const maxCachedExprs = 4096

// compile returns a fresh copy of the expression's tree, owned by the caller.
func (c *ExprCache) compile(expr string, tbl *sqlcheck.Table, cat *sqlcheck.Catalog) (*pg.Node, error) {
	k := exprKey{cat, tbl.Name, expr}
	if c != nil {
		c.mu.Lock()
		n, ok := c.m[k]
		c.mu.Unlock()
		if ok {
			return proto.Clone(n).(*pg.Node), nil
		}
	}
	e, reasons := sqlcheck.CompileExpr(expr, tbl, cat)
	if len(reasons) > 0 {
		return nil, fmt.Errorf("%w: the signed expression %q no longer compiles: %s", ErrGuard, expr, reasons[0].Message)
	}
	if c != nil {
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxCachedExprs {
			c.m = map[exprKey]*pg.Node{}
		}
		c.m[k] = proto.Clone(e.Node).(*pg.Node)
		c.mu.Unlock()
	}
	return e.Node, nil
}

// returnedCap is the cap of a write that returns rows: what it returns is a
// read, and a read is capped at the smallest max_rows of the select rules
// it uses, so that cap holds as well as the write rule's (exactly: past it
// the write rolls back, it is never truncated).
func returnedCap(write int64, readRule map[sqlcheck.TableName]bound.Rule) int64 {
	for _, r := range readRule {
		if r.MaxRows > 0 && r.MaxRows < write {
			write = r.MaxRows
		}
	}
	return write
}

// pinFromColumns refuses, in an UPDATE with FROM items or a DELETE with
// USING items, an unqualified column reference in its SET list, WHERE or
// RETURNING (or a subquery of them) that names no column of the written
// table in the bound's catalog. The check resolved such a name to a FROM
// item, where the bound's catalog has no column of that name in the
// written table; but the target's written table (the table itself, or
// the Pilot's fence view of it) has every column, and a column of that
// name outside the bound makes PostgreSQL find it twice and fail where
// a target without it runs: the agent would learn the column exists
// (invariant 10). Qualified with the item's name, it resolves alike on
// every target.
func pinFromColumns(stmt *pg.Node, target *sqlcheck.TableName, cat *sqlcheck.Catalog) error {
	var items []*pg.Node
	var scope []*pg.Node
	switch s := stmt.GetNode().(type) {
	case *pg.Node_UpdateStmt:
		items = s.UpdateStmt.FromClause
		scope = append(append(append(scope, s.UpdateStmt.TargetList...), s.UpdateStmt.WhereClause), s.UpdateStmt.ReturningList...)
	case *pg.Node_DeleteStmt:
		items = s.DeleteStmt.UsingClause
		scope = append(append(scope, s.DeleteStmt.WhereClause), s.DeleteStmt.ReturningList...)
	default:
		return nil
	}
	if len(items) == 0 {
		return nil
	}
	if target == nil {
		return fmt.Errorf("%w: a write without a target", ErrGuard)
	}
	tbl, ok := cat.Table(*target)
	if !ok {
		return fmt.Errorf("%w: table %s left the catalog", ErrGuard, *target)
	}
	var found string
	for _, n := range scope {
		if n == nil || found != "" {
			continue
		}
		sqlcheck.Visit(n.ProtoReflect(), func(m protoreflect.Message) bool {
			if found != "" {
				return false
			}
			cr, ok := m.Interface().(*pg.ColumnRef)
			if !ok {
				return true
			}
			if len(cr.Fields) == 1 {
				if name := cr.Fields[0].GetString_(); name != nil && !tbl.Has(name.Sval) {
					found = name.Sval
				}
			}
			return false
		})
	}
	if found != "" {
		return fmt.Errorf("%w: the column %s is not one of %s's, beside the statement's FROM or USING items: qualify it with its item's name (x.%s)",
			ErrGuard, sqlcheck.QuoteIdent(found), target, sqlcheck.QuoteIdent(found))
	}
	return nil
}
