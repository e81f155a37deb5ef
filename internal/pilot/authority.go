package pilot

import (
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
)

// Authority is how the gateway of this process hands a statement's
// authorization to its Pilot as a value (issue 25): the claims a marque
// would carry, without the Ed25519 signature and verification that would
// be the process vouching for itself. Everything else is verified exactly
// as for a token: the target, the statement's hash, the claims' lifetime,
// the human signature over the bound and the bound itself, the static
// check and the guards; the receipt under the claims' id still makes the
// authorization single-use.
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
	by     *Authority
	claims marque.Claims
}

// Authority returns the Pilot's in-process authority.
func (p *Pilot) Authority() *Authority { return p.authority }

// Authorize returns req carrying claims as its authorization, in place of
// a marque. claims come from marque.Minter.Grant.
func (a *Authority) Authorize(req Request, claims marque.Claims) Request {
	req.Marque = ""
	req.grant = &grant{by: a, claims: claims}
	return req
}

// granted checks an in-process authorization as Verifier.Verify checks a
// token's claims after its signature: given by this Pilot's Authority,
// for this target and this statement, and within its lifetime.
func (p *Pilot) granted(req Request, now time.Time) (marque.Claims, string) {
	g := req.grant
	c := g.claims
	switch {
	case g.by != p.authority:
		return c, "the authorization was not given by this Pilot's authority"
	case c.Target != p.cfg.Target:
		return c, "the authorization is for target " + c.Target + ", not " + p.cfg.Target
	case c.StatementHash != marque.StatementHash(req.SQL):
		return c, "the authorization names another statement"
	case c.ID == "" || c.RequestID == "" || c.Principal == "":
		return c, "the authorization has no id, request or principal"
	case now.Before(c.NotBefore.Add(-time.Second)) || !now.Before(c.Expiry.Add(time.Second)):
		return c, "the authorization is not valid now"
	}
	return c, ""
}
