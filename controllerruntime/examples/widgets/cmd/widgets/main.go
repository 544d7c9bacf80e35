// Command widgets runs the example Widget operator with a persistent cache.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/boltinformer/boltinformer/controllerruntime/examples/widgets"
)

func main() {
	cacheFile := flag.String("cache-file", "/var/cache/widgets/cache.db", "the persistent cache file (one per replica)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("widgets")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := widgets.AddToScheme(scheme); err != nil {
		panic(err)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:   scheme,
		NewCache: widgets.PersistentCache(*cacheFile), // the one-line switch
	})
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	// The checkpoint spares a restart the reconcile of every unchanged Widget.
	r := &widgets.Reconciler{Client: mgr.GetClient(), Checkpoint: "widgets"}
	if err := r.SetupWithManager(mgr, controller.Options{}); err != nil {
		log.Error(err, "setting up the controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
