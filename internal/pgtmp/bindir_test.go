package pgtmp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeExecutable(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := FindBinDir()
	if err != nil {
		needPostgres(t, err)
	}
	for _, name := range serverBinaries {
		if !isExecutable(filepath.Join(dir, name)) {
			t.Errorf("FindBinDir() = %s, which has no executable %s", dir, name)
		}
	}
}

func TestFindBinDirOrder(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	mk := func(dir string, names ...string) string {
		d := filepath.Join(base, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			writeExecutable(t, filepath.Join(d, n))
		}
		return d
	}
	real := mk("real/bin", "initdb", "postgres")
	onlyInitdb := mk("local/bin", "initdb")
	links := mk("links")
	for _, n := range serverBinaries {
		if err := os.Symlink(filepath.Join(real, n), filepath.Join(links, n)); err != nil {
			t.Fatal(err)
		}
	}
	// A PATH directory whose initdb and postgres resolve to different places.
	split := mk("split")
	if err := os.Symlink(filepath.Join(onlyInitdb, "initdb"), filepath.Join(split, "initdb")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "postgres"), filepath.Join(split, "postgres")); err != nil {
		t.Fatal(err)
	}
	pgcfg := mk("pgconfig/bin", "initdb", "postgres")
	debian := filepath.Join(base, "debian")
	mk("debian/9.6/bin", "initdb", "postgres")
	deb15 := mk("debian/15/bin", "initdb", "postgres")
	mk("debian/16/bin", "initdb") // newest, but incomplete
	mk("debian/notaversion/bin", "initdb", "postgres")
	empty := mk("empty")

	pgConfigIs := func(d string) func() (string, error) { return func() (string, error) { return d, nil } }
	noPgConfig := func() (string, error) { return "", errors.New("no pg_config") }
	path := func(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }

	tests := []struct {
		name     string
		path     string
		pgConfig func() (string, error)
		debian   string
		want     string // empty: ErrNotInstalled
	}{
		{"symlinks on PATH resolve to the real dir", path(links), noPgConfig, debian, real},
		{"initdb alone on PATH is passed over", path(onlyInitdb, links), noPgConfig, debian, real},
		{"split symlinks follow postgres to a full dir", path(split), noPgConfig, debian, real},
		{"PATH before pg_config", path(empty, links), pgConfigIs(pgcfg), debian, real},
		{"pg_config before Debian", path(empty), pgConfigIs(pgcfg), debian, pgcfg},
		{"incomplete pg_config dir passed over", path(), pgConfigIs(onlyInitdb), debian, deb15},
		{"Debian: highest complete version", path(onlyInitdb), noPgConfig, debian, deb15},
		{"nothing anywhere", path(empty, onlyInitdb), noPgConfig, filepath.Join(base, "none"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := findBinDir(tt.path, tt.pgConfig, tt.debian)
			if tt.want == "" {
				if !errors.Is(err, ErrNotInstalled) {
					t.Fatalf("findBinDir = %q, %v; want ErrNotInstalled", got, err)
				}
				if !strings.Contains(err.Error(), onlyInitdb) {
					t.Errorf("error does not list the directory it checked: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("findBinDir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"15", []int{15}, true},
		{"9.6", []int{9, 6}, true},
		{"", nil, false},
		{"15beta", nil, false},
		{"-1", nil, false},
	}
	for _, tt := range tests {
		got, ok := parseVersion(tt.in)
		if ok != tt.ok || len(got) != len(tt.want) {
			t.Errorf("parseVersion(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("parseVersion(%q) = %v, want %v", tt.in, got, tt.want)
			}
		}
	}
}
