//go:build unix && !linux

package apiservertest

import "syscall"

// sysProcAttr puts the child in its own process group. Without Pdeathsig
// outside Linux, children outlive a test binary that is killed abruptly.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
