// Package console is the web console for the humans of a deployment:
// grantors, approvers, reviewers and operators. It is server-rendered
// (html/template, embedded templates and one stylesheet, no JavaScript)
// and mounted under /console/ on the same HTTP server as the API.
//
// # Authority
//
// The console holds no authority of its own. A session says who is looking
// (one verified signature over a login challenge, namespace
// harbormaster-session) and so what to show; every act that changes
// anything carries its own SSH signature, pasted by the human, and goes
// through the same gateway call the HTTP API uses (AddDelegation, Approve,
// Deny, ReviewAudit), so the logbook cannot tell a console act from an API
// act. The one exception is a switch, which the API authorizes by a signed
// request in harbormaster-switch: the console authorizes it by a session
// whose key the signers file allows in that namespace for every target the
// switch governs, and records the same logbook entry (name and time).
//
// # Sessions
//
// A session is a stateless cookie MACed with a key derived from the
// control-plane key (SessionKey), so any node of a deployment accepts it
// with no store table; it carries the login key and an expiry, and roles
// are read from the signers file on every request, so removing a key from
// the file ends its sessions at once. A login challenge is MACed the same
// way and is single-use on every node through the store's claim of signed
// requests. Cookies are HttpOnly, SameSite=Strict, with an expiry, and
// Secure when served over TLS (or when Config.Secure says a proxy
// terminates it). Every form carries a CSRF token bound to the session.
//
// # Untrusted text
//
// Statements, row values, sentences, model output and agent-supplied
// reasons are rendered only through html/template's contextual escaping:
// no template marks any of them safe.
package console
