package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

// TestRead: every field is filled from what the binary links: the Go
// toolchain, the compiler version, the parser's module and PostgreSQL
// versions, the prompt bundle built in.
func TestRead(t *testing.T) {
	t.Parallel()
	inf := Read()
	if inf.GoVersion != runtime.Version() || inf.Compiler != bound.CompilerVersion || inf.Bundle != surveyor.DefaultBundle().Version {
		t.Errorf("go %q compiler %q bundle %q", inf.GoVersion, inf.Compiler, inf.Bundle)
	}
	// A test binary records no dependencies, so the module version is
	// unknown here (TestBuiltBinary checks it); the PostgreSQL version is
	// the linked parser's own.
	if !regexp.MustCompile(`^pg_query_go (v6\.\d+\.\d+|unknown) \(PostgreSQL 1[7-9]\.\d+\)$`).MatchString(inf.Checker) {
		t.Errorf("checker %q, want pg_query_go vX.Y.Z (PostgreSQL N.M)", inf.Checker)
	}
	if inf.Version == "" || inf.Commit == "" {
		t.Errorf("version %q commit %q: never empty", inf.Version, inf.Commit)
	}
	s := inf.String()
	for _, want := range []string{"harbormaster " + inf.Version, "commit:", inf.Checker, inf.Bundle} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}

// TestBuiltBinary builds a small binary of this module that prints Read()
// (a test binary records no module dependencies) and checks that it names
// the pg_query_go version go.mod requires. harbormaster version prints
// the same Info (internal/cli testdata/script/version.txtar).
func TestBuiltBinary(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/pganalyze/pg_query_go/v6 (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require pg_query_go/v6")
	}
	bin := filepath.Join(t.TempDir(), "printinfo")
	build := exec.Command("go", "build", "-o", bin, "./testdata/printinfo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var inf Info
	if err := json.Unmarshal(out, &inf); err != nil {
		t.Fatalf("printinfo: %v\n%s", err, out)
	}
	want := "pg_query_go " + string(m[1]) + " (PostgreSQL "
	if !strings.HasPrefix(inf.Checker, want) || inf.Bundle != surveyor.DefaultBundle().Version || inf.Version != "devel" {
		t.Errorf("the built binary says %+v, want checker %s..., version devel (a build from a checkout)", inf, want)
	}
}
