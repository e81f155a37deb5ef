package bound

// Gate is the outcome of one CoVer gate on a fence or check (DESIGN.md
// section 8): whether it passed, and why, in a sentence.
type Gate struct {
	OK  bool   `json:"ok"`
	Why string `json:"why"`
}

// ExprGates are the gates run on one fence or check.
type ExprGates struct {
	Expr string `json:"expr"`
	G0   Gate   `json:"g0"`
	G1   Gate   `json:"g1"`
	G2   Gate   `json:"g2"`
	// G3 is run only on drafted elements (it needs sample statements).
	G3 *Gate `json:"g3,omitempty"`
}

// RuleGates are the gates of one rule: G0 to G2 over its fence and check
// together (ok when both pass), and each expression's own evidence.
type RuleGates struct {
	G0    Gate       `json:"g0"`
	G1    Gate       `json:"g1"`
	G2    Gate       `json:"g2"`
	Fence *ExprGates `json:"fence,omitempty"`
	Check *ExprGates `json:"check,omitempty"`
}

// SideEffect is a trigger, rewrite rule or foreign-key cascade on a table
// in scope: what a statement inside a fence may do outside it.
type SideEffect struct {
	Table  string `json:"table"`
	Kind   string `json:"kind"` // "trigger", "rule" or "cascade"
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// Refresh recomputes Signable and the identifiers after problems were
// added to a report (by the gates).
func (r *Report) Refresh(b *Bound) {
	r.Signable = len(r.Problems) == 0
	r.DelegationID, r.CanonicalSHA256 = "", ""
	if !r.Signable {
		return
	}
	if c, err := b.Canonical(); err == nil {
		r.DelegationID = ID(c)
		r.CanonicalSHA256 = SHA256(c)
	} else {
		r.Signable = false
		r.Problems = append(r.Problems, Problem{Message: "cannot render the canonical form: " + err.Error()})
	}
}
