package e2e

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/boltinformer/boltinformer/components/internal/gobuild"
)

// The binaries the tests run, built by TestMain.
var (
	boltScheduler          string // components/cmd/kube-scheduler
	boltControllerManager  string // components/cmd/kube-controller-manager
	stockControllerManager string // k8s.io/kubernetes/cmd/kube-controller-manager
)

// TestMain builds them into <repository>/_output/components-e2e, where they
// stay: a run whose binaries are already up to date there links none of
// them (see gobuild.OutputDir).
func TestMain(m *testing.M) {
	dir, err := gobuild.OutputDir("components-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		var err error
		for _, b := range []struct {
			out *string
			pkg string
			bin string
		}{
			{&boltScheduler, "github.com/boltinformer/boltinformer/components/cmd/kube-scheduler", "kube-scheduler"},
			{&boltControllerManager, "github.com/boltinformer/boltinformer/components/cmd/kube-controller-manager", "kube-controller-manager"},
			{&stockControllerManager, "k8s.io/kubernetes/cmd/kube-controller-manager", "stock-kube-controller-manager"},
		} {
			if *b.out, err = gobuild.Binary(dir, b.pkg, b.bin); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		code := m.Run()
		// No goroutine a test starts may outlive the tests (the tests'
		// own clients; the components are processes).
		if code == 0 {
			if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1")); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				return 1
			}
		}
		return code
	}()
	os.Exit(code)
}
