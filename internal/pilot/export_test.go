package pilot

import (
	"context"
	"time"
)

// BeginTxn and ExecuteIn expose the transaction opened ahead to the external
// tests; nothing outside the Pilot holds a Txn.
func (p *Pilot) BeginTxn(ctx context.Context) (*Txn, error) { return p.begin(ctx, true) }

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

// RunApprovedGuarded runs sql as the approved path guards it for an
// approval of maxRows rows, without the preview's comparison, in a
// transaction it rolls back: what the row cap alone lets through when a
// run reaches more rows than its preview did.
func (p *Pilot) RunApprovedGuarded(ctx context.Context, sql string, maxRows int64) (int64, error) {
	a, err := p.analyzeRaw(sql)
	if err != nil {
		return 0, err
	}
	plan, err := buildPreview(a, p.Catalog())
	if err != nil {
		return 0, err
	}
	g, err := approvedGuards(a, plan, maxRows)
	if err != nil {
		return 0, err
	}
	t, err := p.beginAt(ctx, true, true)
	if err != nil {
		return 0, err
	}
	defer t.Close()
	rows, err := t.conn.Query(ctx, g.text(true))
	if err != nil {
		return 0, err
	}
	out, err := p.statement(rows, g, true)
	return out.n, err
}

// SetGenerationTTL sets how long a template's learned catalog generation
// is used, until the test ends.
func SetGenerationTTL(t interface{ Cleanup(func()) }, d time.Duration) {
	old := generationTTL
	generationTTL = d
	t.Cleanup(func() { generationTTL = old })
}
