package factory

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/listidentity"
	"github.com/boltinformer/boltinformer/persist"
)

// Factory is a SharedInformerFactory whose informers persist to one cache
// file. It satisfies client-go's informers.SharedInformerFactory, so the
// generated group accessors (Core().V1().Pods(), ...) and listers work on
// it unchanged.
type Factory struct {
	client           kubernetes.Interface
	db               *persist.DB
	namespace        string
	tweakListOptions internalinterfaces.TweakListOptionsFunc
	defaultResync    time.Duration
	customResync     map[reflect.Type]time.Duration
	transform        cache.TransformFunc
	informerName     *cache.InformerName
	persistence      PersistenceOptions

	// identity learns the cluster's identity through client, once for
	// every informer of the factory. It is built on first use.
	identity clusterSource

	// lock guards the fields below.
	lock sync.Mutex
	// capture records what newFunc's informers list. It is built on first
	// use.
	capture *captureClient
	// capturing is set while newFunc runs against capture (InformerName
	// reads it without the lock).
	capturing        atomic.Bool
	informers        map[reflect.Type]cache.SharedIndexInformer
	startedInformers map[reflect.Type]bool
	// wireClients are the list and watch clients by group-version
	// (wirewatch.go). A group-version's is nil for a clientset without REST
	// clients.
	wireClients map[schema.GroupVersion]*wireClient
	// wg tracks the goroutines Start started.
	wg           sync.WaitGroup
	shuttingDown bool
}

var _ informers.SharedInformerFactory = (*Factory)(nil)

// NewSharedInformerFactory is client-go's informers.NewSharedInformerFactory
// with a cache file. Every informer of the factory keeps its state in db.
// The factory does not close db, so close it after Shutdown.
func NewSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration, db *persist.DB) *Factory {
	return NewSharedInformerFactoryWithOptions(client, defaultResync, db)
}

// NewFilteredSharedInformerFactory is client-go's
// informers.NewFilteredSharedInformerFactory with a cache file.
func NewFilteredSharedInformerFactory(client kubernetes.Interface, defaultResync time.Duration, db *persist.DB, namespace string, tweakListOptions internalinterfaces.TweakListOptionsFunc) *Factory {
	return NewSharedInformerFactoryWithOptions(client, defaultResync, db, WithNamespace(namespace), WithTweakListOptions(tweakListOptions))
}

// NewSharedInformerFactoryWithOptions is client-go's
// informers.NewSharedInformerFactoryWithOptions with a cache file.
func NewSharedInformerFactoryWithOptions(client kubernetes.Interface, defaultResync time.Duration, db *persist.DB, options ...Option) *Factory {
	f := &Factory{
		client:           client,
		db:               db,
		namespace:        metav1.NamespaceAll,
		defaultResync:    defaultResync,
		customResync:     map[reflect.Type]time.Duration{},
		informers:        map[reflect.Type]cache.SharedIndexInformer{},
		startedInformers: map[reflect.Type]bool{},
	}
	for _, opt := range options {
		opt(f)
	}
	return f
}

// InformerName implements internalinterfaces.SharedInformerFactory. It is
// nil while InformerFor runs newFunc against its capture clientset (see
// captureLocked).
func (f *Factory) InformerName() *cache.InformerName {
	if f.capturing.Load() {
		return nil
	}
	return f.informerName
}

// Start implements informers.SharedInformerFactory.
func (f *Factory) Start(stopCh <-chan struct{}) { f.StartWithContext(wait.ContextForChannel(stopCh)) }

// StartWithContext starts every informer requested so far that has not been
// started, each in its own goroutine until ctx is done.
func (f *Factory) StartWithContext(ctx context.Context) {
	f.lock.Lock()
	defer f.lock.Unlock()
	if f.shuttingDown {
		return
	}
	for informerType, informer := range f.informers {
		if !f.startedInformers[informerType] {
			f.wg.Go(func() { informer.RunWithContext(ctx) })
			f.startedInformers[informerType] = true
		}
	}
}

// Shutdown marks the factory as shutting down and waits for every started
// informer to return (which requires their context to be done). Informers
// flush their changes to the file as they stop.
func (f *Factory) Shutdown() {
	f.lock.Lock()
	f.shuttingDown = true
	f.lock.Unlock()
	f.wg.Wait()
	f.informerName.Release()
}

// WaitForCacheSync implements informers.SharedInformerFactory.
func (f *Factory) WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool {
	return f.WaitForCacheSyncWithContext(wait.ContextForChannel(stopCh)).Synced
}

// WaitForCacheSyncWithContext waits for every started informer to sync. An
// informer the factory could not build never syncs. Its error is joined
// into the result's Err.
func (f *Factory) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	started := map[reflect.Type]cache.SharedIndexInformer{}
	var broken []error
	f.lock.Lock()
	for informerType, informer := range f.informers {
		if !f.startedInformers[informerType] {
			continue
		}
		if b, ok := informer.(*brokenInformer); ok {
			broken = append(broken, b.err)
		}
		started[informerType] = informer
	}
	f.lock.Unlock()

	checks := make([]cache.DoneChecker, 0, len(started))
	for _, informer := range started {
		if _, ok := informer.(*brokenInformer); !ok {
			checks = append(checks, informer.HasSyncedChecker())
		}
	}
	cache.WaitFor(ctx, "", checks...)
	res := cache.SyncResult{Synced: make(map[reflect.Type]bool, len(started))}
	failed := len(broken) > 0
	for informerType, informer := range started {
		synced := informer.HasSynced()
		failed = failed || !synced
		res.Synced[informerType] = synced
	}
	if failed {
		res.Err = errors.Join(append(broken, context.Cause(ctx))...)
	}
	return res
}

// InformerFor returns the informer for obj's type, building it on first
// use. The informer lists and watches through the ListerWatcher that
// newFunc's informer has when newFunc is given the factory's client. So it
// holds exactly what client-go's would, Go-side filters and rewrites
// included. It keeps newFunc's resync period, indexers, transform, watch
// error handler and the handlers newFunc registered. The factory's
// transform, if set, replaces newFunc's, as in client-go.
//
// To name the informer's collection, the factory also runs newFunc against
// a clientset that records requests without sending them (see capture.go).
// It reads the namespace and selectors its ListerWatcher asks for. So
// newFunc is called twice, once with each client. client-go's own
// ListerWatchers are a generated informer's and
// cache.NewListWatchFromClient's. Any other may filter or rewrite objects in
// Go, which no request shows. Its informer persists only when the factory
// declares PersistenceOptions.ListerWatcherVersion, and otherwise runs in
// memory.
//
// The list cannot be determined when newFunc's informer uses another
// client, lists a type no typed client serves, or is not client-go's
// informer. Then, and for a custom ListerWatcher without a declared
// version, InformerFor returns newFunc's own informer unchanged, in memory,
// as client-go's factory does. That informer is built with the factory's
// client. InformerFor logs why once and counts it
// (PersistenceOptions.Metrics). newFunc's informer may be client-go's but
// lack the private fields of the client-go version the factory reads
// (clientgo.go). The same fallback is then reported as an error.
//
// A nil newFunc builds the informer the generated accessors would. A cache
// file error yields an informer that never syncs and reports the error (see
// WaitForCacheSyncWithContext).
func (f *Factory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	f.lock.Lock()
	defer f.lock.Unlock()
	informerType := reflect.TypeOf(obj)
	if informer, ok := f.informers[informerType]; ok {
		return informer
	}
	resync, ok := f.customResync[informerType]
	if !ok {
		resync = f.defaultResync
	}
	informer, err := f.informerForLocked(obj, newFunc, resync)
	if err != nil {
		informer = newBrokenInformer(err)
	}
	f.informers[informerType] = informer
	return informer
}

// informerForLocked builds the informer InformerFor returns. f.lock is held.
func (f *Factory) informerForLocked(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (cache.SharedIndexInformer, error) {
	_, err := accessorFor(obj)
	var gvk schema.GroupVersionKind
	var gvr schema.GroupVersionResource
	if err == nil {
		gvk, gvr, err = resourceOf(obj)
	}
	if newFunc == nil {
		if err != nil {
			return nil, err
		}
		return f.newDefaultInformer(obj, gvk, gvr, resync)
	}
	var req listRequest
	if err == nil {
		req, err = f.captureLocked(obj, gvr, newFunc, resync)
	}
	informer := newFunc(f.client, resync)
	if informer == nil {
		// client-go's factory would hand out nil, to panic when started.
		return nil, fmt.Errorf("boltinformer factory: newFunc returned a nil informer for %T", obj)
	}
	var parts clientGoParts
	if err == nil {
		parts, err = readClientGoInformer(informer)
	}
	if err == nil {
		if code, _ := listerWatcherCode(parts.listerWatcher); code != req.code || reflect.TypeOf(parts.example) != reflect.TypeOf(obj) {
			err = fmt.Errorf("given the factory's client, newFunc builds an informer of %T with ListerWatcher %s, but given another, one with %s", parts.example, code, req.code)
		}
	}
	if err == nil && !req.requestOnly && f.persistence.ListerWatcherVersion == nil {
		err = fmt.Errorf("%w: %s is not client-go's own (a generated informer's, or cache.NewListWatchFromClient's), so it may filter or rewrite objects in Go, which its requests do not show; declare its version (PersistenceOptions.ListerWatcherVersion) to persist it", errCustomListerWatcher, req.code)
	}
	if err != nil {
		f.reportFallback(obj, gvr, err)
		if f.transform != nil {
			if err := informer.SetTransform(f.transform); err != nil {
				return nil, err
			}
		}
		return informer, nil
	}
	// The capture took the metrics name that a newFunc closing over an
	// InformerName registers. The informer that runs keeps it. client-go
	// logs the second registration as a duplicate, once.
	if !parts.identifier.Reserved() && req.identifier.Reserved() &&
		req.identifier.Name() == parts.identifier.Name() && req.identifier.GroupVersionResource() == parts.identifier.GroupVersionResource() {
		parts.identifier = req.identifier
	}
	persistent, err := f.newInformer(obj, gvk, gvr, req, parts)
	if err != nil {
		return nil, err
	}
	return rewrap(persistent, informer), nil
}

// captureLocked runs newFunc against the capture clientset and returns what
// its informer requests. f.lock is held.
func (f *Factory) captureLocked(obj runtime.Object, gvr schema.GroupVersionResource, newFunc internalinterfaces.NewInformerFunc, resync time.Duration) (listRequest, error) {
	if f.capture == nil {
		c, err := newCaptureClient()
		if err != nil {
			return listRequest{}, err
		}
		f.capture = c
	}
	// A generated newFunc reserves its informer's metrics name through
	// InformerName. The informer built for the capture never runs, so it
	// must not take the name from the one that does.
	f.capturing.Store(true)
	defer f.capturing.Store(false)
	return f.capture.capture(obj, gvr, newFunc, resync)
}

// tweakedRequest returns the listRequest of client-go's ListerWatcher of the
// namespace with tweak.
func tweakedRequest(namespace string, tweak func(*metav1.ListOptions)) listRequest {
	req := listRequest{namespace: namespace, options: listidentity.FilterOptions(tweakedOptions(tweak)), requestOnly: true}
	// A tweak cannot fail, so neither can changesProbes here.
	req.setsReflectorParams, _ = changesProbes(req.options, func(probe metav1.ListOptions) (url.Values, error) {
		watch := probe.Watch
		probe.Watch = false // the typed Watch sets it after the tweak
		if tweak != nil {
			tweak(&probe)
		}
		probe.Watch = probe.Watch || watch
		return listidentity.Query(probe), nil
	})
	return req
}

// newDefaultInformer builds, for a nil newFunc, the informer the generated
// accessors would. It lists and watches through the typed client with the
// factory's namespace and tweak, and has the namespace index.
func (f *Factory) newDefaultInformer(obj runtime.Object, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, resync time.Duration) (cache.SharedIndexInformer, error) {
	req := tweakedRequest(f.namespace, f.tweakListOptions)
	lw, err := typedListWatch(f.client, obj, f.namespace, f.tweakListOptions)
	if err != nil {
		return nil, err
	}
	return f.newInformer(obj, gvk, gvr, req, clientGoParts{
		example:       obj,
		listerWatcher: lw,
		resync:        resync,
		indexers:      cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		identifier:    f.informerName.WithResource(gvr),
	})
}

// newInformer builds the persistent informer for what req names, listing
// through parts.listerWatcher and set up as parts says.
func (f *Factory) newInformer(obj runtime.Object, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, req listRequest, parts clientGoParts) (cache.SharedIndexInformer, error) {
	if f.db == nil {
		return nil, errors.New("boltinformer factory: no cache file (pass a *persist.DB to the constructor)")
	}
	// A cluster-scoped list ignores the namespace, but the collection is
	// still named with the factory's. Each factory on a file owns its
	// collections, and two informers cannot write one collection.
	namespace := req.namespace
	if acc, _ := accessorFor(obj); !acc.namespaced {
		namespace = f.namespace
	}
	id := listidentity.FromOptions("typed", gvr, gvk.Kind, namespace, req.options)
	if !req.requestOnly {
		id = id.WithListerWatcher(req.code, *f.persistence.ListerWatcherVersion)
	}
	transform := parts.transform
	if f.transform != nil {
		transform = f.transform
	}
	p := f.persistence.persistence(f.db, f.cluster(), gvr)
	p.Collection, p.Description, p.ListIdentity = id.Collection(), id.Description(), id.String()
	informer, err := bcache.NewSharedIndexInformerWithOptions(f.wireListerWatcher(parts.listerWatcher, obj, gvr, req), obj, bcache.InformerOptions{
		Persistence:             p,
		Metrics:                 f.persistence.Metrics,
		ResyncPeriod:            parts.resync,
		Indexers:                parts.indexers,
		ObjectDescription:       parts.description,
		Identifier:              parts.identifier,
		InformerMetricsProvider: parts.metricsProvider,
		SyncedAtOpen:            f.persistence.SyncedAtOpen,
		Recovery:                f.typedRecovery(gvr, req),
	})
	if err != nil {
		return nil, fmt.Errorf("boltinformer factory: informer for %s: %w", gvr, err)
	}
	if transform != nil {
		if err := informer.SetTransform(transform); err != nil {
			return nil, err
		}
	}
	if err := parts.register(informer); err != nil {
		return nil, err
	}
	return informer, nil
}

// resourceOf returns the kind and resource of a typed object, from the
// scheme. Built-in resources are the lowercase plural of their kind, which
// is what meta.UnsafeGuessKindToResource computes for them.
func resourceOf(obj runtime.Object) (schema.GroupVersionKind, schema.GroupVersionResource, error) {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return schema.GroupVersionKind{}, schema.GroupVersionResource{}, fmt.Errorf("boltinformer factory: %T is not in client-go's scheme: %v", obj, err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	return gvks[0], gvr, nil
}

// ForResource returns the informer for a built-in resource, as client-go's
// factory does.
func (f *Factory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	obj, ok := typesByResource()[gvr]
	if !ok {
		return nil, fmt.Errorf("no informer found for %v", gvr)
	}
	return genericInformer{informer: f.InformerFor(obj, nil), resource: gvr.GroupResource()}, nil
}

// typesByResource maps every resource a typed client lists to its object.
var typesByResource = sync.OnceValue(func() map[schema.GroupVersionResource]runtime.Object {
	out := map[schema.GroupVersionResource]runtime.Object{}
	for t := range accessors() {
		obj, ok := reflect.New(t.Elem()).Interface().(runtime.Object)
		if !ok {
			continue
		}
		if _, gvr, err := resourceOf(obj); err == nil {
			out[gvr] = obj
		}
	}
	return out
})

type genericInformer struct {
	informer cache.SharedIndexInformer
	resource schema.GroupResource
}

func (g genericInformer) Informer() cache.SharedIndexInformer { return g.informer }
func (g genericInformer) Lister() cache.GenericLister {
	return cache.NewGenericLister(g.informer.GetIndexer(), g.resource)
}

// The group accessors hand this factory to client-go's generated packages,
// which call InformerFor.

func (f *Factory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Apps() apps.Interface { return apps.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Autoscaling() autoscaling.Interface {
	return autoscaling.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Batch() batch.Interface { return batch.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Certificates() certificates.Interface {
	return certificates.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Coordination() coordination.Interface {
	return coordination.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Core() core.Interface { return core.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Discovery() discovery.Interface {
	return discovery.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Events() events.Interface { return events.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Extensions() extensions.Interface {
	return extensions.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Flowcontrol() flowcontrol.Interface {
	return flowcontrol.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Lifecycle() lifecycle.Interface {
	return lifecycle.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Networking() networking.Interface {
	return networking.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Node() node.Interface     { return node.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Policy() policy.Interface { return policy.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Rbac() rbac.Interface     { return rbac.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Resource() resource.Interface {
	return resource.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Scheduling() scheduling.Interface {
	return scheduling.New(f, f.namespace, f.tweakListOptions)
}
func (f *Factory) Storage() storage.Interface { return storage.New(f, f.namespace, f.tweakListOptions) }
func (f *Factory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, f.namespace, f.tweakListOptions)
}
