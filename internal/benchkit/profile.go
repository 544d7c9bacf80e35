package benchkit

import (
	"errors"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
)

// StartProfile starts a CPU profile into cpuPath and an execution trace
// into tracePath, each unless its path is empty. stop ends both; later
// calls do nothing.
func StartProfile(cpuPath, tracePath string) (stop func(), err error) {
	var stops []func()
	stop = sync.OnceFunc(func() {
		for _, s := range stops {
			s()
		}
	})
	start := func(path string, begin func(*os.File) error, end func()) error {
		if path == "" {
			return nil
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := begin(f); err != nil {
			return errors.Join(err, f.Close())
		}
		stops = append(stops, func() { end(); f.Close() })
		return nil
	}
	if err := start(cpuPath, func(f *os.File) error { return pprof.StartCPUProfile(f) }, pprof.StopCPUProfile); err != nil {
		return nil, err
	}
	if err := start(tracePath, func(f *os.File) error { return trace.Start(f) }, trace.Stop); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
