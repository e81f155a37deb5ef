package gateway_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/gateway/gatewaytest"
	"github.com/harbormaster-dev/harbormaster/internal/metrics"
)

// gauge reads one gauge from a node's metrics.
func gauge(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestClockSkewKeepsExpiryConservative: a node whose clock is behind the
// store's by more than the leeway treats a delegation as in force only
// while it is in force at both clocks (here: not, as it has expired by the
// store's), and the metrics say the skew; back within the leeway, the
// node's own clock decides again.
func TestClockSkewKeepsExpiryConservative(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	f := newEmptyFixture(t, func(o *gatewaytest.Options) {
		o.Gateway.StoreClock = func(context.Context) (time.Time, error) {
			return time.Now().Add(time.Duration(offset.Load())), nil
		}
		o.Gateway.ClockLeeway = 2 * time.Second
	})
	ctx := context.Background()
	d := f.addDelegation(t, gatewaytest.WithExpiry(gatewaytest.Example(t, gatewaytest.Orders), time.Now().Add(3*time.Minute)))
	m := f.sys.Metrics

	if err := f.sys.Gateway.Registry().MeasureClock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.submit(t, gatewaytest.Agent, readOrder); r.Outcome != gateway.OutcomeExecuted || r.DelegationID != d.ID {
		t.Fatalf("clocks agree: %+v", r)
	}
	if gauge(t, m, "harbormaster_clock_skew_beyond_leeway") != 0 || math.Abs(gauge(t, m, "harbormaster_clock_skew_seconds")) > 1 {
		t.Fatal("the metrics report a skew where there is none")
	}

	// Within the leeway nothing changes.
	offset.Store(int64(time.Second))
	if err := f.sys.Gateway.Registry().MeasureClock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.submit(t, gatewaytest.Agent, readOrder); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("within the leeway: %+v", r)
	}

	// The store's clock is five minutes ahead: by it, the delegation expired.
	offset.Store(int64(5 * time.Minute))
	if err := f.sys.Gateway.Registry().MeasureClock(ctx); err != nil {
		t.Fatal(err)
	}
	r := f.submit(t, gatewaytest.Agent, readOrder)
	if r.Outcome != gateway.OutcomeReferred || r.DelegationID != "" {
		t.Fatalf("beyond the leeway, expired by the store's clock: %+v; want referred, no delegation in force", r)
	}
	if gauge(t, m, "harbormaster_clock_skew_beyond_leeway") != 1 || math.Abs(gauge(t, m, "harbormaster_clock_skew_seconds")-300) > 1 {
		t.Fatalf("metrics: beyond %v, skew %v s", gauge(t, m, "harbormaster_clock_skew_beyond_leeway"), gauge(t, m, "harbormaster_clock_skew_seconds"))
	}

	offset.Store(0)
	if err := f.sys.Gateway.Registry().MeasureClock(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.submit(t, gatewaytest.Agent, readOrder); r.Outcome != gateway.OutcomeExecuted {
		t.Fatalf("clocks agree again: %+v", r)
	}
}
