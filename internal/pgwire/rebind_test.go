package pgwire_test

import (
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgwire"
)

// TestBoundAgain: a prepared statement bound again and again (pgx keeps
// its statements prepared; from the second Bind the front renders the
// statement by its splice instead of its tree) reaches the statement path
// as the statement with those values, however they are quoted, and
// answers as the first Bind does.
func TestBoundAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	c := f.connect(t, gatewaytest.Agent, gatewaytest.AgentToken, "disable")

	const read = "SELECT id, status FROM orders WHERE id = $1 AND status <> $2"
	for i, not := range []string{"shipped", "it's", `back\slash`, "$1", "x'; DROP TABLE orders; --"} {
		var id int64
		var status string
		if err := c.QueryRow(ctx, read, 5+i, not).Scan(&id, &status); err != nil {
			t.Fatalf("bind %d (%q): %v", i+1, not, err)
		}
		if id != int64(5+i) || status != "pending" {
			t.Fatalf("bind %d: order %d %q, want order %d pending", i+1, id, status, 5+i)
		}
	}

	const write = "UPDATE orders SET status = $1, updated_at = now() WHERE id = $2"
	for i, id := range []int{3, 7, 8} {
		tag, err := c.Exec(ctx, write, "retrying", id)
		if err != nil || tag.String() != "UPDATE 1" {
			t.Fatalf("bind %d: %q %v", i+1, tag, err)
		}
	}
	// A value the delegation does not allow: referred, with the value in
	// the request's statement quoted as PostgreSQL would.
	_, err := c.Exec(ctx, write, `it's \ odd`, 9)
	pe := pgErr(t, err, pgwire.StateReferred)
	view, err := f.sys.Gateway.Request(ctx, pe.Where, gatewaytest.Agent)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(view.SQL, `E'it''s \\ odd'`) {
		t.Fatalf("the referred statement is %q, want the value quoted", view.SQL)
	}
	if s := gatewaytest.Snapshot(t, f.dsn, "orders"); strings.Contains(s, "odd") {
		t.Fatal("a referred statement changed the target")
	}
}
