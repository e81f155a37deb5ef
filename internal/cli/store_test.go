package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"harbormaster/internal/cli"
	"harbormaster/internal/pgtmp"
)

// store migrate applies the migrations once, on SQLite and on PostgreSQL
// (a server with fsync on: the store refuses one without), and a second
// run finds nothing to apply.
func TestStoreMigrate(t *testing.T) {
	t.Parallel()
	srv, err := pgtmp.Start(t.Context(), pgtmp.Config{StartTimeout: 3 * time.Minute})
	if errors.Is(err, pgtmp.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("pgtmp: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	url, err := srv.CreateDatabase(context.Background(), "control")
	if err != nil {
		t.Fatal(err)
	}
	for name, loc := range map[string]string{"sqlite": filepath.Join(t.TempDir(), "store.db"), "postgres": url} {
		t.Run(name, func(t *testing.T) {
			for i, want := range []string{"schema version 7 (7 migrations applied now)", "schema version 7 (0 migrations applied now)"} {
				var out, errb bytes.Buffer
				if code := cli.Do([]string{"store", "migrate", "--store", loc}, strings.NewReader(""), &out, &errb); code != 0 {
					t.Fatalf("run %d: exit %d: %s", i, code, errb.String())
				}
				if !strings.HasPrefix(out.String(), name+" store ") || !strings.Contains(out.String(), want) {
					t.Fatalf("run %d: %q, want %q", i, out.String(), want)
				}
			}
		})
	}
	var out, errb bytes.Buffer
	if code := cli.Do([]string{"store", "migrate"}, strings.NewReader(""), &out, &errb); code == 0 {
		t.Fatal("store migrate with neither --config nor --store succeeded")
	}
}
