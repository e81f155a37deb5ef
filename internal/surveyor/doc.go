// Package surveyor is the Tier B conformance judge: a panel of
// separately-framed model calls with exactly two outcomes, conforms or refer
// (DESIGN.md section 7, the Surveyor EDR).
//
// Threat model. The statement is attacker-controlled text, and its comments,
// string literals and the rows it touches are a fine place for an
// instruction aimed at whatever reads them. Nothing here makes the panel
// resistant to that: three calls to one model are correlated, and a prompt
// that fools one juror will often fool its siblings. What holds is the
// deterministic outer bound a human signed, which the Pilot enforces and
// verifies itself whatever the panel said. The panel narrows careless error.
//
// Invariants, each tested:
//   - Exactly two outcomes. Unanimous CONFORMS from all n jurors is conforms;
//     dissent, a failure to answer, a timeout, a malformed or wrong-nonce
//     answer is refer. No configuration makes uncertainty resolve to conforms.
//   - n >= 3 (MinJurors), with the three mandatory framings: certify, refute,
//     and the shape screen, which never sees the residual clause or the
//     sentence and contributes a veto. Extra jurors repeat the framings.
//   - Provider diversity: with p providers configured, no provider supplies
//     more than ceil(n/p) jurors when all are available. A panel that misses
//     that (one provider, providers down, providers failing mid-judgment) is
//     marked correlated in the judgment, and the caller raises the
//     delegation's audit sampling.
//   - The judge sees only what one judgment needs: the signed sentence,
//     residual clause and bound (never taken from the request), the
//     canonical statement and the rehearsal report as untrusted data in
//     blocks fenced by a random token, with string literals listed as data.
//   - Prompts are a versioned bundle embedded in the binary (bundle/); the
//     version is recorded in every judgment.
package surveyor
