package manager

import (
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/persist"
)

// New builds a manager without a metrics server on controller-runtime's
// default cache if path is empty, else on the persistent cache at path
// (without fsync: a bench measures starts, not crashes), synced on the
// stored state if atOpen. Several managers in one process reuse
// controller names, so name validation is off. Its logs are discarded:
// controller-runtime logs every start and stop. requests counts its Pod
// requests on the wire.
func New(cfg *rest.Config, path string, atOpen bool) (_ ctrl.Manager, requests *benchkit.Requests, _ error) {
	log.SetLogger(logr.Discard())
	cfg = rest.CopyConfig(cfg)
	requests = &benchkit.Requests{Resource: "pods"}
	cfg.Wrap(requests.Wrap)
	opts := ctrl.Options{
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if path != "" {
		opts.NewCache = boltcr.NewCache(boltcr.Options{Path: path, File: persist.Options{NoSync: true}, SyncedAtOpen: atOpen})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	return mgr, requests, err
}
