package bound

import (
	"fmt"
	"slices"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// lintHiddenConstraints states, for each write rule, every constraint and
// trigger of the target that makes the outcome of a write the rule allows
// depend on a value the grantee may not read (docs/security.md, "Nothing
// outside the bound is observable"). With CHECK (balance <= credit_limit),
// balance writable and credit_limit in no select rule, whether a write of
// balance succeeds compares it with credit_limit: a binary search reads
// the limit exactly. The bound cannot close such a channel (the target
// enforces its own constraints); the signer is told and accepts it.
//
// A column is readable when a select rule on its table lists it; writing
// a column does not make it readable. What each kind of constraint reads:
//
//   - A check reads the new row. An update that sets one of its columns
//     and leaves another the grantee cannot read as it was compares them.
//     An insert's other columns take their defaults, which are the
//     schema's, not hidden values: a check is not listed for an insert,
//     unless it is not validated (rows already there may fail it on any
//     update).
//   - A unique, primary key or exclusion constraint compares the new row
//     with every other row: listed when the rule writes one of its columns
//     and it reads a column the grantee cannot read.
//   - A foreign key looks the written key up in the referenced table:
//     listed when the rule writes one of its columns and the grantee
//     cannot read the referenced columns (or, for an update, another
//     column of the key left as it was). A delete from the referenced
//     table, or an update of its referenced columns, under NO ACTION or
//     RESTRICT fails when a row references it: listed when the grantee
//     cannot read the referencing columns. (Under CASCADE, SET NULL or
//     SET DEFAULT the Pilot refers the write whether a row references it
//     or not, which tells nothing.)
//   - A trigger runs the target owner's code, which can read anything:
//     listed whenever it fires on the rule's operation.
//
// A not-null constraint reads only the column it constrains, which the
// write sets or leaves as it was: never listed.
func lintHiddenConstraints(rules []Rule, reports []RuleReport, cat *sqlcheck.Catalog, lint func(string, string, ...any)) {
	readable := map[string]map[string]bool{}
	for _, r := range rules {
		if r.Op != sqlcheck.OpSelect {
			continue
		}
		if readable[r.Table] == nil {
			readable[r.Table] = map[string]bool{}
		}
		for _, c := range r.Columns {
			readable[r.Table][c] = true
		}
	}
	hidden := func(table string, cols []string) []string {
		var out []string
		for _, c := range cols {
			if !readable[table][c] && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return out
	}
	for k, r := range rules {
		if r.Op == sqlcheck.OpSelect {
			continue
		}
		tn, err := r.TableName()
		if err != nil {
			continue
		}
		t, ok := cat.Table(tn)
		if !ok {
			continue
		}
		i := reports[k].Index
		colField, ruleField := fmt.Sprintf("allow[%d].columns", i), fmt.Sprintf("allow[%d]", i)
		for ci := range t.Constraints {
			c := &t.Constraints[ci]
			written := intersect(c.Columns, r.Columns)
			h := hidden(r.Table, c.Columns)
			switch c.Kind {
			case sqlcheck.ConstraintCheck:
				if r.Op != sqlcheck.OpUpdate || len(h) == 0 {
					continue
				}
				switch {
				case compares(written, h):
					lint(colField, "writing %s reveals whether the row passes %s, and so something of %s, which no select rule on %s lets the grantee read: repeated writes can find %s value",
						list(written), describe(c, r.Table), list(leftAsWas(h, written)), r.Table, its(leftAsWas(h, written)))
				case c.NotValid && len(minus(h, r.Columns)) > 0:
					lint(ruleField, "updating a row of %s reveals whether it passes %s, which is not validated on the rows already there, and so something of %s, which no select rule on %s lets the grantee read",
						r.Table, describe(c, r.Table), list(h), r.Table)
				}
			case sqlcheck.ConstraintUnique, sqlcheck.ConstraintPrimaryKey, sqlcheck.ConstraintExclusion:
				if r.Op == sqlcheck.OpDelete || len(written) == 0 || len(h) == 0 {
					continue
				}
				what := "has the same values in"
				if c.Kind == sqlcheck.ConstraintExclusion {
					what = "conflicts with it under"
				}
				lint(colField, "writing %s reveals whether another row of %s %s %s, and so something of %s, which no select rule on %s lets the grantee read",
					list(written), r.Table, what, describe(c, r.Table), list(h), r.Table)
			case sqlcheck.ConstraintForeignKey:
				if r.Op == sqlcheck.OpDelete || len(written) == 0 || c.RefTable == nil {
					continue
				}
				ref := c.RefTable.String()
				var why []string
				if hr := hidden(ref, c.RefColumns); len(hr) > 0 {
					why = append(why, fmt.Sprintf("no select rule on %s lets the grantee read %s", ref, list(hr)))
				}
				if r.Op == sqlcheck.OpUpdate && compares(written, h) {
					why = append(why, fmt.Sprintf("the key also reads %s, which no select rule on %s lets the grantee read", list(leftAsWas(h, written)), r.Table))
				}
				if len(why) > 0 {
					lint(colField, "writing %s reveals whether %s has a row with that key, by %s: %s",
						list(written), ref, describe(c, r.Table), strings.Join(why, ", and "))
				}
			case sqlcheck.ConstraintTrigger:
				if c.Fires(r.Op, r.Columns) {
					def := ""
					if c.Def != "" {
						def = " (" + c.Def + ")"
					}
					lint(ruleField, "trigger %s on %s runs on this %s and can read every column of any table: its effects and errors may reveal values the bound does not list%s",
						sqlcheck.QuoteIdent(c.Name), r.Table, r.Op, def)
				}
			}
		}
		// Foreign keys that reference this table: a delete, or an update
		// of the referenced columns, fails when a row references it.
		if r.Op != sqlcheck.OpDelete && r.Op != sqlcheck.OpUpdate {
			continue
		}
		for _, fk := range cat.ForeignKeysTo(tn) {
			c := fk.Constraint
			changed := intersect(c.RefColumns, r.Columns)
			if r.Op == sqlcheck.OpUpdate && len(changed) == 0 || !c.Checks(r.Op) {
				// An action (CASCADE, SET NULL, SET DEFAULT) refers the
				// write whether a row references it or not.
				continue
			}
			from := fk.Table.String()
			h := hidden(from, c.Columns)
			if len(h) == 0 {
				continue
			}
			act, field := "deleting a row of "+r.Table, ruleField
			if r.Op == sqlcheck.OpUpdate {
				act, field = "changing "+list(changed)+" of a row of "+r.Table, colField
			}
			lint(field, "%s reveals whether a row of %s references it, by %s: no select rule on %s lets the grantee read %s",
				act, from, describe(c, from), from, list(h))
		}
	}
}

// describe names a constraint for a lint: "check accounts_check on
// public.accounts, CHECK ((balance <= credit_limit))".
func describe(c *sqlcheck.Constraint, table string) string {
	kind := string(c.Kind)
	if c.Kind == sqlcheck.ConstraintUnique {
		kind = "unique key"
	}
	s := fmt.Sprintf("%s %s on %s", kind, sqlcheck.QuoteIdent(c.Name), table)
	if c.Def != "" {
		s += ", " + c.Def
	}
	return s
}

// intersect is the columns of a also in b, in a's order.
func intersect(a, b []string) []string {
	var out []string
	for _, c := range a {
		if slices.Contains(b, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// compares reports whether a write can set one column of written and
// leave a different, hidden one as it was: then the constraint compares
// a value the writer chose with one it cannot read.
func compares(written, hidden []string) bool {
	for _, w := range written {
		for _, h := range hidden {
			if w != h {
				return true
			}
		}
	}
	return false
}

// minus is the columns of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, c := range a {
		if !slices.Contains(b, c) {
			out = append(out, c)
		}
	}
	return out
}

// leftAsWas is the hidden columns a write of written leaves as they were;
// when it writes every one of them, any one may be left as it was, so all
// of them.
func leftAsWas(hidden, written []string) []string {
	if out := minus(hidden, written); len(out) > 0 {
		return out
	}
	return hidden
}

func list(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = sqlcheck.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

func its(cols []string) string {
	if len(cols) == 1 {
		return "its"
	}
	return "their"
}
