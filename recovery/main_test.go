package recovery

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// No goroutine a test starts may outlive the package's tests: goleak fails
// the package otherwise.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// reflectorFrames match every frame of a Reflector's or a recovery's
// method, including closures started from one. They are built from the
// types, so a renamed type cannot leave a pattern that matches nothing.
var reflectorFrames = []string{methodFrames[reflector.Reflector](), methodFrames[Relister](), methodFrames[attempt]()}

// methodFrames is the prefix of a stack frame of a method of *T, as
// runtime.Stack prints it: "path/to/pkg.(*T).".
func methodFrames[T any]() string {
	typ := reflect.TypeFor[T]()
	return typ.PkgPath() + ".(*" + typ.Name() + ")."
}

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

// The leak check sees a recovery's goroutines: while a fetch is held, a
// goroutine runs a method of each recovery type reflectorFrames names.
func TestLeakCheckSeesARecovery(t *testing.T) {
	store := newFakeStore(upod("ns", "a", "ua", "1"))
	fetching, release := make(chan struct{}), make(chan struct{})
	lister := &fakeLister{
		meta: func(int, metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
			return metaList("10", upod("ns", "a", "ua", "5")), nil
		},
		objects: func(ctx context.Context, ns, name string, opts metav1.ListOptions) (apiruntime.Object, error) {
			close(fetching)
			<-release
			return server("10", upod("ns", "a", "ua", "5"))(ctx, ns, name, opts)
		},
	}
	h := startRecovery(t, store, lister, "1", nil)
	<-fetching
	stacks := strings.Join(reflectorGoroutines(), "\n\n")
	close(release)
	for _, frame := range reflectorFrames[1:] {
		if !strings.Contains(stacks, frame) {
			t.Errorf("no goroutine in a frame of %q while a fetch is held:\n\n%s", frame, stacks)
		}
	}
	store.waitFor(t, "end@10")
	h.stop()
}
