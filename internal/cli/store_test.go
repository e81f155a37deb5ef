package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
	"github.com/harbormaster-dev/harbormaster/internal/pgtmp"
	"github.com/harbormaster-dev/harbormaster/internal/store"
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
			n := len(store.Migrations)
			if n != len(store.PostgresMigrations) {
				t.Fatalf("%d SQLite migrations, %d PostgreSQL ones", n, len(store.PostgresMigrations))
			}
			for i, want := range []string{fmt.Sprintf("schema version %d (%d migrations applied now)", n, n), fmt.Sprintf("schema version %d (0 migrations applied now)", n)} {
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
