package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

type dashboard struct {
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Targets     []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		FieldConfig struct {
			Defaults struct {
				Unit   string `json:"unit"`
				Custom struct {
					AxisLabel string `json:"axisLabel"`
				} `json:"custom"`
			} `json:"defaults"`
			Overrides []struct {
				Matcher struct {
					Options string `json:"options"`
				} `json:"matcher"`
				Properties []struct {
					ID    string `json:"id"`
					Value any    `json:"value"`
				} `json:"properties"`
			} `json:"overrides"`
		} `json:"fieldConfig"`
	} `json:"panels"`
}

var (
	rawMetricRE  = regexp.MustCompile(`(?:^|[^:\w])(harbormaster_[a-z_]+)(\{[^}]*\})?`)
	recordingRE  = regexp.MustCompile(`harbormaster:[a-z0-9_:]+`)
	dashboardVar = strings.NewReplacer("$job", ".*", "$instance", ".*")
)

// TestDashboard: the Grafana dashboard has job and instance variables
// that every selector of a node's metric uses; every panel has a unit and
// an axis label on its axis, and a series on a second axis its own unit;
// the panels over recording rules say so and deploy/README.md names them;
// and every query parses, as promtool check rules reads it.
func TestDashboard(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(root, "deploy/grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, want := range []string{"datasource", "job", "instance"} {
		if !vars[want] {
			t.Errorf("the dashboard has no %s variable", want)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "deploy/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for _, p := range d.Panels {
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit", p.Title)
		}
		if p.Type == "timeseries" && p.FieldConfig.Defaults.Custom.AxisLabel == "" {
			t.Errorf("panel %q has no axis label", p.Title)
		}
		for _, o := range p.FieldConfig.Overrides {
			hasUnit, right := false, false
			for _, pr := range o.Properties {
				hasUnit = hasUnit || pr.ID == "unit" && pr.Value != ""
				right = right || pr.ID == "custom.axisPlacement" && pr.Value == "right"
			}
			if right && !hasUnit {
				t.Errorf("panel %q: series %s on the right axis has no unit", p.Title, o.Matcher.Options)
			}
		}
		usesRecording := false
		for _, tg := range p.Targets {
			for _, m := range rawMetricRE.FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(m[2], `job=~"$job"`) || !strings.Contains(m[2], `instance=~"$instance"`) {
					t.Errorf("panel %q: %s is not filtered by the job and instance variables: %s", p.Title, m[1], tg.Expr)
				}
			}
			usesRecording = usesRecording || recordingRE.MatchString(tg.Expr)
			fmt.Fprintf(&rules, "      - record: dashboard:panel%d:%s\n        expr: %q\n", p.ID, strings.ToLower(tg.RefID), dashboardVar.Replace(tg.Expr))
		}
		if usesRecording {
			if !strings.Contains(p.Description, "recording rules") {
				t.Errorf("panel %q uses a recording rule but its description does not say so", p.Title)
			}
			if !strings.Contains(string(readme), p.Title) {
				t.Errorf("deploy/README.md does not name the panel %q among those that need the recording rules", p.Title)
			}
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		need(t, "promtool", "Debian: apt-get install prometheus", err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("the dashboard's queries do not parse: %v\n%s", err, out)
	}
}
