package shadow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Spec is what one shadow database holds: exactly what a principal's
// delegations in force on one target name. It is derived from the signed
// bounds and the target's catalog alone, and only from what the bounds
// list (tables the rules name, the columns they list, the types and NOT
// NULL of those columns, the keys over those columns only), so two
// targets that differ only outside the bound give equal Specs.
type Spec struct {
	// Target is the target's name: the shadow database's name, what
	// current_database() answers.
	Target string `json:"target"`
	// Role is the principal: the role catalog statements run as, what
	// current_user answers, as at the front.
	Role string `json:"role"`
	// SearchPath is the target's pinned search path.
	SearchPath []string `json:"search_path"`
	// Tables are sorted by schema and name.
	Tables []Table `json:"tables"`
}

// Table is one table of the bound.
type Table struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// Columns are the listed columns in the target's column order.
	Columns []Column `json:"columns"`
	// Delete: a delete rule names the table.
	Delete bool `json:"delete,omitempty"`
	// Keys are the primary key, unique constraints and unique indexes
	// over listed columns only, in the target catalog's order.
	Keys []Key `json:"keys,omitempty"`
}

// Column is one listed column, with what the rules let the principal do
// with it (granted in the shadow, so has_column_privilege and
// information_schema.column_privileges answer from the bound).
type Column struct {
	Name string `json:"name"`
	// Type is the target's type text (format_type); a type PostgreSQL
	// does not have built in becomes text in the shadow.
	Type    string `json:"type"`
	NotNull bool   `json:"not_null,omitempty"`
	Select  bool   `json:"select,omitempty"`
	Insert  bool   `json:"insert,omitempty"`
	Update  bool   `json:"update,omitempty"`
}

// Key is a primary key, unique constraint or unique index.
type Key struct {
	// Kind is KindPrimaryKey, KindUnique (a constraint) or KindUniqueIndex
	// (a unique index that backs no constraint).
	Kind    string   `json:"kind"`
	Name    string   `json:"name"`
	Columns []string `json:"columns"` // key order
}

// The kinds of Key.
const (
	KindPrimaryKey  = "primary key"
	KindUnique      = "unique"
	KindUniqueIndex = "unique index"
)

// Rules is one delegation's rules, as FromBound takes them.
type Rules = []bound.Rule

// FromBound is the Spec of a principal's delegations in force on target:
// the union of their rules, over cat (the target's catalog as the Pilot
// checks against it). A table no rule names, or that cat lacks, is not
// in it; a listed column cat lacks is left out.
func FromBound(target, principal string, searchPath []string, delegations []Rules, cat *sqlcheck.Catalog) *Spec {
	s := &Spec{Target: target, Role: principal, SearchPath: append([]string{}, searchPath...), Tables: []Table{}}
	type acc struct {
		t    *sqlcheck.Table
		cols map[string]*Column
		del  bool
	}
	byName := map[sqlcheck.TableName]*acc{}
	for _, rules := range delegations {
		for _, r := range rules {
			name, err := r.TableName()
			if err != nil || cat == nil {
				continue
			}
			t, ok := cat.Table(name)
			if !ok {
				continue
			}
			a := byName[name]
			if a == nil {
				a = &acc{t: t, cols: map[string]*Column{}}
				byName[name] = a
			}
			if r.Op == sqlcheck.OpDelete {
				a.del = true
			}
			// The columns its fence and check read are the bound's too
			// (bound.Catalog, what the statement path checks against and
			// describe_tables lists), with no privilege of their own.
			for _, expr := range []string{r.Fence, r.Check} {
				if expr == "" {
					continue
				}
				if x, reasons := sqlcheck.CompileExpr(expr, t, cat); len(reasons) == 0 && x != nil {
					for _, c := range x.Columns {
						if a.cols[c] == nil {
							a.cols[c] = &Column{Name: c}
						}
					}
				}
			}
			for _, c := range r.Columns {
				col := a.cols[c]
				if col == nil {
					col = &Column{Name: c}
					a.cols[c] = col
				}
				switch r.Op {
				case sqlcheck.OpSelect:
					col.Select = true
				case sqlcheck.OpInsert:
					col.Insert = true
				case sqlcheck.OpUpdate:
					col.Update = true
				}
			}
		}
	}
	for name, a := range byName {
		t := Table{Schema: name.Schema, Name: name.Name, Delete: a.del, Columns: []Column{}}
		for _, c := range a.t.Columns {
			if col := a.cols[c.Name]; col != nil {
				col.Type, col.NotNull = c.Type, c.NotNull
				t.Columns = append(t.Columns, *col)
			}
		}
		listed := map[string]bool{}
		for _, c := range t.Columns {
			listed[c.Name] = true
		}
		for _, k := range a.t.Constraints {
			if key, ok := simpleKey(k); ok && allListed(key.Columns, listed) && allListed(k.Columns, listed) {
				t.Keys = append(t.Keys, key)
			}
		}
		s.Tables = append(s.Tables, t)
	}
	slices.SortFunc(s.Tables, func(a, b Table) int {
		if c := strings.Compare(a.Schema, b.Schema); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return s
}

func allListed(cols []string, listed map[string]bool) bool {
	for _, c := range cols {
		if !listed[c] {
			return false
		}
	}
	return true
}

// simpleKey is a primary key, unique constraint or unique index whose
// definition is plain columns: no expression, predicate, operator class
// or ordering. Its INCLUDE columns are left out (they may be unlisted,
// and they change nothing a reader sees of the key). Any other
// definition, or none (a catalog without definitions), is not one.
func simpleKey(k sqlcheck.Constraint) (Key, bool) {
	def := k.Def
	var kind, rest string
	switch {
	case k.Kind == sqlcheck.ConstraintPrimaryKey && strings.HasPrefix(def, "PRIMARY KEY ("):
		kind, rest = KindPrimaryKey, strings.TrimPrefix(def, "PRIMARY KEY (")
	case k.Kind == sqlcheck.ConstraintUnique && strings.HasPrefix(def, "UNIQUE ("):
		kind, rest = KindUnique, strings.TrimPrefix(def, "UNIQUE (")
	case k.Kind == sqlcheck.ConstraintUnique && strings.HasPrefix(def, "CREATE UNIQUE INDEX ") && strings.Contains(def, " USING btree ("):
		kind, rest = KindUniqueIndex, def[strings.Index(def, " USING btree (")+len(" USING btree ("):]
	default:
		return Key{}, false
	}
	end := strings.IndexByte(rest, ')')
	if end < 0 {
		return Key{}, false
	}
	if tail := rest[end+1:]; tail != "" && !(strings.HasPrefix(tail, " INCLUDE (") && strings.HasSuffix(tail, ")") && strings.Count(tail, ")") == 1) {
		return Key{}, false
	}
	var cols []string
	for _, part := range strings.Split(rest[:end], ", ") {
		name, ok := plainIdent(part)
		if !ok || !slices.Contains(k.Columns, name) {
			return Key{}, false
		}
		cols = append(cols, name)
	}
	if len(cols) != len(k.Columns) {
		return Key{}, false
	}
	return Key{Kind: kind, Name: k.Name, Columns: cols}, true
}

// plainIdent reads one identifier as PostgreSQL prints it: bare, or
// double-quoted with "" for a quote.
func plainIdent(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if s[0] == '"' {
		if len(s) < 2 || s[len(s)-1] != '"' {
			return "", false
		}
		inner := s[1 : len(s)-1]
		if strings.Contains(strings.ReplaceAll(inner, `""`, ""), `"`) {
			return "", false
		}
		return strings.ReplaceAll(inner, `""`, `"`), true
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			return "", false
		}
	}
	return s, true
}

// Key is the Spec's digest: the shadow database of a Spec is keyed by it,
// so a change of the delegations in force (one added, revoked, expired)
// that changes what they name makes another.
func (s *Spec) Key() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic("shadow: a Spec always marshals: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
