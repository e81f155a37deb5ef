package cli

import "syscall"

// demoSysProcAttr puts a demo child in its own process group (the demo
// stops its children itself, nodes before the Pilot) and has the kernel
// send it SIGTERM if the thread that started it dies, so a demo killed
// outright leaves no process behind.
func demoSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
