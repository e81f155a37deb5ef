//go:build unix

package sqlcheck_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user + system, every
// thread, GC included). On a shared machine, CPU time per op is steadier
// than wall time per op, which counts time spent waiting for a core.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
