package sqlcheck

import "fmt"

// Reason codes. Each refer carries at least one; they are stable and tested
// against the corpus in testdata/corpus.
const (
	CodeInputTooLarge      = "input_too_large"
	CodeInputTooDeep       = "input_too_deep"
	CodeParseError         = "parse_error"
	CodeEmptyStatement     = "empty_statement"
	CodeMultipleStatements = "multiple_statements"
	CodeStatementNotAllow  = "statement_not_allowed"
	CodeSelectInto         = "select_into"
	CodeLockingClause      = "locking_clause"
	CodeWritableCTE        = "writable_cte"
	CodeRecursiveCTE       = "recursive_cte"
	CodeCTEShadowsTable    = "cte_shadows_table"
	CodeOnConflictUpdate   = "on_conflict_update"
	CodeOnConflictNoTarget = "on_conflict_no_target"
	CodeReservedSchema     = "reserved_schema"
	CodeUnknownRelation    = "unknown_relation"
	CodeUnknownColumn      = "unknown_column"
	CodeRelationNotCovered = "relation_not_covered"
	CodeOpNotCovered       = "op_not_covered"
	CodeColumnNotReadable  = "column_not_readable"
	CodeColumnNotWritable  = "column_not_writable"
	CodeFunctionNotAllowed = "function_not_allowed"
	CodeOperatorNotAllowed = "operator_not_allowed"
	CodeTypeNotAllowed     = "type_not_allowed"
	CodeParamNotAllowed    = "parameter_not_allowed"
	CodeUnsupported        = "unsupported_expression"
	CodeUnknownNode        = "unknown_node"
	CodeInternal           = "internal_error"

	// Codes that explain a conforms or survey decision.
	CodeCovered  = "covered"
	CodeResidual = "residual_rule"
)

// Reason is one readable reason of a decision. Rule is the index of the
// delegation rule it concerns, or -1.
type Reason struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Rule    int    `json:"rule"`
}

// String renders the reason as one readable line.
func (r Reason) String() string { return r.Message + " [" + r.Code + "]" }

func reasonf(code, format string, args ...any) Reason {
	return Reason{Code: code, Message: fmt.Sprintf(format, args...), Rule: -1}
}
