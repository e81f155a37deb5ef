// Package marque mints and verifies marques: signed, single-use, short-lived
// tokens that authorize exactly one canonical statement on one target.
//
// The control plane mints a marque (DESIGN.md section 3, step 7) after the
// decision is durable in the logbook; the Pilot verifies it (step 8) before it
// does anything else with a statement. A marque is an hm2 token, signed with
// the control plane's Ed25519 key. This package defines the format; it is
// small enough to specify whole.
//
// # The hm2 format
//
//	token     = "hm2." B64(payload) "." B64(signature)
//	signature = Ed25519(key, "harbormaster-marque-v2" 0x00 || str(key id) || payload)
//	payload   = str(jti) str(iss) str(request_id) str(sub) str(target)
//	            str(statement_sha256) str(path)
//	            str(auth.kind) str(auth.delegation_id) str(auth.bound_sha256)
//	            str(auth.signer) str(auth.signature) str(auth.approval_sha256)
//	            str(judgment_id) opt(rule) opt(max_rows)
//	            i64(iat) i64(nbf) i64(exp)
//	str(s)    = uint16(len(s)) || s       (big-endian length; s valid UTF-8)
//	opt(n)    = 0x00                      (absent)
//	          | 0x01 || i64(n)            (present)
//	i64(n)    = n as 8 bytes, big-endian two's complement
//
// B64 is base64url without padding and with zero trailing bits (RFC 4648
// section 5, canonical). Ed25519 is pure Ed25519 (RFC 8032, not Ed25519ph or
// Ed25519ctx), verified as RFC 8032 and FIPS 186-5 specify (cofactored,
// canonical encodings; curve25519-voi with the key's tables precomputed);
// the verifier accepts exactly 64 signature bytes. Times are
// whole seconds since the Unix epoch. An empty string is an absent optional
// string (judgment_id, auth.delegation_id, auth.bound_sha256,
// auth.approval_sha256). Nothing follows exp. The claims and their rules are
// those of [Claims]; the golden tokens in testdata/golden.txt pin the bytes.
//
// The key id is signed but not sent: the verifier knows which key id it
// holds, puts it into the message it checks, and a marque signed under
// another key id fails the signature. Its length prefix keeps the boundary
// between key id and payload unique. A verifier that holds several keys (a
// rotation) would try each; the format need not change for it.
//
// Every claims value has exactly one payload, and every payload one token
// string: fields are in a fixed order with fixed-width lengths and integers,
// the presence flags are 0x00 or 0x01 only, base64url is canonical and a
// token is nothing but its three segments. Decoding a payload and encoding it
// again gives back the same bytes (FuzzPayload), so there is no second
// spelling of a claims value for two readers to disagree about.
//
// hm2 replaced a JWS (go-jose, alg EdDSA, JSON claims) with the same
// claims. The version prefix and the signing context make the two disjoint:
// a JWS marque, even one signed by the same key, is refused as another
// encoding, and no JWS signing input starts with the context. Old JWS
// marques do not verify after the upgrade: they live seconds, so a control
// plane and its Pilots are upgraded together, and a marque minted before is
// refused (marque_invalid), never run. The same key signs the logbook's
// checkpoints, signed notes whose text never holds a NUL byte, so the NUL in
// the context keeps a checkpoint signature and a marque signature from
// standing for each other.
//
// hm2 is leaner than the JWS (no header, no JSON, no reflection: 578 bytes
// instead of 932 for the tests' claims, and about a third less time to mint
// and to verify, most of what is left being Ed25519 itself; see
// docs/performance.md) and keeps every property below. PASETO v4.public was
// measured too: it pins the algorithm the same way, but its claims are JSON
// with RFC 3339 times, so it keeps the JSON cost (it verified slower than
// the JWS) and the duplicate-member and case-folding questions that a fixed
// binary order does not have.
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
//   - Algorithm confusion. Nothing in a token names an algorithm or a key.
//     The version, the text before the first dot, must be exactly "hm2",
//     which means Ed25519 under the context above; anything else (a JWS of
//     any "alg", including "none" and HS256 keyed with the public key bytes;
//     a PASETO; another hm version; "HM2") fails with [ErrAlgorithm] before
//     any key is touched. The verification key is an ed25519.PublicKey from
//     the configuration, never anything taken from the token.
//   - Serialization confusion. A token is the version and exactly two
//     segments of strict base64url: padding, CR or LF (which Go's decoder
//     would skip), whitespace, any byte outside the alphabet, non-zero
//     trailing bits, a signature segment of other than 86 characters, an
//     empty segment, a fourth segment, or a JSON serialization are
//     [ErrMalformed]. So a token has exactly one string form.
//   - Header tricks. There is no header: no "kid", "typ", "crit", "jwk" or
//     "b64" to forge. The signing context binds the signature to this format
//     and version (a signature made for any other purpose, or over the
//     payload alone, does not verify), and the key id in the signed message
//     pins the key.
//   - Resource exhaustion. Tokens longer than [MaxTokenSize] are refused before
//     any decoding; the payload is read in one pass with no recursion, and
//     every length is checked against the bytes left.
//   - Payload confusion. The payload is decoded only after its signature
//     verifies, and strictly: a field that runs past the end or a presence
//     flag other than 0x00 or 0x01 is [ErrMalformed]; bytes after exp (how an
//     unknown claim, or a claim written twice, would show), a missing
//     required claim, invalid UTF-8, an unknown path or auth kind, an empty
//     human signature, or an inconsistent path/auth pair are [ErrClaims].
//     There are no names to fold in case or to repeat. Unknown claims fail
//     closed on purpose: a newer control plane that adds a restricting claim
//     must not be silently obeyed in part by an older Pilot, so such a change
//     is a new version ("hm3"), which an hm2 Pilot refuses as
//     [ErrAlgorithm].
//   - Time. A marque is valid from nbf to exp, with a small leeway for clock
//     skew, and its lifetime (exp-iat) may not exceed the verifier's MaxTTL, so
//     a control plane misconfigured with a long TTL cannot produce long-lived
//     bearer tokens. Times are whole seconds by construction, after 1970 and
//     before the year 10000.
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
// detail for logs; test with errors.Is. A token of another format or version
// is [ErrAlgorithm]; a marque signed under another key id is [ErrSignature];
// an over-long lifetime is [ErrClaims].
// Calling Verify without an [Expect] is a programming error and returns an
// error that wraps none of the sentinels. Any error means: do not run.
package marque
