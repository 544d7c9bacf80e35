//go:build unix

package runstats

import (
	"syscall"
	"time"
)

// SelfCPU is the CPU time (user and system, every thread) this process has
// used; 0 if getrusage fails.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
