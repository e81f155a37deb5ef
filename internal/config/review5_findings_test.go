package config

import (
	"strings"
	"testing"
)

// TestReview5ProvidersAreDistinctEndpoints: diversity is counted by the
// providers' names, and two entries naming the same endpoint and model
// under two names made one provider look like two: a panel on it was not
// marked correlated and was sampled at audit.rate instead of
// audit.correlated_rate ("a weaker panel is not allowed to look like a
// stronger one"). Such a pair is now refused.
func TestReview5ProvidersAreDistinctEndpoints(t *testing.T) {
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
