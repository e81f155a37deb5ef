// Package sqlcheck is the static check: it parses a statement with the
// real PostgreSQL parser (pg_query_go), reads its facts (kind, target,
// the columns it reads and writes, functions, references) against a
// catalog of the target (catalog.go, constraint.go), and decides whether
// a delegation's rules cover it (check.go): conforms, survey (a residual
// clause a panel must judge) or refer, with every reason (reason.go).
//
// Only allow-listed functions pass (allow.go); a statement that does not
// parse, or that no human could approve (several statements, DDL, a
// placeholder), is rejected at once (unapprovable.go). Shapes (shape.go)
// and templates (template.go) let a decision be remembered for every
// statement that differs only in its literals, in a Cache (cache.go),
// keyed by catalog, shape with its baked constants' values, and bound; expr.go reads table and
// column names and compiles signed fences and checks; walk.go extracts a
// statement's facts from the parse tree, and visit.go walks it.
package sqlcheck
