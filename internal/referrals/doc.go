// Package referrals is the service a referred statement meets (DESIGN.md
// section 3): admitting it to the queue (the flood rules), announcing it
// (the webhook), and previewing it when a human asks. The statement path
// (internal/gateway) decides that a statement is referred and records it
// in the request ledger (internal/ledger); this package does the rest.
//
// Admission. Every referral is a human's time, so referrals count
// against a per-principal rate and the requests a principal has waiting
// are capped (Admit, Take). Past either, the statement path refuses the
// statement instead of queuing it, recorded, with a FloodError the agent
// reads as "slow down". Statements that run do not count.
//
// Announcement. Referred tells the webhook (Config.Webhook) of a new
// referral, Slack-compatible, on its own goroutine with a timeout: it
// never holds up, fails or shapes the agent's answer. Its text is
// untrusted data: the statement in a code block, Slack's markup
// characters escaped, every look-alike character marked and listed
// (internal/lookalike), and a statement or reasons cut short say so
// outside the code block the agent writes in.
//
// Preview. Nothing of a referred statement runs until a human asks: not
// on referral, not in a transaction that rolls back (row locks, sequence
// draws and memory are all observable, invariant 10). Preview is the one
// place a referred statement reaches its target, through the Pilot's
// preview role only (Previewer, read-only), and only fronts that have
// authenticated a human call it: opening the request in the console,
// `queue show`, GET /v1/requests/{id} as a human, or an approval's
// proposal. The first preview is stored and every approver shares it,
// until a human asks to refresh it; a request that cannot be previewed
// says why, to humans.
//
// # Invariants
//
//   - Nothing an agent can send reaches Preview: it computes nothing on
//     Admit, Take or Referred, and this package depends on nothing that
//     executes statements but the Pilot's preview role (TestLayers).
//   - A refusal says only what the agent already knows: its own rate and
//     its own count of waiting requests.
//   - The webhook is best effort: a failure is logged, never returned.
package referrals
