package bench_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/bench"
)

// TestProbeFsync checks the probe's figures are there and ordered, that it
// leaves nothing behind, and that it refuses what it cannot measure. It
// never checks how fast the device is.
func TestProbeFsync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := bench.ProbeFsync(dir, 20)
	if err != nil {
		t.Fatal(err)
	}
	if f.Dir != dir || f.Samples != 20 || !(f.P50Us > 0) || f.P90Us < f.P50Us {
		t.Errorf("figures %+v: want dir %s, 20 samples, 0 < p50 <= p90", f, dir)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the probe left %d files in %s", len(left), dir)
	}
	if _, err := bench.ProbeFsync(dir, 0); err == nil {
		t.Error("0 samples: want an error")
	}
	if _, err := bench.ProbeFsync(filepath.Join(dir, "missing"), 5); err == nil {
		t.Error("a missing directory: want an error")
	}
}
