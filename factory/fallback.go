package factory

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// When InformerFor cannot persist newFunc's informer, it returns that
// informer, in memory, as client-go's factory does (see InformerFor). Each
// such fallback is counted in boltinformer_factory_fallbacks_total (with
// PersistenceOptions.Metrics) under one of the reasons below. Most reasons
// are the documented behaviour for an informer the factory cannot
// understand, and are logged at Info. client-go-layout is different. The
// factory was built for the private fields of client-go clientGoVersion
// (clientgo.go), and the client-go in use has others. So every informer of
// a generated accessor given a newFunc falls back. That is reported as an
// error (utilruntime.HandleError).
const (
	// fallbackClientGoLayout means newFunc's informer is client-go's, but
	// its private state is not v0.37.2's (errClientGoLayout).
	fallbackClientGoLayout = "client-go-layout"
	// fallbackNotClientGo means newFunc's informer is another
	// implementation (errNotClientGo).
	fallbackNotClientGo = "not-client-go"
	// fallbackCustomListerWatcher means its ListerWatcher is not
	// client-go's own, and no ListerWatcherVersion is declared
	// (errCustomListerWatcher).
	fallbackCustomListerWatcher = "custom-lister-watcher"
	// fallbackUnknownList means what it lists could not be determined. It
	// may use another client, list a type no typed client lists, or be
	// started already.
	fallbackUnknownList = "unknown-list"
)

// errCustomListerWatcher marks a ListerWatcher that is not client-go's own,
// whose informer persists only with a declared ListerWatcherVersion.
var errCustomListerWatcher = errors.New("its ListerWatcher is custom")

// fallbackReason is the reason label for err, why InformerFor could not
// persist an informer.
func fallbackReason(err error) string {
	switch {
	case errors.Is(err, errClientGoLayout):
		return fallbackClientGoLayout
	case errors.Is(err, errNotClientGo):
		return fallbackNotClientGo
	case errors.Is(err, errCustomListerWatcher):
		return fallbackCustomListerWatcher
	default:
		return fallbackUnknownList
	}
}

// reportFallback reports that the informer for obj (listing gvr, if known)
// runs in memory because of err, and counts it.
func (f *Factory) reportFallback(obj runtime.Object, gvr schema.GroupVersionResource, err error) {
	resource := gvr.String()
	if gvr.Empty() {
		resource = fmt.Sprintf("%T", obj)
	}
	reason := fallbackReason(err)
	f.persistence.Metrics.CountFactoryFallback(resource, reason)
	logger := klog.Background()
	if reason != fallbackClientGoLayout {
		logger.Info("boltinformer factory: the informer runs in memory as client-go's, nothing persisted",
			"type", fmt.Sprintf("%T", obj), "reason", err.Error())
		return
	}
	utilruntime.HandleErrorWithLogger(logger, fmt.Errorf("boltinformer factory: cannot read the informer newFunc built for %T (%w); "+
		"it runs in memory as client-go's: nothing of it is persisted and it lists everything at every start. "+
		"boltinformer reads client-go %[3]s's private informer fields, and the client-go in use has others: "+
		"pin k8s.io/client-go to %[3]s, or upgrade boltinformer to a release for this client-go (or file an issue)", obj, err, clientGoVersion),
		"boltinformer: informer not persisted", "type", fmt.Sprintf("%T", obj), "resource", resource)
}
