package e2e

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

var (
	flagObjects = flag.Int("e2e.objects", 5000,
		"objects created by the cold-start and warm-restart tests (the cold-start test makes 3/5 of them ConfigMaps, the rest Pods)")
	flagRelistObjects = flag.Int("e2e.relist-objects", 2000,
		"ConfigMaps created by TestRelistAfterExpiry")
	flagKills = flag.Int("e2e.kills", 12,
		"SIGKILLs of the child informer in TestKillDuringWriteStorm")
)

// goleak is not in this module's go.mod, so leaks are checked by hand: once
// every test has returned, no goroutine may still run code of the library's
// packages (each test stops its informers and closes its files).
var libraryFrames = []string{
	"github.com/boltinformer/boltinformer/cache.",
	"github.com/boltinformer/boltinformer/reflector.",
	"github.com/boltinformer/boltinformer/processor.",
	"github.com/boltinformer/boltinformer/persist.",
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Checked after failures too: cleanups stop informers whatever happened.
	if os.Getenv(childEnv) == "" {
		if leaked := waitForLibraryGoroutines(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "goroutines leaked by boltinformer:\n\n%s\n", strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// waitForLibraryGoroutines returns the stacks of goroutines still inside the
// library after d, or nil as soon as there are none.
func waitForLibraryGoroutines(d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		leaked := libraryGoroutines()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func libraryGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var leaked []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, frame := range libraryFrames {
			if strings.Contains(g, frame) {
				leaked = append(leaked, g)
				break
			}
		}
	}
	return leaked
}
