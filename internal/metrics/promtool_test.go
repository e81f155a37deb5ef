package metrics

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"gopkg.in/yaml.v3"
)

// needTool finds a tool on PATH: missing, it fails the test under CI
// (scripts/ensure-tools.sh installs it) and skips it elsewhere.
func needTool(t *testing.T, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI (%s): %v", name, install, err)
		}
		t.Skipf("%s is not installed (%s): %v", name, install, err)
	}
	return p
}

// TestPromtoolRules checks the shipped rules with promtool and runs their
// unit tests (deploy/prometheus-alerts*.test.yaml), and fails when an
// alert has no test in which it fires and one in which it does not.
func TestPromtoolRules(t *testing.T) {
	t.Parallel()
	promtool := needTool(t, "promtool", "Debian: apt-get install prometheus")
	testFiles := []string{"prometheus-alerts.test.yaml", "prometheus-alerts-surveyor.test.yaml"}
	for _, args := range [][]string{
		{"check", "rules", "prometheus-alerts.yaml"},
		append([]string{"test", "rules"}, testFiles...),
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "../../deploy/prometheus-alerts.yaml", &rules)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, f := range testFiles {
		tests.Tests = nil
		readYAML(t, "../../deploy/"+f, &tests)
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s needs a unit test where it fires and one where it does not (fires: %v, quiet: %v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	if n < 10 {
		t.Fatalf("read %d alerts from the rules, want the 10 shipped", n)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestLabelSetsAtZero: every series the alert rules and recording rules
// select exists at start, at zero, before any event.
func TestLabelSetsAtZero(t *testing.T) {
	t.Parallel()
	m := New([]string{"shop"}, nil, nil)
	m.InitFramings([]string{"certify", "refute", "shape"})
	m.InitDelegation("dlg_x")
	for _, c := range []struct {
		name   string
		labels []string
		want   int
	}{
		{"harbormaster_surveyor_juror_answers_total", nil, 9},
		{"harbormaster_surveyor_dissent_total", nil, 3},
		{"harbormaster_surveyor_judgments_total", nil, 8},
		{"harbormaster_fast_path_statements_total", nil, 2},
		{"harbormaster_decisions_total", nil, 12},
		{"harbormaster_quota_refusals_total", nil, 2},
	} {
		got, err := testutil.GatherAndCount(m.Registry, c.name)
		if err != nil || got != c.want {
			t.Errorf("%s: %d series at start (%v), want %d", c.name, got, err, c.want)
		}
	}
	for _, f := range []string{"certify", "refute", "shape"} {
		for _, a := range []string{"conforms", "refer", "failed"} {
			if v := testutil.ToFloat64(m.jurorVerdicts.WithLabelValues(f, a)); v != 0 {
				t.Errorf("juror answers %s/%s = %v at start, want 0", f, a, v)
			}
		}
	}
}

// TestPromtoolCheckMetrics lints the exposition of every collector with
// promtool check metrics (names, units, help). The node test does the
// same on a real scrape of /metrics.
func TestPromtoolCheckMetrics(t *testing.T) {
	t.Parallel()
	promtool := needTool(t, "promtool", "Debian: apt-get install prometheus")
	m := newTestMetrics(t)
	m.InitFramings([]string{"certify", "refute", "shape"})
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
