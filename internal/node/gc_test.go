package node

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: a node's process runs the collector at GCPercent, unless
// GOGC says otherwise.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "")
	if got := TuneGC(); got != GCPercent {
		t.Errorf("TuneGC without GOGC = %d, want %d", got, GCPercent)
	}
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("the collector's target without GOGC is %d, want %d", got, GCPercent)
	}

	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150) // as the runtime read it at start
	if got := TuneGC(); got != 150 {
		t.Errorf("TuneGC with GOGC=150 = %d, want 150", got)
	}
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("the collector's target with GOGC=150 is %d: TuneGC overrode the operator's", got)
	}
}
