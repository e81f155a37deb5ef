package bound

import "github.com/harbormaster-dev/harbormaster/internal/sqlcheck"

// Catalog is cat as this bound sees it (sqlcheck.Catalog.Bounded): the
// tables its rules name, each with the columns its rules list and those
// their fences and checks read, and nothing else of the target. The
// statement path checks an agent's statements against it (the gateway's
// check and the Pilot's), so whatever the target holds outside the bound
// is, to the agent, as if it did not exist (DESIGN.md invariant 10). of is
// what reasons call it.
func (b *Bound) Catalog(cat *sqlcheck.Catalog, of string) *sqlcheck.Catalog {
	scope := map[sqlcheck.TableName][]string{}
	for _, r := range b.Rules {
		t, err := r.TableName()
		if err != nil {
			continue
		}
		scope[t] = append(scope[t], r.Columns...)
		tbl, ok := cat.Table(t)
		if !ok {
			continue
		}
		for _, expr := range []string{r.Fence, r.Check} {
			if expr == "" {
				continue
			}
			if x, reasons := sqlcheck.CompileExpr(expr, tbl, cat); len(reasons) == 0 && x != nil {
				scope[t] = append(scope[t], x.Columns...)
			}
		}
	}
	return cat.Bounded(scope, of)
}

// CatalogName is what a bounded catalog is called in the reasons an agent
// reads.
const CatalogName = "the tables and columns the delegation names"
