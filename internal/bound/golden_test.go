package bound

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harbormaster-dev/harbormaster/examples"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestGoldenReports pins the compilation report of every example
// delegation (against examples/shop.sql) as JSON, so any change in what a
// grantor is shown, or in the bytes they sign (the delegation id), is
// reviewed. Run with -update to rewrite.
func TestGoldenReports(t *testing.T) {
	names, err := fs.Glob(examples.FS, "*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no example delegations: %v", err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			_, rep := compileExample(t, name)
			// Encoded as harbormaster delegation compile --json prints it.
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			if err := enc.Encode(rep); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", "golden", strings.TrimSuffix(name, ".yaml")+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("report of %s differs from %s (run go test -update after review):\n got:\n%s\nwant:\n%s", name, path, got, want)
			}
		})
	}
}
