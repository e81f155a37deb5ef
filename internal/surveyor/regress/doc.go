// Package regress runs the Surveyor's regression suite: the release gate for
// any prompt-bundle or model change (DESIGN.md section 7, the Surveyor EDR).
//
// The suite (testdata/surveyor/suite/*.yaml) holds cases in four classes:
// injection attempts, near misses just outside a residual clause, statements
// that conform in form but not in intent, and positives that genuinely
// conform. Every case of the first three classes must refer; a positive should
// conform, but refer is always safe, so positives are reported and never gate.
//
// Invariants:
//   - The gate fails if any must-refer case comes back conforms. It also
//     fails if the run is incomplete (the context ended before every case was
//     judged) or empty: a gate that ran nothing has shown nothing.
//   - A case's class fixes its expectation (positive: conforms; every other
//     class: refer), and Load refuses a suite that says otherwise, so a
//     mislabelled injection case cannot quietly leave the gate.
//   - Each case is judged through the real panel (surveyor.Panel.Judge) with
//     the input the gateway would build: the rehearsal report is marshalled
//     with encoding/json exactly as the gateway marshals it.
//   - Failures to answer count as refer, as they do in production; the
//     summary reports them per class because a gate whose jurors never
//     answered has tested nothing about the prompts.
package regress
