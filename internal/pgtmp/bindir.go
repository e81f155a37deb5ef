package pgtmp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotInstalled reports that the PostgreSQL server binaries (initdb and
// postgres) were not found.
var ErrNotInstalled = errors.New("pgtmp: PostgreSQL server binaries (initdb, postgres) not found")

// serverBinaries are the programs Start runs; both must sit in one directory.
var serverBinaries = []string{"initdb", "postgres"}

// debianRoot holds Debian's versioned server directories, <N>/bin.
const debianRoot = "/usr/lib/postgresql"

// FindBinDir returns a directory holding both initdb and postgres. It looks,
// in order, at each initdb and postgres on PATH (symlinks resolved, so the
// directory is the one the binary really lives in), at `pg_config --bindir`,
// and at Debian's /usr/lib/postgresql/<N>/bin, highest N first. The error
// wraps ErrNotInstalled and lists the places searched.
func FindBinDir() (string, error) {
	return findBinDir(os.Getenv("PATH"), pgConfigBinDir, debianRoot)
}

// findBinDir is FindBinDir with its sources passed in, for tests.
func findBinDir(pathList string, pgConfig func() (string, error), debian string) (string, error) {
	var looked []string
	seen := map[string]bool{}
	try := func(dir string) bool {
		if dir == "" || seen[dir] {
			return false
		}
		seen[dir] = true
		looked = append(looked, dir)
		return len(missingBinaries(dir)) == 0
	}

	// PATH: a directory on PATH may hold symlinks into the real bin dir
	// (as /usr/local/bin does on some machines); initdb looks for postgres
	// beside its resolved self, so the resolved directory is what counts.
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			continue
		}
		for _, name := range serverBinaries {
			p := filepath.Join(dir, name)
			if !isExecutable(p) {
				continue
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue
			}
			if d := filepath.Dir(real); try(d) {
				return d, nil
			}
		}
	}

	if pgConfig != nil {
		if d, err := pgConfig(); err == nil && try(d) {
			return d, nil
		}
	}

	for _, d := range debianBinDirs(debian) {
		if try(d) {
			return d, nil
		}
	}

	where := "nowhere"
	if len(looked) > 0 {
		where = strings.Join(looked, ", ")
	}
	return "", fmt.Errorf("%w: no directory holds both (searched PATH, pg_config --bindir, %s/*/bin; checked %s); install the server, e.g. scripts/ensure-postgres.sh",
		ErrNotInstalled, debian, where)
}

// pgConfigBinDir asks pg_config on PATH for the server's bin directory.
func pgConfigBinDir() (string, error) {
	p, err := exec.LookPath("pg_config")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "--bindir").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// debianBinDirs lists root/<N>/bin, highest version first.
func debianBinDirs(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	type cand struct {
		dir string
		ver []int
	}
	var cands []cand
	for _, e := range entries {
		ver, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		cands = append(cands, cand{filepath.Join(root, e.Name(), "bin"), ver})
	}
	slices.SortFunc(cands, func(a, b cand) int { return slices.Compare(b.ver, a.ver) })
	dirs := make([]string, len(cands))
	for i, c := range cands {
		dirs[i] = c.dir
	}
	return dirs
}

// parseVersion parses "15" or "9.6" into its numeric parts.
func parseVersion(s string) ([]int, bool) {
	var ver []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		ver = append(ver, n)
	}
	return ver, true
}

// missingBinaries returns the server binaries that dir lacks.
func missingBinaries(dir string) []string {
	var missing []string
	for _, name := range serverBinaries {
		if !isExecutable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	return missing
}

// checkBinDir reports, wrapping ErrNotInstalled, which binaries dir lacks.
func checkBinDir(dir string) error {
	if missing := missingBinaries(dir); len(missing) > 0 {
		return fmt.Errorf("%w: %s lacks %s", ErrNotInstalled, dir, strings.Join(missing, " and "))
	}
	return nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
