package gateway_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

// TestDescribe: Describe tells a covered statement's parameter and
// column types, through the Pilot (in process or remote), and refuses
// everything else with a NotDescribedError, without a request, a
// logbook entry or a queued item.
func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, remote := range []bool{false, true} {
		f := newFixture(t, func(o *gatewaytest.Options) { o.RemotePilot = remote })
		g := f.sys.Gateway
		ctx := context.Background()
		seq, _, err := f.sys.Logbook.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			sql    string
			params []uint32
			cols   []string
			types  []uint32
		}{
			{"SELECT id, status FROM orders WHERE id = $1", []uint32{20}, []string{"id", "status"}, []uint32{20, 25}},
			{"UPDATE orders SET status = $1, updated_at = now() WHERE id = $2", []uint32{25, 20}, nil, nil},
			// Covered on the surveyed path only (a residual clause).
			{"UPDATE customers SET name = $1 WHERE id = $2 RETURNING id, name", []uint32{25, 20}, []string{"id", "name"}, []uint32{20, 25}},
			{"SELECT id, name FROM customers WHERE id = $1::int4", []uint32{23}, []string{"id", "name"}, []uint32{20, 25}},
		} {
			d, err := g.Describe(ctx, gatewaytest.Agent, gatewaytest.Target, c.sql)
			if err != nil {
				t.Errorf("remote %v: %s: %v", remote, c.sql, err)
				continue
			}
			if !reflect.DeepEqual(d.ParamTypes, c.params) || !reflect.DeepEqual(d.Columns, c.cols) || !reflect.DeepEqual(d.ColumnTypes, c.types) {
				t.Errorf("remote %v: %s: %+v, want %v %v %v", remote, c.sql, d, c.params, c.cols, c.types)
			}
		}

		for _, c := range []struct {
			principal, sql, code string
		}{
			{gatewaytest.Agent, "SELECT id, total_cents FROM orders WHERE id = $1", gateway.NotDescribedReferred},
			{gatewaytest.Agent, "DELETE FROM orders WHERE id = $1", gateway.NotDescribedReferred},
			{gatewaytest.Agent, "SELECT id FROM no_such_table WHERE id = $1", gateway.NotDescribedReferred},
			{gatewaytest.Other, "SELECT id, status FROM orders WHERE id = $1", gateway.NotDescribedReferred},
			{gatewaytest.Agent, "SELECT id FROM orders WHERE id = $1 FOR UPDATE", gateway.NotDescribedRejected},
			{gatewaytest.Agent, "DROP TABLE orders", gateway.NotDescribedRejected},
			{gatewaytest.Agent, "SELECT id FROM orders WHERE id = $1; SELECT 1", gateway.NotDescribedRejected},
			{gatewaytest.Agent, "SELECT id FROM orders WHERE", gateway.NotDescribedRejected},
		} {
			d, err := g.Describe(ctx, c.principal, gatewaytest.Target, c.sql)
			var nd *gateway.NotDescribedError
			if !errors.As(err, &nd) || nd.Code != c.code || d != nil {
				t.Errorf("remote %v: %s as %s: %+v %v, want not described (%s)", remote, c.sql, c.principal, d, err, c.code)
				continue
			}
			// A rejection says why (from the text alone); a statement no
			// delegation covers is told nothing of the check's reasons.
			if (c.code == gateway.NotDescribedRejected) != (len(nd.Reasons) > 0) {
				t.Errorf("remote %v: %s: reasons %q", remote, c.sql, nd.Reasons)
			}
		}
		if _, err := g.Describe(ctx, gatewaytest.Agent, "nowhere", "SELECT id FROM orders WHERE id = $1"); !errors.Is(err, gateway.ErrUnknownTarget) {
			t.Errorf("remote %v: unknown target: %v", remote, err)
		}

		seq2, _, err := f.sys.Logbook.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waiting, _, err := g.QueueStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if seq2 != seq || waiting != 0 {
			t.Fatalf("remote %v: Describe recorded or queued: logbook %d -> %d, %d waiting", remote, seq, seq2, waiting)
		}
	}
}

// TestDescribeRevoked: a revoked delegation describes nothing.
func TestDescribeRevoked(t *testing.T) {
	t.Parallel()
	f := newEmptyFixture(t, nil)
	ctx := context.Background()
	keys := f.sys.Opts.Keys
	y := gatewaytest.Example(t, gatewaytest.Orders)
	sig := gatewaytest.Sign(t, keys.Grantor, gatewaytest.Canonical(t, y, f.sys.Pilot.Catalog()))
	d, _, err := f.sys.Gateway.AddDelegation(ctx, y, sig, "orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const sql = "SELECT id, status FROM orders WHERE id = $1"
	if _, err := f.sys.Gateway.Describe(ctx, gatewaytest.Agent, gatewaytest.Target, sql); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	act, rsig := revocation(t, keys.Grantor, signing.NamespaceRevocation, d, gatewaytest.Target)
	if _, err := f.sys.Gateway.Revoke(ctx, act, rsig); err != nil {
		t.Fatal(err)
	}
	var nd *gateway.NotDescribedError
	if _, err := f.sys.Gateway.Describe(ctx, gatewaytest.Agent, gatewaytest.Target, sql); !errors.As(err, &nd) || nd.Code != gateway.NotDescribedReferred {
		t.Fatalf("after the revocation: %v, want not described", err)
	}
}
