package pgtmp

import "syscall"

// serverSysProcAttr puts the postmaster in its own process group and asks
// the kernel to send it SIGINT (fast shutdown) if its parent thread dies.
// The caller starts it from a goroutine locked to its OS thread for the
// server's whole life, so that thread exits only with the process.
func serverSysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT, Credential: cred}
}
