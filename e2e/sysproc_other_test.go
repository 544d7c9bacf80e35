//go:build !linux

package e2e

import "syscall"

// childSysProcAttr: without Pdeathsig, only the test's cleanup kills a
// child informer.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
