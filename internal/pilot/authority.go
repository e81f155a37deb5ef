package pilot

import (
	"errors"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
)

// Authority is how the gateway of this process hands a statement's
// authorization to its Pilot as a value (issue 25): the claims a marque
// would carry, without the Ed25519 signature and verification that would
// be the process vouching for itself. Everything else is verified exactly
// as for a token: the claims (marque.Verifier.VerifyGrant: form, issuer,
// lifetime, target, the statement's hash), the human signature over the
// bound and the bound itself, the static check and the guards; the
// receipt under the claims' id still makes the authorization single-use.
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
