package logbook

// Kind says what an entry records. The logbook itself accepts any kind of
// the right alphabet; the control plane writes these.
type Kind string

// The kinds the control plane writes.
const (
	// The statement path.
	KindDecision         Kind = "decision"          // a statement decided (run, referred, rejected, refused)
	KindJudgment         Kind = "judgment"          // the Surveyor's panel judged a statement
	KindExecutionPending Kind = "execution.pending" // an approved statement's marque, before the Pilot runs it
	KindExecution        Kind = "execution"         // what the Pilot did with a marque
	// The queue's human acts and its expiry.
	KindApproval Kind = "approval"
	KindDenial   Kind = "denial"
	KindExpiry   Kind = "expiry"
	// Delegations.
	KindDelegation        Kind = "delegation"
	KindRevocation        Kind = "revocation"
	KindDelegationExpired Kind = "delegation.expired"
	// Tier B.
	KindSwitch         Kind = "switch"
	KindAuditable      Kind = "auditable"
	KindSurveyorEnable Kind = "surveyor.enable"
	// The sampled audit.
	KindAuditSampled  Kind = "audit.sampled"
	KindAuditReview   Kind = "audit.review"
	KindFinding       Kind = "finding"
	KindSuspension    Kind = "suspension"
	KindReinstatement Kind = "reinstatement"
	// The Leadsman, an advisory principal: a note written (or not) on a
	// referred request. The entry holds the note's digest, not its text,
	// which is stored apart; no decision reads either.
	KindLeadsmanNote Kind = "leadsman.note"
)
