package sqlcheck

import (
	"fmt"
	"sort"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

// TableName is a schema-qualified relation name, exactly as PostgreSQL stores
// it (already case-folded or unquoted by the parser).
type TableName struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

// String renders the name as SQL, quoting each part only where needed.
func (t TableName) String() string { return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) }

// Column is one column of a catalog table.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// NotNull is set when the column has a NOT NULL constraint (read
	// from a live target; a schema file leaves it unset).
	NotNull bool `json:"not_null,omitempty"`
}

// Table is one relation of the target catalog.
type Table struct {
	Name    TableName `json:"name"`
	Columns []Column  `json:"columns"`
	// EstimatedRows is the planner's estimate (pg_class.reltuples) when the
	// catalog was read from a live database, or -1 when unknown. Lints use it.
	EstimatedRows int64 `json:"estimated_rows"`
	// Constraints are the table's check, unique, primary key, exclusion and
	// foreign key constraints and its triggers (Constraint), sorted by kind
	// and name when read from a live target, in DDL order from a schema
	// file. Lints use them.
	Constraints []Constraint `json:"constraints,omitempty"`

	index map[string]int
}

// Has reports whether the table has a column of exactly that name.
func (t *Table) Has(col string) bool {
	_, ok := t.index[col]
	return ok
}

// ColumnNames returns the column names in catalog order.
func (t *Table) ColumnNames() []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// Catalog is the set of relations a statement may name, and the pinned
// search path used to resolve unqualified names. A Catalog is immutable once
// built and safe for concurrent use.
type Catalog struct {
	tables     map[TableName]*Table
	searchPath []string
	// of says whose catalog it is, in reasons: "the target catalog", or a
	// bound's (Bounded).
	of string
}

// of is what reasons call the catalog.
func (c *Catalog) what() string {
	if c.of == "" {
		return "the target catalog"
	}
	return c.of
}

// DefaultSearchPath is the search path pinned when none is configured.
var DefaultSearchPath = []string{"public"}

// NewCatalog builds a catalog from tables. searchPath defaults to
// DefaultSearchPath when empty.
func NewCatalog(tables []Table, searchPath []string) (*Catalog, error) {
	if len(searchPath) == 0 {
		searchPath = DefaultSearchPath
	}
	c := &Catalog{tables: make(map[TableName]*Table, len(tables)), searchPath: append([]string(nil), searchPath...)}
	for i := range tables {
		t := tables[i]
		if t.Name.Schema == "" || t.Name.Name == "" {
			return nil, fmt.Errorf("sqlcheck: catalog: table %q has an empty schema or name", t.Name.String())
		}
		if _, dup := c.tables[t.Name]; dup {
			return nil, fmt.Errorf("sqlcheck: catalog: table %s listed twice", t.Name)
		}
		t.Columns = append([]Column(nil), t.Columns...)
		t.Constraints = append([]Constraint(nil), t.Constraints...)
		t.index = make(map[string]int, len(t.Columns))
		for j, col := range t.Columns {
			if _, dup := t.index[col.Name]; dup {
				return nil, fmt.Errorf("sqlcheck: catalog: table %s has column %q twice", t.Name, col.Name)
			}
			t.index[col.Name] = j
		}
		c.tables[t.Name] = &t
	}
	return c, nil
}

// SearchPath returns the pinned search path.
func (c *Catalog) SearchPath() []string { return append([]string(nil), c.searchPath...) }

// Table returns the table of that exact name.
func (c *Catalog) Table(n TableName) (*Table, bool) {
	t, ok := c.tables[n]
	return t, ok
}

// Tables returns every table, sorted by name.
func (c *Catalog) Tables() []*Table {
	out := make([]*Table, 0, len(c.tables))
	for _, t := range c.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name.Schema != out[j].Name.Schema {
			return out[i].Name.Schema < out[j].Name.Schema
		}
		return out[i].Name.Name < out[j].Name.Name
	})
	return out
}

// Resolve finds the table an unqualified (schema == "") or qualified name
// refers to, using the pinned search path.
func (c *Catalog) Resolve(schema, name string) (*Table, bool) {
	if schema != "" {
		return c.Table(TableName{schema, name})
	}
	for _, s := range c.searchPath {
		if t, ok := c.tables[TableName{s, name}]; ok {
			return t, true
		}
	}
	return nil, false
}

// WithoutEstimates is the catalog with every table's EstimatedRows
// unknown (-1) and its constraints' and triggers' definitions left out
// (their kinds, names and columns stay): the names and columns alone, for
// what is shown to someone who may not learn how many rows a table holds
// or what its constraints and triggers say.
func (c *Catalog) WithoutEstimates() *Catalog {
	out := &Catalog{tables: make(map[TableName]*Table, len(c.tables)), searchPath: c.searchPath}
	for n, t := range c.tables {
		cp := *t
		cp.EstimatedRows = -1
		cp.Constraints = make([]Constraint, len(t.Constraints))
		for i, k := range t.Constraints {
			k.Def = ""
			cp.Constraints[i] = k
		}
		out.tables[n] = &cp
	}
	return out
}

// Bounded is the catalog as a bound sees it: only the tables scope names,
// each with only the columns scope lists for it (in the table's own
// order, a name the table lacks skipped), the constraints over those
// columns alone, and no row estimates. The statement path checks an
// agent's statement against its delegation's bounded catalog, so a table
// or a column outside the bound is, to the check, to the guards and to
// every reason the agent reads, exactly as if it did not exist (DESIGN.md
// invariant 10): a statement naming one is referred with the same words
// whether the target has it or not, and *, a whole-row reference and an
// INSERT without a column list reach only the bound's columns. of is what
// reasons call it ("the tables and columns delegation X names").
func (c *Catalog) Bounded(scope map[TableName][]string, of string) *Catalog {
	out := &Catalog{tables: make(map[TableName]*Table, len(scope)), searchPath: c.searchPath, of: of}
	for name, cols := range scope {
		t, ok := c.tables[name]
		if !ok {
			continue
		}
		keep := make(map[string]bool, len(cols))
		for _, col := range cols {
			keep[col] = true
		}
		cp := Table{Name: t.Name, EstimatedRows: -1, index: map[string]int{}}
		for _, col := range t.Columns {
			if keep[col.Name] {
				cp.index[col.Name] = len(cp.Columns)
				cp.Columns = append(cp.Columns, col)
			}
		}
		for _, k := range t.Constraints {
			inside := true
			for _, col := range k.Columns {
				inside = inside && keep[col]
			}
			if inside && k.RefTable == nil {
				k.Def = ""
				cp.Constraints = append(cp.Constraints, k)
			}
		}
		out.tables[name] = &cp
	}
	return out
}

// IsReservedSchema reports whether no statement may ever reach a relation in
// that schema: Harbormaster's own schema and the system catalogs.
func IsReservedSchema(schema string) bool {
	switch schema {
	case "harbormaster", "information_schema":
		return true
	}
	return strings.HasPrefix(schema, "pg_")
}

// MaxSchemaBytes caps a schema DDL file.
const MaxSchemaBytes = 16 << 20

// ParseSchemaDDL reads SQL DDL as pg_dump --schema-only writes it and returns
// a catalog of its tables. CREATE TABLE is read, with the constraints and
// triggers of CREATE TABLE, ALTER TABLE ... ADD CONSTRAINT, CREATE UNIQUE
// INDEX and CREATE TRIGGER (Table.Constraints); every other statement
// (SET, CREATE SCHEMA, other indexes, functions, comments) is ignored. Views, foreign tables and partitions of other kinds
// are not relations an agent may name and are left out, so statements
// naming them refer as unknown relations.
func ParseSchemaDDL(ddl string, searchPath []string) (*Catalog, error) {
	if len(ddl) > MaxSchemaBytes {
		return nil, fmt.Errorf("sqlcheck: schema: %d bytes is over the %d byte limit", len(ddl), MaxSchemaBytes)
	}
	tree, err := pg.Parse(ddl)
	if err != nil {
		return nil, fmt.Errorf("sqlcheck: schema: %w", err)
	}
	qualify := func(rv *pg.RangeVar) TableName {
		schema := rv.Schemaname
		if schema == "" {
			schema = "public"
		}
		if len(searchPath) > 0 && rv.Schemaname == "" {
			schema = searchPath[0]
		}
		return TableName{schema, rv.Relname}
	}
	var tables []Table
	for _, raw := range tree.Stmts {
		cs := raw.GetStmt().GetCreateStmt()
		if cs == nil || cs.Relation == nil {
			continue
		}
		t := Table{Name: qualify(cs.Relation), EstimatedRows: -1}
		for _, elt := range cs.TableElts {
			cd := elt.GetColumnDef()
			if cd == nil {
				continue
			}
			t.Columns = append(t.Columns, Column{Name: cd.Colname, Type: typeNameString(cd.TypeName)})
		}
		tables = append(tables, t)
	}
	ddlConstraints(tree.Stmts, tables, qualify)
	return NewCatalog(tables, searchPath)
}

func typeNameString(tn *pg.TypeName) string {
	if tn == nil {
		return ""
	}
	var parts []string
	for _, n := range tn.Names {
		if s := n.GetString_(); s != nil {
			parts = append(parts, s.Sval)
		}
	}
	if len(parts) == 2 && parts[0] == "pg_catalog" {
		parts = parts[1:]
	}
	s := strings.Join(parts, ".")
	if len(tn.ArrayBounds) > 0 {
		s += "[]"
	}
	return s
}

// QuoteIdent quotes an identifier the way PostgreSQL's quote_ident does:
// only when it is not a plain lower-case name or is a keyword.
func QuoteIdent(s string) string {
	if s != "" && isPlainIdent(s) && !isKeyword(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func isPlainIdent(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r == '_':
		case (r >= '0' && r <= '9') || r == '$':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// isKeyword asks the real scanner whether s is a reserved or type/column-name
// keyword that needs quoting as an identifier.
func isKeyword(s string) bool {
	res, err := pg.Scan(s)
	if err != nil || len(res.Tokens) != 1 {
		return true
	}
	switch res.Tokens[0].KeywordKind {
	case pg.KeywordKind_NO_KEYWORD, pg.KeywordKind_UNRESERVED_KEYWORD:
		return false
	}
	return true
}
