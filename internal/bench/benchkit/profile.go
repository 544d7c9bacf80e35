package benchkit

import (
	"os"
	"runtime/pprof"
)

// StartProfile starts a CPU profile into path; stop ends it and closes the
// file.
func StartProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
