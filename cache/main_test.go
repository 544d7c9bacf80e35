package cache_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every informer, indexer and file a test starts must be stopped and closed
// by its end: goleak fails the package otherwise.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog's flush daemon lives for the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// client-go's FakeControllerSource (a test double) never stops its
		// broadcaster.
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop"),
	)
}
