// Package leadsman is the Leadsman: an analyst model that helps humans
// read the queue (EDR-0009). For each referred request waiting for a
// human, a configured model writes a short, discursive note: what the
// statement does, which rows its text says it reaches, why it was
// referred. The note is
// advice to an approver and nothing more.
//
// # What it is not
//
// The Leadsman has no authority. It produces no verdict, no score and no
// route; it cannot approve, deny, execute or audit anything, and it does
// not link the code that does (internal/layers: it depends on none of the
// gateway, the queue, the Pilot, the audit or the Surveyor). The reverse
// holds too, and is the load-bearing half: nothing on the approval,
// denial, execution or audit path reads its output. Notes live in a table
// of their own (leadsman_notes), which only this package and the fronts
// that show notes to humans (httpapi, the console, the CLI) may reach; a
// layering test fails the build otherwise, and a test runs the approval
// path with the Leadsman absent, failing, timing out and lying ("approved";
// injected instructions) and finds the same outcome and the same logbook
// entries apart from the Leadsman's own.
//
// This is the risk the decision record names: authority creeping toward
// the model by convenience, from a note to a score to an auto-approval of
// whatever scored low. The structure forbids the first step.
//
// # Off the statement's path
//
// The Leadsman runs on its own (Run): it polls the store for waiting
// requests without a note, after they are queued and answered. Nothing on
// the statement path waits for it, calls it or knows it exists; a slow or
// failing provider delays only notes. Each note is claimed in the store
// by one node before its model call, so several nodes write one note.
//
// # Untrusted text
//
// Its input is adversarial: a statement is attacker-written, and an SQL
// comment is a fine place for an instruction aimed at whatever reads it.
// The statement and the reasons go to the model in
// delimited blocks marked with a per-call random marker, and the
// instructions say to describe them, never to follow them. That is a
// mitigation, not a guarantee, and nothing depends on it: the model's
// output is itself stored as untrusted text, shown escaped and labelled
// "advisory (Leadsman, a model; not a decision)", and read by no program.
//
// # Egress
//
// The model is called through the provider's official SDK (internal/llm),
// with the deployment's egress settings. It sees the statement and the
// reasons, never a row: nothing of a referred statement runs before a
// human asks (DESIGN.md invariant 10), and the Leadsman, which writes its
// note on its own schedule, must never be what makes anything run. A
// human's preview, once there, is not shown to it either: the note would
// then depend on whether a human had looked, and on rows the agent may
// not read.
//
// # The record
//
// Each note written or failed is a logbook entry of kind leadsman.note,
// with the Leadsman's principal as subject, naming the provider, the
// model and the note's SHA-256 (not its text: the text is stored apart).
package leadsman
