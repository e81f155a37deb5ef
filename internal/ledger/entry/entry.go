// Package entry is the schema of the logbook entries the request ledger
// writes for a statement: what a `decision` entry's payload holds, and
// how to read one. The ledger writes it (internal/ledger, Decide); the
// reconciler, the backtest and the console read it through Decision. It
// imports nothing of the module, so a reader that may execute nothing
// (the backtest) reads the same schema the writer writes.
package entry

import "encoding/json"

// Decision is a `decision` entry's payload: a statement decided (run,
// referred, rejected, refused), written before anything of it runs.
type Decision struct {
	RequestID string `json:"request_id"`
	Principal string `json:"principal"`
	Target    string `json:"target"`
	// Statement is the agent's text (a prefix past 64 KiB, with
	// StatementBytes and StatementTextSHA256), Canonical the checked text
	// that runs, StatementSHA256 the canonical text's hash (the marque's).
	Statement           string `json:"statement"`
	StatementBytes      int    `json:"statement_bytes,omitempty"`
	StatementTextSHA256 string `json:"statement_text_sha256,omitempty"`
	Canonical           string `json:"canonical_sql"`
	StatementSHA256     string `json:"statement_sha256"`
	// Outcome is "run" for a statement decided to run (its execution
	// entry says how it ended), else referred, rejected or refused.
	Outcome      string   `json:"outcome"`
	Path         string   `json:"path"`
	DelegationID string   `json:"delegation_id"`
	Rule         *int     `json:"rule"`
	Reasons      []string `json:"reasons"`
	// Evaluated is each delegation's decision (route.Evaluation).
	Evaluated  []Evaluation `json:"evaluated"`
	JudgmentID string       `json:"judgment_id"`
	// Detail is for humans only: the target's error text, the jurors'.
	Detail   string `json:"detail,omitempty"`
	MarqueID string `json:"marque_id,omitempty"`
	TxID     string `json:"txid,omitempty"`
}

// Evaluation is one delegation's decision on the statement.
type Evaluation struct {
	Delegation string   `json:"delegation_id"`
	Decision   string   `json:"decision"`
	Rule       *int     `json:"rule"`
	Reasons    []string `json:"reasons,omitempty"`
}

// ReadDecision reads a decision entry's payload.
func ReadDecision(payload []byte) (Decision, error) {
	var d Decision
	err := json.Unmarshal(payload, &d)
	return d, err
}
