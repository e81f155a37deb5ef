package sqlcheck

import (
	pg "github.com/pganalyze/pg_query_go/v6"
)

// Unapprovable reports why no human could approve the statement, when that
// follows from its text alone: several statements, a statement other than
// SELECT, INSERT, UPDATE or DELETE (DDL, SET, COPY, transaction control,
// ...), SELECT INTO, a top-level locking clause (FOR UPDATE), or a parameter
// placeholder ($1). The approval path cannot preview any of them
// (pilot.Pilot.Preview), and an approval names a preview, so queuing it
// would only wait for a denial; the gateway answers it as an error
// instead.
//
// Nothing here reads the catalog or a delegation: reasons that depend on
// the target (an unknown table or column) stay referrals, so that two
// targets that differ outside an agent's bound answer alike (DESIGN.md
// invariant 10).
func (a *Analysis) Unapprovable() (Reason, bool) {
	if a.NotApprovable == nil {
		return Reason{}, false
	}
	return *a.NotApprovable, true
}

// notApprovable computes Analysis.NotApprovable once the analysis is done.
func notApprovable(a *Analysis) (Reason, bool) {
	if a.Facts == nil && len(a.Reasons) > 0 && a.Reasons[0].Code == CodeMultipleStatements {
		return a.Reasons[0], true
	}
	n := a.Stmt()
	if n == nil {
		return Reason{}, false
	}
	switch s := n.GetNode().(type) {
	case *pg.Node_SelectStmt:
		if s.SelectStmt.IntoClause != nil {
			return reasonf(CodeSelectInto, "SELECT INTO creates a table and is not allowed"), true
		}
		if len(s.SelectStmt.LockingClause) > 0 {
			return reasonf(CodeLockingClause, "locking clauses (FOR UPDATE, FOR SHARE, ...) are not allowed"), true
		}
	case *pg.Node_InsertStmt, *pg.Node_UpdateStmt, *pg.Node_DeleteStmt:
	case nil:
		return Reason{}, false
	default:
		return reasonf(CodeStatementNotAllow, "%s statements are not allowed: only SELECT, INSERT, UPDATE and DELETE", statementName(n)), true
	}
	// A placeholder anywhere: the canonical text's tokens, which no
	// catalog changes.
	if a.Canonical != "" {
		if res, err := pg.Scan(a.Canonical); err == nil {
			for _, t := range res.Tokens {
				if t.Token == pg.Token_PARAM {
					return reasonf(CodeParamNotAllowed, "parameter placeholders ($1, ...) are not allowed: send literal values"), true
				}
			}
		}
	}
	return Reason{}, false
}

// Rejected reports why the gateway answers a statement as an error at
// once, recorded as rejected and checked against no delegation: it does
// not parse (Unparseable), or no human could approve it (Unapprovable).
// Like both, it depends on the text alone, never on a delegation, so a
// replay of the logbook (internal/backtest) classifies a statement as the
// gateway did.
func (a *Analysis) Rejected() (Reason, bool) {
	if a.Unparseable() {
		return a.Reasons[0], true
	}
	return a.Unapprovable()
}
