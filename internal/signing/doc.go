// Package signing makes and checks the human signatures that every grant of
// authority in Harbormaster rests on: delegations, approvals, revocations and
// denials.
//
// # Format
//
// Signatures are OpenSSH "sshsig" signatures (PROTOCOL.sshsig), armored as
// -----BEGIN SSH SIGNATURE-----, so a human may sign with ssh-keygen and the
// system may verify with ssh-keygen, and the other way round:
//
//	ssh-keygen -Y sign -f ~/.ssh/id_ed25519 -n harbormaster-delegation file
//	ssh-keygen -Y verify -f allowed_signers -I alice@shop \
//	    -n harbormaster-delegation -s file.sig < file
//
// Sign writes byte for byte what ssh-keygen -Y sign writes (SHA-512 message
// hash, 70-column armor). Keys may be Ed25519, ECDSA on NIST P-256, P-384 or
// P-521, or RSA of 2048 to 16384 bits. Certificates, FIDO security keys
// (sk-*), DSA and passphrase-protected private keys are not supported; a
// human with one of those signs with ssh-keygen and a supported key.
//
// # Who may sign: the allowed-signers file
//
// Who may sign is an OpenSSH allowed-signers file, as git uses (see ALLOWED
// SIGNERS in ssh-keygen(1)), one key per line:
//
//	principals [options] keytype base64key [comment]
//
// Harbormaster's convention: each principal is NAME@TARGET, where NAME is the
// human's literal name (letters, digits, '.', '_', '-'; compared exactly,
// case included) and TARGET is a target name or an OpenSSH glob over target
// names ('*' and '?'). A principal may be negated with '!', as OpenSSH
// allows. For example:
//
//	alice@shop namespaces="harbormaster-delegation" ssh-ed25519 AAAA... alice
//	bob@*,!bob@bank valid-before="20261231Z" ssh-ed25519 AAAA... bob
//	carol@shop-* namespaces="harbormaster-approval,harbormaster-denial" ssh-ed25519 AAAA...
//
// alice may sign delegations for target shop; bob anything for every target
// but bank until the end of 2026; carol approvals and denials for shop-eu,
// shop-us and so on. Verify returns the NAME for which
// "ssh-keygen -Y verify -I NAME@TARGET" would accept the same signature with
// the same file, so ssh-keygen is an independent check of every decision.
//
// Options, as OpenSSH defines them: namespaces="p1,p2" (a pattern list; a
// line without it allows every namespace), valid-after="TIME" and
// valid-before="TIME", both inclusive at one-second resolution, TIME being
// YYYYMMDD[HHMM[SS]]. Harbormaster requires TIME to end in Z (UTC), which
// OpenSSH also accepts: without it OpenSSH reads the host's local time, and
// the same file would mean different things on different hosts. A date alone
// means 00:00:00 that day. cert-authority is refused.
//
// The file is parsed whole and refused whole: any malformed line, unknown
// option, unsupported key or principal outside the convention is an error
// naming the line, never a line silently skipped.
//
// # Threat model
//
// The allowed-signers file is the root of human authority. It is written by
// the operators, deployed to each Pilot out of band, and read by the Pilot
// itself: the Pilot verifies every signature it relies on with its own copy
// of the file and never takes the control plane's word that a human signed.
// Anyone who can write the file can grant themselves anything; protect it as
// the Pilot's credentials are protected.
//
// A valid signature proves that the holder of a listed private key signed
// exactly these bytes in this namespace. Namespaces separate the kinds of act
// (NamespaceDelegation, NamespaceApproval, NamespaceRevocation,
// NamespaceDenial): the namespace is inside the signed data, so a signature
// made for one kind never verifies as another, and an approval cannot be
// replayed as a delegation or a denial as an approval. Sign and Verify accept
// only namespaces beginning "harbormaster-", so this package neither makes
// nor accepts signatures meant for git or for other uses of the same keys.
// The namespaces option further limits which kinds a given key may sign.
//
// A signature does not name a target; the signed message must, and the
// caller must pass Verify the target named in the message it verified, or a
// signature by alice@shop over a message about bank would be accepted as
// alice's. Likewise freshness and single use are the message's business
// (its times, ids and the separately logged revocation state), not the
// signature's: a valid signature stays valid.
//
// Signature bytes are not unique (ECDSA signatures are malleable, and one
// message may be signed twice): identify a signed object by a hash of the
// signed message, never of the signature.
//
// Every error from Verify means "not authorized": ErrBadSignature when the
// bytes are not a signature of the message in the namespace, ErrUnknownSigner
// when the signature is good but no line allows its key for this namespace,
// target and time. A key listed under two different names for the same target
// is refused as unknown: which human signed would be ambiguous, and names
// matter to separation of duties. Inputs are bounded before parsing
// (MaxSignatureSize, MaxAllowedSignersSize, MaxPrivateKeySize), and glob
// matching takes at most the product of pattern and name lengths, so hostile
// input costs little.
//
// Library code here never reads the clock: the caller passes the time at
// which validity windows are judged.
package signing
