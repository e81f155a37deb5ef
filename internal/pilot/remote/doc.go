// Package remote runs a Pilot in a process of its own: a Server that
// serves pilot.Executor for one or more targets over mutual TLS, and a
// Client that implements pilot.Executor for the control plane
// (DESIGN.md section 11: "the Pilot runs in-process or as its own process
// behind one executor interface").
//
// # Trust
//
// The channel authenticates the caller; it grants nothing. The Server
// accepts a connection only with a client certificate from its configured
// client CA (TLS 1.3 only), and hands every call to a *pilot.Pilot, which
// verifies the marque with the control plane's public key, the grantor's
// or approver's signature with its own signers file, and the bound, exactly
// as it does in process. A caller holding the client certificate can
// therefore run only what a human signed; what it can do without a
// signature is what pilot.Executor allows without one: rehearse inside a
// signed bound (always rolled back), preview a statement (a read-only
// transaction), read receipts, burn a marque with a void receipt, and read
// the catalog. The Client trusts only a server certificate from its
// configured CA.
//
// # Fail closed across the wire
//
// A statement may commit even when its answer never arrives. For Execute
// and ExecuteApproved the Client therefore returns an error wrapping
// pilot.ErrCommitUnknown whenever the request may have left this process
// and no well-formed answer came back: a reset or closed connection, a
// timeout, a status other than 200, a body that is not the envelope it
// expects. Only a failure before a connection was obtained (DNS, connect,
// the TLS handshake) is an ordinary error: nothing was written. The
// gateway keeps such a request running and settles it from the receipt
// (VoidReceipt). The Client sends each statement once: HTTP/1.1 only (no
// HTTP/2 stream retries), no request body rewinding, so the transport never
// resends a request.
//
// The Server runs Execute, ExecuteApproved and VoidReceipt detached from
// the client's connection (context.WithoutCancel, bounded by
// ServerConfig.CallTimeout): a client that goes away mid-statement never
// cancels it, so the statement finishes or fails on its own and its receipt
// tells the truth. Rehearsals follow the connection: they always roll back.
//
// # Exact round trips
//
// A pilot.Result crosses as JSON without omitted fields, so nil and empty
// slices stay apart; row values, arguments and row images arrive as
// json.RawMessage, so they marshal to exactly the bytes the Pilot's own
// values marshal to. A preview crosses as the very bytes
// Preview returned. Errors
// cross with a kind: pilot.ErrCommitUnknown and pilot.ErrNotPreviewable
// are matched with errors.Is on the Client's side as on the Pilot's.
//
// # The catalog
//
// A Pilot reads its target's catalog when it starts. The Client reads the
// Pilot's catalog when it connects (and fails if the Pilot cannot be
// reached), and every answer carries the digest of the catalog the Pilot
// checks against; when it differs from the Client's (the Pilot restarted
// over a changed schema), the Client reads the catalog again in the
// background. Until then the gateway checks against the old one and the
// Pilot against its own: a mismatch refers, never runs.
package remote
