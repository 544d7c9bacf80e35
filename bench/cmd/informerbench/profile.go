package main

import (
	"os"
	"runtime/pprof"
	"sync"
)

// profilePhase starts a CPU profile written to <prefix>-<phase>.pprof and
// returns the function that stops it (once; later calls do nothing); with
// an empty prefix it does nothing.
func profilePhase(prefix, phase string) (stop func()) {
	if prefix == "" {
		return func() {}
	}
	f, err := os.Create(prefix + "-" + phase + ".pprof")
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}
