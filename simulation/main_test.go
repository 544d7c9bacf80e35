package simulation

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// binDir holds the inspect binary built for this test binary's run.
var binDir string

// Every informer, file and watch a run starts is stopped by its end: goleak
// fails the package otherwise.
func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "simulation-bin-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	if code == 0 {
		if err := goleak.Find(
			// klog's flush daemon lives for the process.
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
