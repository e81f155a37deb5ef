//go:build !linux

package cli

import "syscall"

// demoSysProcAttr is nothing special off Linux: a demo child shares the
// demo's process group, so Ctrl-C reaches it too.
func demoSysProcAttr() *syscall.SysProcAttr { return nil }
