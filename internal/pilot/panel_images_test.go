package pilot_test

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/marque"
	"github.com/harbormaster-dev/harbormaster/internal/pilot"
)

// TestPanelSeesOnlyWhatTheAgentMayRead (issue 22, finding 7): the row
// images a surveyed statement's rehearsal hands the panel held the old
// values of every column the write rule lists, so a column the agent may
// write but not read (email here) reached the jurors, and with an
// obedient juror and a statement whose verdict depends on what it saw,
// the verdict leaked it. The before images hold only the columns the
// select rule lists; the after images add the columns the statement
// writes, whose values the agent wrote.
func TestPanelSeesOnlyWhatTheAgentMayRead(t *testing.T) {
	f := newFixture(t)
	const name = "write-only-email.yaml"
	f.addBound(t, name, []byte(`sentence: Fix obvious typos in EU customers' names and emails, without reading the emails.
grantee: agent:demo
target: shop
expires: 2099-01-01T00:00:00Z
allow:
  - op: select
    table: public.customers
    columns: [id, name, region]
    fence: region = 'EU'
    max_rows: 200
  - op: update
    table: public.customers
    columns: [name, email]
    fence: region = 'EU'
    max_rows: 1
    residual: only obvious data-entry typos
`))
	for _, c := range []struct {
		sql         string
		after       []string
		emailAfter  any
		nameAfter   any
		writesEmail bool
	}{
		{sql: "UPDATE customers SET name = 'John Smith' WHERE id = 3", after: []string{"id", "name", "region"}, nameAfter: "John Smith"},
		{sql: "UPDATE customers SET email = 'john@example.com' WHERE id = 3", after: []string{"email", "id", "name", "region"},
			emailAfter: "john@example.com", nameAfter: "Jonh Smith", writesEmail: true},
	} {
		res, err := f.pilot.Rehearse(t.Context(), c.sql, f.bounds[name], f.auth(name), "agent:demo", marque.PathSurveyed)
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != pilot.Rehearsed || res.Rehearsal == nil || len(res.Rehearsal.Before) != 1 || len(res.Rehearsal.After) != 1 {
			t.Fatalf("%s: %s %v %+v", c.sql, res.Outcome, res.Reasons, res.Rehearsal)
		}
		before, after := res.Rehearsal.Before[0], res.Rehearsal.After[0]
		if _, ok := before["email"]; ok || len(before) != 3 || before["name"] != "Jonh Smith" {
			t.Errorf("%s: before image %v; want id, name and region only: the old email is write-only", c.sql, before)
		}
		if len(after) != len(c.after) || after["name"] != c.nameAfter {
			t.Errorf("%s: after image %v; want the columns %v", c.sql, after, c.after)
		}
		if email, ok := after["email"]; ok != c.writesEmail || email != c.emailAfter {
			t.Errorf("%s: after image's email %v (shown %v); want %v", c.sql, email, ok, c.emailAfter)
		}
	}
}
