package faults_test

import (
	"fmt"
	"syscall"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (root, or CAP_SYS_ADMIN)
// and returns its unmount.
func mountTmpfs(dir string, size int64) (func() error, error) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return nil, fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return func() error { return syscall.Unmount(dir, syscall.MNT_DETACH) }, nil
}
