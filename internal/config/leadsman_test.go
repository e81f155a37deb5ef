package config

import (
	"strings"
	"testing"
)

// TestLeadsmanSection: the leadsman section is off without a provider,
// and a bad identity, window or provider is named by its field.
func TestLeadsmanSection(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Leadsman.On() || c.Leadsman.Identity != "leadsman:default" {
		t.Fatalf("defaults: %+v", c.Leadsman)
	}
	c.Leadsman = Leadsman{Identity: "surveyor:x", Poll: Duration(-1), Provider: &Provider{Kind: "gemini", BaseURL: "ftp://x"},
		ShareRows: true, RehearsalWait: Duration(1)}
	err := c.Validate(func(string) string { return "" })
	if err == nil {
		t.Fatal("a bad leadsman section was accepted")
	}
	for _, field := range []string{"leadsman.identity", "leadsman.poll", "leadsman.provider.name", "leadsman.provider.kind", "leadsman.provider.model", "leadsman.provider.base_url",
		// Gone with the rehearsal of referred statements (issue 22): an
		// operator who set them is told, not silently ignored.
		"leadsman.share_rows", "leadsman.rehearsal_wait"} {
		if !strings.Contains(err.Error(), field+":") {
			t.Errorf("no error names %s:\n%v", field, err)
		}
	}
	c.Leadsman = Leadsman{Identity: "leadsman:notes", Provider: &Provider{Name: "local", Kind: "openai", Model: "m"}}
	if err := c.Validate(func(string) string { return "" }); err != nil && strings.Contains(err.Error(), "leadsman") {
		t.Fatalf("a good leadsman section: %v", err)
	}
	if !c.Leadsman.On() {
		t.Fatal("a provider does not turn the Leadsman on")
	}
}
