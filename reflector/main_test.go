package reflector

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// goleak is not in this module's go.mod, so leaks are checked by hand: no
// goroutine may still be running a *Reflector method once Run or
// ListAndWatch has returned.

// reflectorFrame matches every frame of a Reflector method, including
// closures started from one (watchWithResync.func1 and so on).
const reflectorFrame = "boltinformer/reflector.(*Reflector)."

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := waitForReflectorGoroutines(2 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "goroutines leaked by reflector:\n\n%s\n", strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
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
		if strings.Contains(g, reflectorFrame) {
			out = append(out, g)
		}
	}
	return out
}

// waitForReflectorGoroutines polls until no goroutine is inside a Reflector
// method or the timeout passes, and returns what is left.
func waitForReflectorGoroutines(timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		leaked := reflectorGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(time.Millisecond)
	}
}

// assertNoReflectorGoroutines fails t if a goroutine is still inside a
// Reflector method. Call it only after Run/ListAndWatch returned: they join
// every goroutine they start, so the check is immediate, without polling.
func assertNoReflectorGoroutines(t *testing.T) {
	t.Helper()
	if leaked := reflectorGoroutines(); len(leaked) > 0 {
		t.Fatalf("goroutines leaked by reflector:\n\n%s", strings.Join(leaked, "\n\n"))
	}
}
