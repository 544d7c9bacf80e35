package e2e

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

var (
	flagObjects = flag.Int("e2e.objects", 5000,
		"objects created by the cold-start and warm-restart tests (the cold-start test makes 3/5 of them ConfigMaps, the rest Pods)")
	flagCheckpointObjects = flag.Int("e2e.checkpoint-objects", 10000,
		"ConfigMaps the checkpoint test acknowledges before its restarts")
	flagRelistObjects = flag.Int("e2e.relist-objects", 2000,
		"ConfigMaps created by TestRelistAfterExpiry")
	flagKills = flag.Int("e2e.kills", 12,
		"SIGKILLs of the child informer in TestKillDuringWriteStorm")
)

// No goroutine a test starts may outlive the package's tests (each test
// stops its informers, clients and servers): goleak fails the package
// otherwise. The child process of TestKillDuringWriteStorm is killed, so it
// is not checked.
//
// apimachinery's watch.Filter (used by TestFactoryInformerForGoFilter's
// constructor, as by real controllers) leaves its goroutine blocked on a
// send when the consumer stops reading with an event in flight, typically
// the ERROR event a watch whose request context is cancelled delivers:
// client-go's own reflector leaks it the same way (2 of 3 stops of a
// client-go informer in a trial against the test apiserver), so it is
// ignored.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"))
}
