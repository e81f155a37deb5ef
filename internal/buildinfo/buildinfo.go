// Package buildinfo says what this binary is: its version and commit (from
// the Go build information), the Go toolchain, the delegation compiler and
// the SQL checker (the PostgreSQL parser it links), and the Surveyor prompt
// bundle in force. harbormaster version prints it and the
// harbormaster_build_info metric carries it as labels.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/bound"
	"github.com/harbormaster-dev/harbormaster/internal/surveyor"
)

const parserModule = "github.com/pganalyze/pg_query_go/v6"

// Info is what a binary is built from.
type Info struct {
	// Version is the module version (v1.2.3 from go install ...@v1.2.3),
	// or "devel" for a build from a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, with "-dirty"
	// when the work tree had changes; "unknown" without VCS information
	// (go run, or a build outside a checkout).
	Commit string `json:"commit"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"go_version"`
	// Compiler is the delegation compiler's version, recorded in every
	// bound's provenance.
	Compiler string `json:"compiler"`
	// Checker is the SQL checker's parser: pg_query_go's module version and
	// the PostgreSQL version whose parser it links ("pg_query_go v6.2.5
	// (PostgreSQL 17.7)").
	Checker string `json:"checker"`
	// Bundle is the Surveyor prompt bundle built in and in force.
	Bundle string `json:"prompt_bundle"`
}

// Read reads the build information of the running binary.
func Read() Info {
	inf := Info{Version: "devel", Commit: "unknown", GoVersion: runtime.Version(),
		Compiler: bound.CompilerVersion, Bundle: surveyor.DefaultBundle().Version}
	parserVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			inf.Version = v
		}
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			inf.Commit = rev
			if modified == "true" {
				inf.Commit += "-dirty"
			}
		}
		for _, d := range bi.Deps {
			if d.Path == parserModule {
				parserVersion = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					parserVersion = d.Replace.Version
				}
			}
		}
	}
	inf.Checker = fmt.Sprintf("pg_query_go %s (PostgreSQL %s)", parserVersion, postgresVersion())
	return inf
}

// postgresVersion is the version of the PostgreSQL parser linked in, as
// the parser itself reports it (PG_VERSION_NUM 170007 is "17.7").
func postgresVersion() string {
	res, err := pg_query.Parse("SELECT 1")
	if err != nil || res.GetVersion() <= 0 {
		return "unknown"
	}
	n := res.GetVersion()
	return fmt.Sprintf("%d.%d", n/10000, n%10000)
}

// String is the human form harbormaster version prints.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "harbormaster %s\n", i.Version)
	fmt.Fprintf(&b, "  commit:         %s\n", i.Commit)
	fmt.Fprintf(&b, "  go:             %s\n", i.GoVersion)
	fmt.Fprintf(&b, "  compiler:       %s\n", i.Compiler)
	fmt.Fprintf(&b, "  checker:        %s\n", i.Checker)
	fmt.Fprintf(&b, "  prompt bundle:  %s\n", i.Bundle)
	return b.String()
}
