package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp/pgtmptest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// reservedTable has columns named by reserved words, which PostgreSQL
// allows quoted.
const reservedTable = `CREATE TABLE public.slots (id int PRIMARY KEY, "end" date NOT NULL, "order" int NOT NULL, "user" text NOT NULL);
INSERT INTO public.slots VALUES (1, '2026-01-31', 1, 'ann'), (2, '2026-02-28', 2, 'bob'), (3, '2026-03-31', 3, 'ann');`

// reservedDelegation lists the columns as the YAML spells them: a
// reserved word bare or in YAML's quotes; fences and checks reference
// them quoted, as SQL does.
const reservedDelegation = `sentence: Read and reorder ann's slots.
grantee: agent:demo
target: shop
expires: EXPIRES
allow:
  - op: select
    table: public.slots
    columns: [id, end, "order", user]
    fence: '"user" = ''ann'''
    max_rows: 10
  - op: update
    table: public.slots
    columns: ["order", end]
    fence: '"user" = ''ann'' AND id < 3'
    check: '"order" BETWEEN 0 AND 100'
    max_rows: 1
`

// TestReservedWordColumns: a delegation can grant columns whose names are
// reserved words ("end", "order", "user"), with a fence and a check on
// them, and statements that reference them quoted run through the
// gateway and the Pilot's fence view and guards against real PostgreSQL,
// with the right rows.
func TestReservedWordColumns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtmptest.NewDatabase(t, shared.Server(t))
	gatewaytest.LoadShop(t, dsn)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, reservedTable, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	sys := gatewaytest.Start(t, gatewaytest.Options{TargetDSN: dsn, StorePath: storeLocation(t), Keys: gatewaytest.NewKeys(t)})
	yaml := []byte(strings.Replace(reservedDelegation, "EXPIRES", time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), 1))
	sig := gatewaytest.Sign(t, sys.Opts.Keys.Grantor, gatewaytest.Canonical(t, yaml, sys.Pilot.Catalog()))
	if _, _, err := sys.Gateway.AddDelegation(ctx, yaml, sig, "slots.yaml"); err != nil {
		t.Fatal(err)
	}
	submit := func(sql string) *gateway.Response {
		t.Helper()
		resp, err := sys.Gateway.Submit(ctx, gatewaytest.Agent, gatewaytest.Target, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return resp
	}
	rows := func(resp *gateway.Response, cols ...string) string {
		var b strings.Builder
		for _, r := range resp.Rows {
			for i, c := range cols {
				if i > 0 {
					b.WriteString(" ")
				}
				fmt.Fprint(&b, r[slices.Index(resp.Keys(), c)])
			}
			b.WriteString(";")
		}
		return b.String()
	}

	// A read sees ann's rows only (the fence view), every column by its name.
	resp := submit(`SELECT id, "end", "order", "user" FROM slots ORDER BY "order"`)
	if resp.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("the read: %s %q", resp.Outcome, resp.Reasons)
	}
	if got, want := strings.Join(resp.Keys(), ","), "id,end,order,user"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
	if got, want := rows(resp, "id", "order", "user"), "1 1 ann;3 3 ann;"; got != want {
		t.Errorf("the read returned %q, want %q", got, want)
	}
	resp = submit(`SELECT "order" FROM slots WHERE "user" = 'ann' AND "end" > '2026-02-01'`)
	if got, want := rows(resp, "order"), "3;"; resp.Outcome != gateway.OutcomeExecuted || got != want {
		t.Errorf("a filtered read: %s %q, rows %q, want %q", resp.Outcome, resp.Reasons, got, want)
	}

	// A write inside the fence and the check runs.
	resp = submit(`UPDATE slots SET "order" = 7, "end" = '2026-04-30' WHERE id = 1 AND "user" = 'ann'`)
	if resp.Outcome != gateway.OutcomeExecuted || resp.RowsAffected != 1 {
		t.Fatalf("the update: %s %q", resp.Outcome, resp.Reasons)
	}
	// A row outside the read fence is not there for the agent.
	if resp := submit(`UPDATE slots SET "order" = 9 WHERE id = 2`); resp.Outcome != gateway.OutcomeExecuted || resp.RowsAffected != 0 {
		t.Errorf("an update of bob's row: %s, %d row(s), want executed on none", resp.Outcome, resp.RowsAffected)
	}
	// Outside the write fence (the Pilot's guard), or past the check: the
	// Pilot rolls it back and refers it.
	var referred string
	for sql, why := range map[string]string{`UPDATE slots SET "order" = 9 WHERE id = 3`: "fence", `UPDATE slots SET "order" = 500 WHERE id = 1 AND "user" = 'ann'`: "check"} {
		resp := submit(sql)
		if resp.Outcome != gateway.OutcomeReferred || !strings.Contains(strings.Join(resp.Reasons, " "), why) {
			t.Errorf("%s: %s %q, want it referred by the %s guard", sql, resp.Outcome, resp.Reasons, why)
		}
		if why == "fence" {
			referred = resp.RequestID
		}
	}
	// Bob approves the first after its preview, whose images name the
	// columns: it runs.
	act, err := sys.Gateway.ProposeApproval(ctx, referred)
	if err != nil {
		t.Fatal(err)
	}
	if v := sys.Previewed(t, referred); v.PreviewError != "" || !strings.Contains(string(v.Preview), `"order"`) {
		t.Errorf("the preview: %s %s", v.PreviewError, v.Preview)
	}
	asig, err := sys.Opts.Keys.Approver.Sign(signing.NamespaceApproval, act)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sys.Gateway.Approve(ctx, referred, act, asig); err != nil || v.Status != gateway.StatusExecuted || v.RowsAffected != 1 {
		t.Fatalf("the approval: %v %+v", err, v)
	}
	got := map[int]string{}
	r, err := conn.Query(ctx, `SELECT id, "order", "end"::text FROM public.slots`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var id, order int
		var end string
		if err := r.Scan(&id, &order, &end); err != nil {
			t.Fatal(err)
		}
		got[id] = fmt.Sprintf("%d %s", order, end)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{1: "7 2026-04-30", 2: "2 2026-02-28", 3: "9 2026-03-31"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the table is %v, want %v", got, want)
	}
}
