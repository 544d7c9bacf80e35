package recovery

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// No goroutine a test starts may outlive the package's tests: goleak fails
// the package otherwise.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// reflectorFrames match every frame of a Reflector's or a recovery's
// method, including closures started from one.
var reflectorFrames = []string{"boltinformer/reflector.(*Reflector).", "boltinformer/recovery.(*Recoverer).", "boltinformer/recovery.(*recovery)."}

// reflectorGoroutines returns the stacks of goroutines, other than the
// caller's, that are inside a Reflector method.
func reflectorGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")
	var out []string
	for _, g := range stacks[1:] { // stacks[0] is the calling goroutine
		if slices.ContainsFunc(reflectorFrames, func(f string) bool { return strings.Contains(g, f) }) {
			out = append(out, g)
		}
	}
	return out
}

// assertNoReflectorGoroutines fails t if a goroutine is still inside a
// Reflector method. Call it only after Run/ListAndWatch returned: they join
// every goroutine they start, so the check is immediate, without polling.
func assertNoReflectorGoroutines(t *testing.T) {
	t.Helper()
	// A goroutine that has handed over its result (a page asked ahead) may
	// still be on its way out: give it a second to go.
	var leaked []string
	_ = poll.Wait(time.Second, func() bool { leaked = reflectorGoroutines(); return len(leaked) == 0 })
	if len(leaked) > 0 {
		t.Fatalf("goroutines leaked by reflector:\n\n%s", strings.Join(leaked, "\n\n"))
	}
}
