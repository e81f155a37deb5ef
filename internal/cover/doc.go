// Package cover is CoVer, corroborate then verify by intervention
// (DESIGN.md section 8; the paper's Algorithm 1): how Harbormaster decides
// which clauses of a sentence compile and which stay residual, and how a
// team measures its own panel.
//
// # Threat model
//
// No model can be trusted to say which clauses a fixed check can settle:
// models agree where it is obvious and err together where field names read
// mechanical but the agent writes them. So a model's label only orders the
// synthesis budget (a nomination), and a model's element (the check it
// proposes) is admitted only by gates that consult no model:
//
//   - G0 structure: not an identity on one boolean slot the grantee writes;
//   - G1 groundedness: reads only attested fields (columns no write of the
//     grantee can move a row into, constants, server time), never the
//     statement's text, comments, or the agent's own reasons and notes;
//   - G2 sensitivity: some intervention on a slot changes the verdict;
//   - G3 invariance: the verdict holds under deterministic rewordings of
//     sample statements, produced with the real scanner and deparser.
//
// # Invariants
//
// Every failure fails closed: a provider error or malformed answer is a
// JUDGMENT label; a missing or unknown field, a check that does not compile
// or cannot be evaluated, a gate that cannot run makes the clause residual.
// A draft signs nothing: it proposes YAML that a human compiles and signs.
// The gates are sampled evidence, not proofs, and cannot certify that a
// check is faithful to its clause; reports say which values were tried.
//
// Sample rows are read in a read-only transaction and appear only in
// reports for the operator; nothing here is on an agent's path.
package cover
