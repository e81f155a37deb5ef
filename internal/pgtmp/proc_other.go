//go:build unix && !linux

package pgtmp

import "syscall"

// serverSysProcAttr puts the postmaster in its own process group. Without
// a parent-death signal on this platform, a killed owner leaves the server
// running until it is stopped by hand.
func serverSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
