package apiservertest

import "syscall"

// sysProcAttr puts the child in its own process group, so stop can signal
// the group, and makes the kernel SIGKILL it if the test binary dies first.
// Pdeathsig fires when the forking OS thread exits; the Go runtime only ends
// threads whose goroutine exits while locked to them, which this package
// never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
