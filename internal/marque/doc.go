// Package marque mints and verifies marques: signed, single-use, short-lived
// tokens that authorize exactly one canonical statement on one target.
//
// The control plane mints a marque (DESIGN.md section 3, step 7) after the
// decision is durable in the logbook; the Pilot verifies it (step 8) before it
// does anything else with a statement. A marque is a JWS in compact
// serialization, signed with the control plane's Ed25519 key (alg "EdDSA").
// Its protected header is exactly {"alg":"EdDSA","kid":KEYID,"typ":TokenType};
// its payload is the JSON of Claims (the field names documented there are the
// wire contract).
//
// # What a marque proves, and what it does not
//
// A valid marque proves only that the holder of the control-plane key decided,
// within the last few seconds, that this statement (by the SHA-256 of its
// canonical text) may run on this target, and on which human signature that
// decision rests. It is not itself authority: invariant 1 says every statement
// rests on a human signature, so the Pilot re-verifies the grantor's or
// approver's sshsig signature carried in [Auth] against its own signers file,
// and re-checks the statement against the bound that signature covers. A
// compromised control plane can therefore mint marques, but only for statements
// some human already signed for.
//
// # Threat model
//
// The verifier treats every token as attacker-controlled until the signature
// has verified, and even then as the output of a possibly buggy peer.
//
//   - Algorithm confusion. The algorithm is pinned to EdDSA before any key is
//     touched. "none", HS256 (including the classic attack of using the public
//     key bytes as an HMAC secret), ES256, RS256 and every other algorithm
//     fail with [ErrAlgorithm]. The verification key is an ed25519.PublicKey,
//     never a JWK taken from the token; "jwk", "jku", "x5c", "x5u" and any
//     other header parameter are refused.
//   - Serialization confusion. Only compact serialization is accepted: exactly
//     three segments of strict (canonical, unpadded) base64url, so a token has
//     exactly one string form and trailing garbage, whitespace, a fourth
//     segment, or the JWS JSON serialization (the only way to carry several
//     signatures) are [ErrMalformed]. go-jose parses it with
//     jose.ParseSignedCompact and the algorithm list {EdDSA}; the deprecated
//     jose.ParseSigned is not used because it silently switches to the JSON
//     serialization on a leading "{".
//   - Header tricks. Unknown or duplicate header parameters, "crit" (including
//     "b64": false), a "kid" other than the configured key id, and a "typ"
//     other than [TokenType] are refused. "typ" is compared exactly (no case
//     folding, no "application/" prefix) because only this package writes it.
//   - Resource exhaustion. Tokens longer than [MaxTokenSize] are refused before
//     any decoding; JSON nesting depth is bounded.
//   - Payload confusion. The payload is parsed only after its signature
//     verifies. Duplicate keys, unknown claims, a missing required claim, an
//     unknown path or auth kind, an empty human signature, or an
//     inconsistent path/auth pair are [ErrClaims]. Unknown claims fail closed
//     on purpose: a newer control plane that adds a restricting claim must not
//     be silently obeyed in part by an older Pilot.
//   - Time. A marque is valid from nbf to exp, with a small leeway for clock
//     skew, and its lifetime (exp-iat) may not exceed the verifier's MaxTTL, so
//     a control plane misconfigured with a long TTL cannot produce long-lived
//     bearer tokens. Times are whole seconds (JWT NumericDate, integers only).
//   - Scope. [Verifier.Verify] requires the target and statement hash the Pilot
//     is about to execute; a marque for another target or another statement
//     fails with [ErrWrongTarget] or [ErrWrongStatement]. There is no way to
//     verify a marque "in general".
//
// # Single use
//
// This package does not remember marques it has seen and cannot stop a replay
// by itself. Exactly-once execution (invariant 6) is enforced by the Pilot: it
// inserts harbormaster.receipts(marque_id primary key) in the target, in the
// same transaction as the statement, keyed by the marque's jti. A replayed
// marque hits the unique key and rolls back, across any number of Pilots. The
// short lifetime bounds how long a leaked marque is worth trying at all; the
// random 128-bit jti makes receipt keys unguessable and collision-free.
//
// # Errors
//
// Every rejection from Verify wraps exactly one sentinel ([ErrMalformed],
// [ErrAlgorithm], [ErrSignature], [ErrExpired], [ErrNotYetValid],
// [ErrWrongTarget], [ErrWrongStatement], [ErrWrongIssuer], [ErrClaims]), with
// detail for logs; test with errors.Is. A wrong "kid" is [ErrSignature] (the
// token claims a key this verifier does not hold); a wrong "typ" or a refused
// header parameter is [ErrMalformed]; an over-long lifetime is [ErrClaims].
// Calling Verify without an [Expect] is a programming error and returns an
// error that wraps none of the sentinels. Any error means: do not run.
package marque
