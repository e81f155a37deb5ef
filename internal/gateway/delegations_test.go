package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
)

// TestAddDelegationReportWithholdsRowEstimates: POST /v1/delegations needs
// no token, and a refused upload (an unsigned one) carries its compile
// report. The report's lint on a select rule without a fence quoted the
// table's planner estimate ("a select rule without a fence on
// public.secrets (about 20000 rows) reads every row"), so anyone who
// reached the API learned how many rows any table holds, a table no rule
// of theirs names included (DESIGN.md invariant 10). An upload is now
// compiled against the catalog without its estimates; the grantor's own
// harbormaster delegation compile --target keeps the lint.
// Found in review 4.
func TestAddDelegationReportWithholdsRowEstimates(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, nil)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	yaml := []byte(`sentence: read every secret
grantee: agent:probe
target: shop
expires: 2027-12-31T00:00:00Z
allow:
  - op: select
    table: public.secrets
    columns: [id]
    max_rows: 10
`)
	report := func(rows int) string {
		t.Helper()
		for _, q := range []string{`DROP TABLE IF EXISTS secrets`, `CREATE TABLE secrets (id bigint, v text)`,
			`INSERT INTO secrets SELECT g, 'x' FROM generate_series(1, $1::int) g`, `ANALYZE secrets`} {
			var args []any
			if q[0] == 'I' {
				args = append(args, rows)
			}
			if _, err := conn.Exec(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.sys.Pilot.RefreshCatalog(ctx); err != nil {
			t.Fatal(err)
		}
		_, rep, err := f.sys.Gateway.AddDelegation(ctx, yaml, []byte("not a signature"), "api")
		var de *gateway.DelegationError
		if !errors.As(err, &de) || rep == nil {
			t.Fatalf("an unsigned upload: %v (report %v), want it refused with its report", err, rep)
		}
		js, _ := json.Marshal(rep)
		return string(js)
	}
	few, many := report(50), report(20000)
	if few != many {
		t.Errorf("an unsigned upload's report tells a table of 50 rows from one of 20000:\n%s\n%s", few, many)
	}
}
