package controllerruntime_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/boltinformer/boltinformer/controllerruntime/internal/crtest"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// srv is one kube-apiserver (with etcd) for the package: tests keep apart
// by namespace. A test that restarts it says so.
var srv *apiservertest.Server

func TestMain(m *testing.M) {
	crtest.Main(m, &srv,
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*Type).updateUnfinishedWorkLoop"),
		// A multi-namespace cache's informer waits, for ever, for every
		// namespace's informer to sync, even one removed before it ran
		// (controller-runtime v0.25.2 multi_namespace_cache.go); the
		// default cache leaks it the same way.
		goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func1"),
	)
}
