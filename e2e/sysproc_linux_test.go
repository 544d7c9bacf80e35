package e2e

import "syscall"

// childSysProcAttr makes the kernel SIGKILL a child informer if the test
// binary dies first, so a child never outlives the test.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
