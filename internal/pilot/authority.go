package pilot

import (
	"errors"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Authority is how the gateway of this process hands a statement's
// authorization to its Pilot as a value (issue 25): the claims a marque
// would carry, without the Ed25519 signature and verification that would
// be the process vouching for itself. Everything else is verified exactly
// as for a token: the claims (marque.Verifier.VerifyGrant: form, issuer,
// lifetime, target, the statement's hash), the human signature over the
// bound and the bound itself, the static check and the guards; the
// receipt under the claims' id still makes the authorization single-use,
// except for a read authorized by AuthorizeRead, which writes none.
//
// A Pilot in another process (pilot/remote) never has one: its requests
// come off the network, so they carry a signed marque, and the remote
// server never asks its Pilot for its Authority (internal/layers,
// TestOnlyTheGatewayAuthorizesInProcess).
type Authority struct {
	p *Pilot
}

// grant is the authorization an Authority attached to a Request.
type grant struct {
	by *Authority
	g  marque.Grant
	// read is set by AuthorizeRead.
	read bool
}

// Authority returns the Pilot's in-process authority.
func (p *Pilot) Authority() *Authority { return p.authority }

// Authorize returns req carrying g as its authorization, in place of a
// marque. g comes from marque.Minter.Grant: only the control plane's
// minter makes one, so an Authority alone authorizes nothing.
func (a *Authority) Authorize(req Request, g marque.Grant) Request {
	req.Marque = ""
	req.grant = &grant{by: a, g: g}
	return req
}

// AuthorizeRead is Authorize for a read whose caller records its
// decision and its outcome together once it has run, before any of its
// rows leave the process (DESIGN.md invariant 7): such a read writes no
// receipt. A read changes nothing, so there is no commit for a receipt to
// prove, and the authorization is a value that never leaves this
// process, so it cannot be replayed. A statement that is not a read
// writes its receipt whatever it was authorized by; only Execute (a
// statement in a transaction of its own) honours it.
func (a *Authority) AuthorizeRead(req Request, g marque.Grant) Request {
	req = a.Authorize(req, g)
	req.grant.read = true
	return req
}

// receiptless reports whether a statement of kind authorized by req
// writes no receipt (AuthorizeRead).
func (req Request) receiptless(kind sqlcheck.Op) bool {
	return req.grant != nil && req.grant.read && kind == sqlcheck.OpSelect
}

// granted checks an in-process authorization: given by this Pilot's
// Authority, and its claims checked by the Pilot's verifier exactly as a
// token's are once its signature holds (marque.Verifier.VerifyGrant: well
// formed, the issuer, the lifetime, valid now, this target and this
// statement).
func (p *Pilot) granted(req Request) (marque.Claims, error) {
	if req.grant.by != p.authority {
		return marque.Claims{}, errors.New("the authorization was not given by this Pilot's authority")
	}
	return p.verifier.VerifyGrant(req.grant.g, marque.Expect{Target: p.cfg.Target, StatementHash: marque.StatementHash(req.SQL)})
}
