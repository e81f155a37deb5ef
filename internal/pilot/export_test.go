package pilot

import "context"

// Begin and ExecuteIn expose the transaction opened ahead to the external
// tests; nothing outside the Pilot holds a Txn.
func (p *Pilot) Begin(ctx context.Context) (*Txn, error) { return p.begin(ctx, true) }

// ExecuteIn is Execute on the literal path in t.
func (p *Pilot) ExecuteIn(ctx context.Context, req Request, t *Txn) (*Result, error) {
	claims, pb, res := p.authorize(req)
	if res != nil {
		return res, nil
	}
	g, res := p.guard(req.SQL, pb, claims.Path, req.ExpectBefore != "")
	if res != nil {
		return res, nil
	}
	return p.run(ctx, claims, g, req, t, false)
}

// UnqualifyColumns exposes unqualifyColumns to the external tests.
var UnqualifyColumns = unqualifyColumns
