package persist_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// No goroutine a test starts may outlive the package's tests: goleak fails
// the package otherwise.
func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		holdAndExit(path) // a child of holdFile
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}
