package cli

import (
	"encoding/json"
	"fmt"

	"github.com/harbormaster-dev/harbormaster/internal/buildinfo"
)

func runVersion(e *env, args []string) int {
	fs := e.flags("harbormaster version [--json]",
		"Prints what this binary is: its version (the module version of go install ...@VERSION,\n"+
			"devel for a build from a checkout), the commit it was built from (-dirty: with\n"+
			"uncommitted changes), the Go toolchain, the delegation compiler, the SQL checker\n"+
			"(pg_query_go and the PostgreSQL version of its parser) and the Surveyor prompt\n"+
			"bundle in force. The metric harbormaster_build_info carries the same as labels.")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return e.usageErr(fs, "unexpected argument %q", fs.Arg(0))
	}
	inf := buildinfo.Read()
	if *asJSON {
		b, _ := json.MarshalIndent(inf, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprint(e.stdout, inf.String())
	return exitOK
}
