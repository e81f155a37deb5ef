package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRetentionDefaultsAndFloor: the logbook keeps 90 days unless told,
// refuses less than a day, and keep_all turns retention off.
func TestRetentionDefaultsAndFloor(t *testing.T) {
	t.Parallel()
	d := Config{}.WithDefaults()
	if d.Logbook.Retain.D() != DefaultRetain || DefaultRetain != 90*24*time.Hour || d.Logbook.PruneEvery.D() != time.Hour || d.Logbook.KeepAll {
		t.Fatalf("defaults: %+v", d.Logbook)
	}
	for _, c := range []struct {
		yaml, want string
	}{
		{"logbook:\n  retain: 1h\n", "logbook.retain: must be at least 24h0m0s"},
		{"logbook:\n  retain: 1h\n  keep_all: true\n", ""},
		{"logbook:\n  retain: 24h\n", ""},
		{"logbook:\n  prune_every: -1s\n", "logbook.prune_every: must not be negative"},
	} {
		dir := t.TempDir()
		p := filepath.Join(dir, "hm.yaml")
		if err := os.WriteFile(p, []byte("store: s.db\n"+c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if c.want != "" && !strings.Contains(got, c.want) || c.want == "" && strings.Contains(got, "logbook.") {
			t.Errorf("%q: %q, want %q", c.yaml, got, c.want)
		}
	}
}
