package referrals

import (
	"strings"
	"testing"
)

// TestUnrehearsableWhy: why a request with no checked statement has no
// preview (its preview_error) names what it is, stacked statements first.
func TestUnrehearsableWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reasons []string
		want    string
	}{
		{[]string{"2 statements were sent: send exactly one [multiple_statements]"}, "stacked"},
		{[]string{"syntax error at or near \"SELEC\" [parse_error]"}, "does not parse"},
		{[]string{"the statement is empty [empty_statement]"}, "empty"},
		{[]string{"a reason [some_code]"}, "(some_code)"},
		{nil, "no statement to run"},
	} {
		if got := unpreviewableWhy(c.reasons); !strings.Contains(got, c.want) {
			t.Errorf("%q: %q, want it to say %q", c.reasons, got, c.want)
		}
	}
}
