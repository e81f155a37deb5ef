package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Previews of referred statements (DESIGN.md section 3, invariant 10).
//
// A referred statement is outside every signed bound, and nothing of it
// runs until a human asks: not on referral, not in a transaction that
// rolls back, not for the Leadsman. Rolled back is not invisible: the row
// locks a rehearsed UPDATE held, the sequence values a rehearsed INSERT
// drew and the memory its rows took on this node were each an oracle on
// rows the agent may not read. So a referral only queues the request (and
// tells the webhook). Its evidence is a preview, which the Pilot computes
// read-only (pilot.Preview) when a human asks for it: opening the request
// in the console, `queue show`, GET /v1/requests/{id} or the approval
// proposal with a human's signature. The first preview is stored and
// every approver shares it, until a human asks to refresh it. Nothing an
// agent can send reaches this code: every caller is behind a human's
// signature or console session.

// Preview returns a request as a human sees it, with its preview: when it
// is waiting and has none (or refresh is set), the Pilot computes one now
// and it is stored for every approver. A request that cannot be previewed
// says why in PreviewError. Only fronts that have authenticated a human
// may call it.
func (g *Gateway) Preview(ctx context.Context, id string, refresh bool) (*RequestView, error) {
	v, err := g.Request(ctx, id, "")
	if err != nil {
		return nil, err
	}
	if v.Status != StatusWaiting || v.PreviewSHA256 != "" && !refresh {
		return v, nil
	}
	p, ok := g.targets[v.Target]
	if !ok {
		return nil, fmt.Errorf("gateway: %w: %q", ErrUnknownTarget, v.Target)
	}
	if v.CanonicalSQL == "" {
		v.PreviewError = unpreviewableWhy(v.Reasons)
		return v, nil
	}
	pv, js, err := p.Preview(ctx, v.CanonicalSQL)
	switch {
	case errors.Is(err, pilot.ErrNotPreviewable):
		// Its text can quote the target's error: humans only, as all of this.
		v.PreviewError = err.Error() + ": it can only be denied here (or run by hand)"
		return v, nil
	case err != nil:
		g.cfg.Logger.Warn("preview", "request", id, "err", err)
		v.PreviewError = "the preview could not be computed (" + err.Error() + "); try again"
		return v, nil
	}
	if _, err := g.led.SetPreview(ctx, id, string(js), pv.Digest, refresh); err != nil {
		return nil, fmt.Errorf("gateway: %s: preview: %w", id, err)
	}
	// Read back: another approver's preview may have been stored first.
	return g.Request(ctx, id, "")
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

var reasonCodeRE = regexp.MustCompile(`\[([a-z_]+)\]$`)

// unpreviewableWhy says why a referred request has no checked statement
// to preview: stacked statements, or what the check said.
func unpreviewableWhy(reasons []string) string {
	var codes []string
	for _, r := range reasons {
		if m := reasonCodeRE.FindStringSubmatch(r); m != nil && !slices.Contains(codes, m[1]) {
			codes = append(codes, m[1])
		}
	}
	switch {
	case slices.Contains(codes, sqlcheck.CodeMultipleStatements):
		return "the statement is stacked (several statements sent as one): it can only be denied"
	case slices.Contains(codes, sqlcheck.CodeParseError):
		return "the statement does not parse: it can only be denied"
	case slices.Contains(codes, sqlcheck.CodeEmptyStatement):
		return "the statement is empty (only comments or whitespace): it can only be denied"
	case len(codes) > 0:
		return "the check produced no statement to run (" + strings.Join(codes, ", ") + "): it can only be denied"
	}
	return "the check produced no statement to run: it can only be denied"
}
