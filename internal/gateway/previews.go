package gateway

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// Previews of referred statements (DESIGN.md section 3, invariant 10) are
// the referral service's (internal/referrals): nothing of a referred
// statement runs until a human asks, and then only its read-only preview,
// which every approver shares.

// Preview returns a request as a human sees it, with its preview: when it
// is waiting and has none (or refresh is set), the Pilot computes one now
// and it is stored for every approver (referrals.Service.Preview). A
// request that cannot be previewed says why in PreviewError. Only fronts
// that have authenticated a human may call it.
func (g *Gateway) Preview(ctx context.Context, id string, refresh bool) (*RequestView, error) {
	r, why, err := g.refs.Preview(ctx, id, refresh)
	if err != nil {
		return nil, err
	}
	v := view(r, "")
	v.PreviewError = why
	return v, nil
}

// preview decodes a view's stored preview.
func (v *RequestView) preview() (*pilot.Preview, error) {
	if len(v.Preview) == 0 {
		return nil, ErrNotPreviewed
	}
	var pv pilot.Preview
	if err := json.Unmarshal(v.Preview, &pv); err != nil {
		return nil, fmt.Errorf("gateway: %s: preview: %w", v.ID, err)
	}
	return &pv, nil
}
