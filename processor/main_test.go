package processor

import (
	"testing"

	"go.uber.org/goleak"
)

// Every processor a test runs must have stopped its listeners by the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}
