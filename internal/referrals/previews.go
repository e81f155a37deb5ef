package referrals

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/harbormaster-dev/harbormaster/internal/ledger"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// Previewer is the Pilot's preview role: it reads what a statement would
// reach and write, without running it. It is all of a target this package
// may call.
type Previewer = pilot.Previewer

// Preview returns a request as a human sees it, with its preview: when it
// is waiting and has none (or refresh is set), the Pilot computes one now
// and it is stored for every approver. A request that cannot be previewed
// is returned with why, for humans (the gateway's
// RequestView.PreviewError); why is "" otherwise. Only fronts that have
// authenticated a human may reach it: it is the one place a referred
// statement reaches its target.
func (s *Service) Preview(ctx context.Context, id string, refresh bool) (r *ledger.Request, why string, err error) {
	r, err = s.led.Get(ctx, id, "")
	if err != nil {
		return nil, "", err
	}
	if r.Status != ledger.StatusWaiting || r.PreviewSHA256 != "" && !refresh {
		return r, "", nil
	}
	p, err := s.cfg.Target(r.Target)
	if err != nil {
		return nil, "", err
	}
	if r.Canonical == "" {
		return r, unpreviewableWhy(r.Reasons), nil
	}
	pv, js, err := p.Preview(ctx, r.Canonical)
	switch {
	case errors.Is(err, pilot.ErrNotPreviewable):
		// Its text can quote the target's error: humans only, as all of this.
		return r, err.Error() + ": it can only be denied here (or run by hand)", nil
	case err != nil:
		s.cfg.Logger.Warn("preview", "request", id, "err", err)
		return r, "the preview could not be computed (" + err.Error() + "); try again", nil
	}
	if _, err := s.led.SetPreview(ctx, id, string(js), pv.Digest, refresh); err != nil {
		return nil, "", fmt.Errorf("referrals: %s: preview: %w", id, err)
	}
	// Read back: another approver's preview may have been stored first.
	if r, err = s.led.Get(ctx, id, ""); err != nil {
		return nil, "", err
	}
	return r, "", nil
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
