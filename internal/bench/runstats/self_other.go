//go:build !unix

package runstats

import "time"

// SelfCPU is not measured on this platform: it reads 0.
func SelfCPU() time.Duration { return 0 }
