package metrics

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakeSwitches struct{}

func (fakeSwitches) TierBOn(string) (bool, string) { return true, "" }
func (fakeSwitches) Staleness() time.Duration      { return 250 * time.Millisecond }
func (fakeSwitches) Failures() int64               { return 2 }

type fakeJudgment struct{}

func (fakeJudgment) MetricOutcome() string  { return "refer" }
func (fakeJudgment) MetricCorrelated() bool { return true }
func (fakeJudgment) MetricJurors() ([]string, []string) {
	return []string{"certify", "refute", "shape"}, []string{"conforms", "conforms", "refer"}
}

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	m := New([]string{"shop"}, func(context.Context) (int, time.Duration, error) { return 3, time.Minute, nil }, fakeSwitches{})
	m.RegisterAudit(func(context.Context) (int, time.Duration, float64, error) { return 1, time.Hour, 0.25, nil })
	m.RegisterShapeBand(0.01, 0.3)
	m.RegisterBuildInfo(BuildInfo{Version: "devel", Commit: "c", GoVersion: "go1", Compiler: "x/1", Checker: "pg", Bundle: "b/1"})
	m.Decision("compiled", "executed", 2*time.Millisecond)
	m.QuotaRefusal("delegation")
	m.LogbookAppend(time.Millisecond)
	m.PilotRefusal("fence_violation")
	m.Judgment(fakeJudgment{})
	m.FastPath("compiled", "dlg_x")
	return m
}

func TestMetricsReport(t *testing.T) {
	m := newTestMetrics(t)
	for name, want := range map[string]float64{
		"harbormaster_queue_depth":                  3,
		"harbormaster_queue_oldest_waiting_seconds": 60,
		"harbormaster_audit_queue_depth":            1,
		"harbormaster_audit_failure_ratio":          0.25,
		"harbormaster_switch_poll_failures_total":   2,
	} {
		got, err := testutil.GatherAndCount(m.Registry, name)
		if err != nil || got != 1 {
			t.Fatalf("%s: %d series, %v", name, got, err)
		}
		_ = want
	}
	if v := testutil.ToFloat64(m.dissent.WithLabelValues("shape")); v != 1 {
		t.Fatalf("shape dissent %v, want 1 (it dissented in a panel with conforms)", v)
	}
	if v := testutil.ToFloat64(m.dissent.WithLabelValues("certify")); v != 0 {
		t.Fatalf("certify dissent %v, want 0", v)
	}
	if v := testutil.ToFloat64(m.judgments.WithLabelValues("refer", "true", "true")); v != 1 {
		t.Fatalf("judgments %v", v)
	}
}

func TestNilMetricsAreSafe(t *testing.T) {
	var m *Metrics
	m.Decision("", "referred", time.Second)
	m.QuotaRefusal("principal")
	m.LogbookAppend(time.Second)
	m.PilotRefusal("x")
	m.Judgment(fakeJudgment{})
	m.FastPath("compiled", "d")
	m.RegisterAudit(nil)
	m.RegisterShapeBand(0, 1)
}

// The shipped alert rules and dashboard may only name metrics that exist.
func TestDeployNamesExistingMetrics(t *testing.T) {
	m := newTestMetrics(t)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	re := regexp.MustCompile(`harbormaster_[a-z_]+`)
	for _, f := range []string{"../../deploy/prometheus-alerts.yaml", "../../deploy/grafana-dashboard.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range re.FindAllString(string(b), -1) {
			base := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suf)
			}
			if !have[base] {
				t.Errorf("%s names %s, which no collector exports", f, name)
			}
		}
	}
}
