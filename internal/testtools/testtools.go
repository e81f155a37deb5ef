// Package testtools finds the programs the tests drive (node, npm, psql,
// chromium, ...) and installs the npm packages pinned under a test's
// testdata, the same way for every package: under CI (CI=true) a missing
// tool or a failed install fails the test; elsewhere it skips it.
package testtools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Missing fails the test under CI and skips it elsewhere, saying what is
// missing and how to get it.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Need returns the path of the named program, or fails (CI) or skips the
// test; install says how to get it (e.g. "Debian: apt-get install npm").
func Need(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed ("+install+"): "+err.Error())
	}
	return p
}

// NPMCI runs `npm ci` in dir unless node_modules already holds the version
// of pkg that dir's package.json pins, so a test's npm packages come from
// its committed package-lock.json and are installed once.
func NPMCI(t testing.TB, dir, pkg string) {
	t.Helper()
	npm := Need(t, "npm", "Debian: apt-get install npm")
	var want struct {
		Dependencies    map[string]string `json:"dependencies"`
		DevDependencies map[string]string `json:"devDependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s/package.json: %v", dir, err)
	}
	pinned, ok := want.Dependencies[pkg]
	if !ok {
		pinned = want.DevDependencies[pkg]
	}
	var installed struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json")); err == nil {
		_ = json.Unmarshal(b, &installed)
	}
	if installed.Version != "" && installed.Version == pinned {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		Missing(t, "npm ci in "+dir+" (it needs the npm registry): "+err.Error()+"\n"+string(out))
	}
}
