package config

import (
	"strings"
	"testing"
)

// TestSurveyorProvidersAreDistinctEndpoints: diversity is counted by the
// providers' names, and two entries naming the same endpoint and model
// under two names made one provider look like two: a panel on it was not
// marked correlated and was sampled at audit.rate instead of
// audit.correlated_rate ("a weaker panel is not allowed to look like a
// stronger one"). Such a pair is now refused. Found in review 5.
func TestSurveyorProvidersAreDistinctEndpoints(t *testing.T) {
	c := Config{}.WithDefaults()
	c.Surveyor.Providers = []Provider{
		{Name: "openai-a", Kind: "openai", Model: "gpt-4.1-mini"},
		{Name: "openai-b", Kind: "openai", BaseURL: "https://api.openai.com/v1/", Model: "gpt-4.1-mini"},
	}
	err := c.Validate(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "surveyor.providers[1]") {
		t.Fatalf("one endpoint and model under two names: %v, want surveyor.providers[1] refused", err)
	}
	c.Surveyor.Providers[1] = Provider{Name: "local", Kind: "openai", BaseURL: "http://127.0.0.1:11434/v1", Model: "gpt-4.1-mini"}
	if err := c.Validate(func(string) string { return "" }); err != nil && strings.Contains(err.Error(), "surveyor.providers") {
		t.Fatalf("two endpoints: %v", err)
	}
}

// TestAuditSamplesCorrelatedPanelsMore: the EDR raises a correlated
// panel's audit sampling above the deployment's rate. A correlated_rate
// at or below audit.rate (or a rate at or above the default correlated
// rate, 0.5) was accepted and clamped to audit.rate, so a correlated panel
// was sampled exactly like a diverse one. It is now refused. Found in
// review 5.
func TestAuditSamplesCorrelatedPanelsMore(t *testing.T) {
	for _, tc := range []struct {
		rate, corr float64
		ok         bool
	}{
		{0, 0, true}, {0.1, 0.5, true}, {1, 0, true}, {0.2, 0.9, true},
		{0.2, 0.2, false}, {0.3, 0.1, false}, {0, 0.05, false}, {0.6, 0, false},
	} {
		c := Config{}.WithDefaults()
		c.Audit.Rate, c.Audit.CorrelatedRate = tc.rate, tc.corr
		err := c.Validate(func(string) string { return "" })
		refused := err != nil && strings.Contains(err.Error(), "audit.correlated_rate")
		if refused == tc.ok {
			t.Errorf("rate %g correlated_rate %g: %v, want accepted %v", tc.rate, tc.corr, err, tc.ok)
		}
	}
}
