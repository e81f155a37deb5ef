package node

import (
	"os"
	"runtime/debug"
)

// GCPercent is the Go collector's target (GOGC) a node's process runs
// with unless its environment sets GOGC. A node's live heap is small
// (about 10 MB under load in the demo) and every statement allocates, so
// at Go's default of 100 the collector ran about ten cycles a second
// under load, each taking a quarter of the process's two threads while it
// marked. At 200 it runs half as often, and the node spent as little CPU
// per statement as at 400, for a heap a third smaller than at 400;
// docs/performance.md has the figures, and docs/operations.md how to
// bound the memory (GOMEMLIMIT) or choose otherwise (GOGC).
const GCPercent = 200

// TuneGC sets the process's collector target to GCPercent unless the
// environment sets GOGC (the operator's choice stands), and returns the
// target in force: the serve and demo commands call it once, before
// Start.
func TuneGC() int {
	if v := os.Getenv("GOGC"); v != "" {
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
