package sqlcheck

import (
	"slices"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ConstraintKind is what a Constraint is.
type ConstraintKind string

// The kinds of Constraint.
const (
	ConstraintCheck      ConstraintKind = "check"
	ConstraintUnique     ConstraintKind = "unique"
	ConstraintPrimaryKey ConstraintKind = "primary key"
	ConstraintExclusion  ConstraintKind = "exclusion"
	ConstraintForeignKey ConstraintKind = "foreign key"
	ConstraintTrigger    ConstraintKind = "trigger"
)

// Constraint is something the target evaluates on a write to a table,
// beyond the write itself: a check, unique (a unique constraint or
// index), primary key, exclusion or foreign key constraint, or a trigger.
// Whether a write succeeds can then depend on values the writer was not
// allowed to read; compile lints that (bound.Compile). A not-null
// constraint reads only the column it constrains and is not listed.
type Constraint struct {
	Kind ConstraintKind `json:"kind"`
	Name string         `json:"name"`
	// Columns are the columns of the table it reads: a check's columns; a
	// unique, primary key or exclusion constraint's key columns with those
	// its expressions and predicate read (not INCLUDE columns); a foreign
	// key's referencing columns, in key order; a trigger's UPDATE OF
	// columns (none: it fires on an update of any column).
	Columns []string `json:"columns"`
	// RefTable and RefColumns are a foreign key's referenced table and
	// columns, in key order.
	RefTable   *TableName `json:"ref_table,omitempty"`
	RefColumns []string   `json:"ref_columns,omitempty"`
	// OnDelete and OnUpdate are a foreign key's actions: "no action",
	// "restrict", "cascade", "set null" or "set default".
	OnDelete string `json:"on_delete,omitempty"`
	OnUpdate string `json:"on_update,omitempty"`
	// Events are the operations that fire a trigger: "insert", "update",
	// "delete".
	Events []string `json:"events,omitempty"`
	// NotValid marks a check not validated on the rows already in the
	// table (ALTER TABLE ... NOT VALID): an update of such a row fails
	// whatever it writes.
	NotValid bool `json:"not_valid,omitempty"`
	// Def is its definition, as PostgreSQL prints it when the catalog is
	// read from a live target (pg_get_constraintdef, pg_get_indexdef,
	// pg_get_triggerdef), deparsed from the DDL otherwise.
	Def string `json:"def"`
}

// Fires reports whether a trigger fires on op when a statement sets the
// columns written (an update trigger with UPDATE OF columns fires only
// when one of them is set).
func (c *Constraint) Fires(op Op, written []string) bool {
	if c.Kind != ConstraintTrigger || !slices.Contains(c.Events, string(op)) {
		return false
	}
	if op != OpUpdate || len(c.Columns) == 0 {
		return true
	}
	for _, w := range written {
		if slices.Contains(c.Columns, w) {
			return true
		}
	}
	return false
}

// Checks reports whether a foreign key's action on op (a delete or an
// update of the referenced row) is a check, NO ACTION or RESTRICT, that
// fails the write when a row references it, rather than an action that
// changes the referencing rows.
func (c *Constraint) Checks(op Op) bool {
	a := c.OnDelete
	if op == OpUpdate {
		a = c.OnUpdate
	}
	return c.Kind == ConstraintForeignKey && (a == "no action" || a == "restrict")
}

// FKAction names a foreign key action by its pg_constraint code
// (confdeltype, confupdtype), "" for an unknown code.
func FKAction(code string) string {
	switch code {
	case "a":
		return "no action"
	case "r":
		return "restrict"
	case "c":
		return "cascade"
	case "n":
		return "set null"
	case "d":
		return "set default"
	}
	return ""
}

// ForeignKeyTo is a foreign key of Table that references another table.
type ForeignKeyTo struct {
	Table      TableName
	Constraint *Constraint
}

// ForeignKeysTo lists the foreign keys, of every table of the catalog,
// that reference the table n, sorted by the referencing table's name.
func (c *Catalog) ForeignKeysTo(n TableName) []ForeignKeyTo {
	var out []ForeignKeyTo
	for _, t := range c.Tables() {
		for i := range t.Constraints {
			k := &t.Constraints[i]
			if k.Kind == ConstraintForeignKey && k.RefTable != nil && *k.RefTable == n {
				out = append(out, ForeignKeyTo{Table: t.Name, Constraint: k})
			}
		}
	}
	return out
}

// ddlConstraints reads the constraints and triggers of a DDL file onto
// its tables: those in CREATE TABLE, ALTER TABLE ... ADD CONSTRAINT,
// CREATE UNIQUE INDEX and CREATE TRIGGER. A statement naming a table the
// file does not create is skipped. Names PostgreSQL would choose are
// given to constraints the DDL leaves unnamed (without the number it adds
// on a collision).
func ddlConstraints(stmts []*pg.RawStmt, tables []Table, qualify func(*pg.RangeVar) TableName) {
	idx := map[TableName]int{}
	for i, t := range tables {
		idx[t.Name] = i
	}
	add := func(rv *pg.RangeVar, k Constraint) {
		if rv == nil {
			return
		}
		if i, ok := idx[qualify(rv)]; ok {
			tables[i].Constraints = append(tables[i].Constraints, k)
		}
	}
	for _, raw := range stmts {
		n := raw.GetStmt()
		switch {
		case n.GetCreateStmt() != nil:
			cs := n.GetCreateStmt()
			if cs.Relation == nil {
				continue
			}
			for _, elt := range cs.TableElts {
				if cd := elt.GetColumnDef(); cd != nil {
					for _, cn := range cd.Constraints {
						if k, ok := ddlConstraint(cs.Relation, cn.GetConstraint(), cd.Colname, qualify); ok {
							add(cs.Relation, k)
						}
					}
				} else if k, ok := ddlConstraint(cs.Relation, elt.GetConstraint(), "", qualify); ok {
					add(cs.Relation, k)
				}
			}
		case n.GetAlterTableStmt() != nil:
			at := n.GetAlterTableStmt()
			for _, cmd := range at.Cmds {
				c := cmd.GetAlterTableCmd()
				if c == nil || c.Subtype != pg.AlterTableType_AT_AddConstraint {
					continue
				}
				if k, ok := ddlConstraint(at.Relation, c.Def.GetConstraint(), "", qualify); ok {
					add(at.Relation, k)
				}
			}
		case n.GetIndexStmt() != nil:
			is := n.GetIndexStmt()
			if !is.Unique || is.Relation == nil {
				continue
			}
			var cols []string
			for _, p := range is.IndexParams {
				ie := p.GetIndexElem()
				if ie == nil {
					continue
				}
				if ie.Name != "" {
					cols = append(cols, ie.Name)
				} else if ie.Expr != nil {
					cols = append(cols, columnRefs(ie.Expr)...)
				}
			}
			if is.WhereClause != nil {
				cols = append(cols, columnRefs(is.WhereClause)...)
			}
			name := is.Idxname
			if name == "" {
				name = is.Relation.Relname + "_" + strings.Join(uniqueStrings(cols), "_") + "_idx"
			}
			add(is.Relation, Constraint{Kind: ConstraintUnique, Name: name, Columns: uniqueStrings(cols), Def: deparseStmt(n)})
		case n.GetCreateTrigStmt() != nil:
			ct := n.GetCreateTrigStmt()
			var events []string
			for _, e := range []struct {
				bit  int32
				name string
			}{{1 << 2, "insert"}, {1 << 4, "update"}, {1 << 3, "delete"}} {
				if ct.Events&e.bit != 0 {
					events = append(events, e.name)
				}
			}
			if len(events) == 0 {
				continue // TRUNCATE only
			}
			var cols []string
			for _, c := range ct.Columns {
				if s := c.GetString_(); s != nil {
					cols = append(cols, s.Sval)
				}
			}
			add(ct.Relation, Constraint{Kind: ConstraintTrigger, Name: ct.Trigname, Columns: uniqueStrings(cols), Events: events, Def: deparseStmt(n)})
		}
	}
}

// ddlConstraint turns one constraint node of table rv (of column col,
// when it is a column constraint) into a Constraint; not-null, default
// and the other column properties are not constraints here.
func ddlConstraint(rv *pg.RangeVar, c *pg.Constraint, col string, qualify func(*pg.RangeVar) TableName) (Constraint, bool) {
	if c == nil || rv == nil {
		return Constraint{}, false
	}
	var k Constraint
	// A table-level copy, for the definition: a column constraint names
	// no columns.
	def := &pg.Constraint{Contype: c.Contype, RawExpr: c.RawExpr, Keys: c.Keys, Including: c.Including,
		Exclusions: c.Exclusions, AccessMethod: c.AccessMethod, WhereClause: c.WhereClause, Pktable: c.Pktable,
		FkAttrs: c.FkAttrs, PkAttrs: c.PkAttrs, FkMatchtype: c.FkMatchtype, FkUpdAction: c.FkUpdAction,
		FkDelAction: c.FkDelAction, SkipValidation: c.SkipValidation, Deferrable: c.Deferrable, Initdeferred: c.Initdeferred}
	colNode := func() []*pg.Node { return []*pg.Node{pg.MakeStrNode(col)} }
	switch c.Contype {
	case pg.ConstrType_CONSTR_CHECK:
		k = Constraint{Kind: ConstraintCheck, Columns: uniqueStrings(columnRefs(c.RawExpr)), NotValid: c.SkipValidation}
		suffix := "check"
		if len(k.Columns) == 1 {
			suffix = k.Columns[0] + "_check"
		}
		k.Name = rv.Relname + "_" + suffix
	case pg.ConstrType_CONSTR_PRIMARY, pg.ConstrType_CONSTR_UNIQUE:
		k.Kind, k.Name = ConstraintUnique, rv.Relname+"_"
		if c.Contype == pg.ConstrType_CONSTR_PRIMARY {
			k.Kind = ConstraintPrimaryKey
		}
		if col != "" {
			def.Keys = colNode()
		}
		k.Columns = uniqueStrings(strNodes(def.Keys))
		if k.Kind == ConstraintPrimaryKey {
			k.Name += "pkey"
		} else {
			k.Name += strings.Join(append(slices.Clone(k.Columns), strNodes(c.Including)...), "_") + "_key"
		}
	case pg.ConstrType_CONSTR_EXCLUSION:
		var cols, named []string
		for _, e := range c.Exclusions {
			// Each element is a list: the index element, then the operator.
			if l := e.GetList(); l != nil && len(l.Items) > 0 {
				if ie := l.Items[0].GetIndexElem(); ie != nil {
					if ie.Name != "" {
						cols, named = append(cols, ie.Name), append(named, ie.Name)
					} else if ie.Expr != nil {
						cols = append(cols, columnRefs(ie.Expr)...)
					}
				}
			}
		}
		if c.WhereClause != nil {
			cols = append(cols, columnRefs(c.WhereClause)...)
		}
		k = Constraint{Kind: ConstraintExclusion, Columns: uniqueStrings(cols)}
		k.Name = rv.Relname + "_" + strings.Join(named, "_") + "_excl"
	case pg.ConstrType_CONSTR_FOREIGN:
		if c.Pktable == nil {
			return Constraint{}, false
		}
		if col != "" {
			def.FkAttrs = colNode()
		}
		ref := qualify(c.Pktable)
		k = Constraint{Kind: ConstraintForeignKey, Columns: strNodes(def.FkAttrs), RefTable: &ref, RefColumns: strNodes(c.PkAttrs),
			OnDelete: FKAction(c.FkDelAction), OnUpdate: FKAction(c.FkUpdAction)}
		k.Name = rv.Relname + "_" + strings.Join(k.Columns, "_") + "_fkey"
	default:
		return Constraint{}, false
	}
	if c.Conname != "" {
		k.Name = c.Conname
	}
	k.Def = deparseConstraint(rv, def)
	return k, true
}

// deparseConstraint renders a table constraint as PostgreSQL's
// pg_get_constraintdef does, without its name: "CHECK (a <= b)".
func deparseConstraint(rv *pg.RangeVar, c *pg.Constraint) string {
	stmt := &pg.Node{Node: &pg.Node_AlterTableStmt{AlterTableStmt: &pg.AlterTableStmt{
		Relation: rv, Objtype: pg.ObjectType_OBJECT_TABLE,
		Cmds: []*pg.Node{{Node: &pg.Node_AlterTableCmd{AlterTableCmd: &pg.AlterTableCmd{
			Subtype: pg.AlterTableType_AT_AddConstraint, Behavior: pg.DropBehavior_DROP_RESTRICT,
			Def: &pg.Node{Node: &pg.Node_Constraint{Constraint: c}},
		}}}},
	}}}
	s := deparseStmt(stmt)
	if i := strings.Index(s, " ADD "); i >= 0 {
		return s[i+len(" ADD "):]
	}
	return s
}

// deparseStmt renders one statement, or "" when the deparser cannot.
func deparseStmt(n *pg.Node) string {
	s, err := pg.Deparse(&pg.ParseResult{Version: ParserVersion, Stmts: []*pg.RawStmt{{Stmt: n}}})
	if err != nil {
		return ""
	}
	return s
}

// columnRefs lists the column names an expression of one table reads, in
// order of appearance (a check, an index expression or predicate reads
// only its own table, so the last name of a reference is the column).
func columnRefs(n *pg.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	Visit(n.ProtoReflect(), func(m protoreflect.Message) bool {
		cr, ok := m.Interface().(*pg.ColumnRef)
		if !ok || len(cr.Fields) == 0 {
			return true
		}
		if s := cr.Fields[len(cr.Fields)-1].GetString_(); s != nil {
			out = append(out, s.Sval)
		}
		return false
	})
	return out
}

func strNodes(ns []*pg.Node) []string {
	var out []string
	for _, n := range ns {
		if s := n.GetString_(); s != nil {
			out = append(out, s.Sval)
		}
	}
	return out
}

// uniqueStrings keeps the first occurrence of each string, in order.
func uniqueStrings(ss []string) []string {
	out := []string{}
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
