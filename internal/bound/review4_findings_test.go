package bound

import "testing"

// TestReview4FenceThatCanRaiseIsLinted: a read fence is evaluated on
// every row the fence view scans, those outside it too, so a fence that
// can fail on a value ((ref)::int > 1000 over a text column) fails every
// read of the table when a row outside it holds such a value, and the
// grantee learns that one does (DESIGN.md invariant 10; found in review:
// nothing told the grantor). Such a select fence is now linted; fences of
// comparisons with constants are not.
func TestReview4FenceThatCanRaiseIsLinted(t *testing.T) {
	t.Parallel()
	shop := shopCatalog(t)
	const msg = "the fence can fail on some values"
	for _, tc := range []struct {
		fence string
		lint  bool
	}{
		{"split_part(status, '.', 1)::int > 0", true},
		{"total_cents / 100 > 5", true},
		{"total_cents * 1000 > 5", true},
		{"status::int = 3", true},
		{"length(status) > 3", true},
		{"status ~ customer_id::text", true},
		{"status LIKE status", true},
		{"status = 'pending'", false},
		{"status = 'pending' and created_at < now() - interval '1 day'", false},
		{"status IN ('pending', 'failed') OR customer_id BETWEEN 1 AND 10", false},
		{"status IS NOT NULL AND NOT (total_cents = 0)", false},
		{"status LIKE 'pend%' AND customer_id::text = '3'", false},
		{"status IS DISTINCT FROM 'x'", false},
	} {
		src := delegationWith(rule("op: select", "table: orders", "columns: [id]", "fence: \""+tc.fence+"\"", "max_rows: 5"))
		_, rep := compileSrc(t, src, shop)
		if !rep.Signable {
			t.Fatalf("%s: %+v", tc.fence, rep.Problems)
		}
		if _, got := findProblem(rep.Lints, "allow[0].fence", msg); got != tc.lint {
			t.Errorf("fence %s: lint %v, want %v (lints %+v)", tc.fence, got, tc.lint, rep.Lints)
		}
	}
}
