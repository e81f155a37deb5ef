package layers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pilotRoles are the names of internal/pilot that hold a target's Pilot,
// or a role of it (executor.go, session.go).
var pilotRoles = []string{"Executor", "Cataloger", "Pinger", "Runner", "Rehearser", "Describer", "Previewer", "Settler",
	"Sessions", "TxSession", "Pilot", "Session", "New"}

// pilotRolesAllowed lists packages that may name only the listed roles of
// the Pilot (other names of internal/pilot, its values, are theirs to
// use). The ledger settles marques and runs nothing; the fronts reach a
// target only through the gateway, which hands them its catalog.
var pilotRolesAllowed = map[string][]string{
	"internal/ledger":    {"Settler"},
	"internal/scope":     {},
	"internal/httpapi":   {},
	"internal/mcpserver": {},
	"internal/pgwire":    {},
	"internal/console":   {},
}

// pilotNames returns every name of internal/pilot a Go file refers to
// (pilot.X, under whatever name the file imports it as).
func pilotNames(t *testing.T, name string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == mod+"internal/pilot" {
			local = "pilot"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	var out []string
	if local == "" {
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok && id.Name == local {
				out = append(out, s.Sel.Name)
			}
		}
		return true
	})
	return out
}

// TestPilotRoles fails when a package of pilotRolesAllowed names a role
// of the Pilot it does not list: each caller takes the narrowest role it
// uses, and the ledger's reconciliation or a front holding a Runner would
// be authority where none is meant.
func TestPilotRoles(t *testing.T) {
	args := []string{"list", "-f", `{{.ImportPath}} {{.Dir}} {{join .GoFiles " "}}`}
	for pkg := range pilotRolesAllowed {
		args = append(args, mod+pkg)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen, named := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, dir := strings.TrimPrefix(f[0], mod), f[1]
		allowed, ok := pilotRolesAllowed[pkg]
		if !ok {
			continue
		}
		seen++
		for _, name := range f[2:] {
			for _, n := range pilotNames(t, filepath.Join(dir, name), nil) {
				if n == "Settler" {
					named++
				}
				if slices.Contains(pilotRoles, n) && !slices.Contains(allowed, n) {
					t.Errorf("%s/%s names pilot.%s: it may hold the Pilot as %v only", pkg, name, n, allowed)
				}
			}
		}
	}
	if seen != len(pilotRolesAllowed) {
		t.Fatalf("go list listed %d of the %d packages of pilotRolesAllowed", seen, len(pilotRolesAllowed))
	}
	if named == 0 {
		t.Fatal("no package names pilot.Settler: the ledger's reconciliation was not read")
	}
	src := `package x

import p "github.com/harbormaster-dev/harbormaster/internal/pilot"

// pilot.Runner in a comment is not a use.
var r p.Runner
var s = "pilot.Executor"
`
	if got := pilotNames(t, "x.go", src); !slices.Equal(got, []string{"Runner"}) {
		t.Fatalf("pilotNames found %v in a file that names p.Runner alone", got)
	}
}
