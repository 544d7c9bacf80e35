package factory

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/clusterid"
	"github.com/boltinformer/boltinformer/persist"
)

// DynamicFactory is a dynamicinformer.DynamicSharedInformerFactory whose
// informers persist *unstructured.Unstructured objects — any resource,
// custom resources included — to one cache file.
type DynamicFactory struct {
	client           dynamic.Interface
	db               *persist.DB
	defaultResync    time.Duration
	namespace        string
	tweakListOptions dynamicinformer.TweakListOptionsFunc
	persistSecrets   bool
	memoryOnly       map[schema.GroupVersionResource]bool
	clusterIdentity  string
	syncedAtOpen     bool
	// identity learns the cluster's identity through client, once for
	// every informer of the factory; built on first use.
	identityOnce sync.Once
	identity     *clusterid.Source

	// lock guards the fields below.
	lock             sync.Mutex
	informers        map[schema.GroupVersionResource]informers.GenericInformer
	startedInformers map[schema.GroupVersionResource]bool
	wg               sync.WaitGroup
	shuttingDown     bool
}

var _ dynamicinformer.DynamicSharedInformerFactory = (*DynamicFactory)(nil)

// NewDynamicSharedInformerFactory is client-go's
// dynamicinformer.NewDynamicSharedInformerFactory with a cache file.
func NewDynamicSharedInformerFactory(client dynamic.Interface, defaultResync time.Duration, db *persist.DB, options ...DynamicOption) *DynamicFactory {
	return NewFilteredDynamicSharedInformerFactory(client, defaultResync, db, metav1.NamespaceAll, nil, options...)
}

// NewFilteredDynamicSharedInformerFactory is client-go's
// dynamicinformer.NewFilteredDynamicSharedInformerFactory with a cache file.
func NewFilteredDynamicSharedInformerFactory(client dynamic.Interface, defaultResync time.Duration, db *persist.DB, namespace string, tweakListOptions dynamicinformer.TweakListOptionsFunc, options ...DynamicOption) *DynamicFactory {
	f := &DynamicFactory{
		client:           client,
		db:               db,
		defaultResync:    defaultResync,
		namespace:        namespace,
		tweakListOptions: tweakListOptions,
		informers:        map[schema.GroupVersionResource]informers.GenericInformer{},
		startedInformers: map[schema.GroupVersionResource]bool{},
		memoryOnly:       map[schema.GroupVersionResource]bool{},
	}
	for _, opt := range options {
		opt(f)
	}
	return f
}

// secretsResource is the one resource the dynamic factory keeps in memory
// unless told otherwise: an unstructured example object cannot say it.
var secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// ForResource returns the informer for gvr, building it on first use, with
// client-go's default namespace index. A cache file error yields an
// informer that never syncs and reports the error when run.
func (f *DynamicFactory) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	f.lock.Lock()
	defer f.lock.Unlock()
	if informer, ok := f.informers[gvr]; ok {
		return informer
	}
	var informer cache.SharedIndexInformer
	informer, err := f.newInformer(gvr)
	if err != nil {
		informer = newBrokenInformer(err)
	}
	generic := genericInformer{informer: informer, resource: gvr.GroupResource()}
	f.informers[gvr] = generic
	return generic
}

func (f *DynamicFactory) newInformer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	if f.db == nil {
		return nil, fmt.Errorf("boltinformer dynamic factory: no cache file (pass a *persist.DB to the constructor)")
	}
	client, namespace, tweak := f.client, f.namespace, f.tweakListOptions
	resource := func() dynamic.ResourceInterface { return client.Resource(gvr).Namespace(namespace) }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return resource().List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return resource().Watch(ctx, opts)
		},
	}
	// The resource may be namespaced or not; a dynamic client cannot tell
	// without discovery, so the namespace always names the collection.
	id := newListIdentity("dynamic", gvr, "", namespace, tweakedOptions(tweak))
	informer, err := bcache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{
			DB:           f.db,
			Collection:   id.collection(),
			Description:  id.description(),
			ListIdentity: id.String(),
			Cluster:      f.cluster(),
			MemoryOnly:   f.memoryOnly[gvr] || (gvr == secretsResource && !f.persistSecrets),
		},
		ResyncPeriod: f.defaultResync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		SyncedAtOpen: f.syncedAtOpen,
	})
	if err != nil {
		return nil, fmt.Errorf("boltinformer dynamic factory: informer for %s: %w", gvr, err)
	}
	return informer, nil
}

// Start starts every informer requested so far that has not been started.
func (f *DynamicFactory) Start(stopCh <-chan struct{}) {
	f.lock.Lock()
	defer f.lock.Unlock()
	if f.shuttingDown {
		return
	}
	ctx := wait.ContextForChannel(stopCh)
	for gvr, informer := range f.informers {
		if !f.startedInformers[gvr] {
			f.wg.Go(func() { informer.Informer().RunWithContext(ctx) })
			f.startedInformers[gvr] = true
		}
	}
}

// WaitForCacheSync waits for every started informer to sync, or stopCh.
func (f *DynamicFactory) WaitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool {
	started := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	f.lock.Lock()
	for gvr, informer := range f.informers {
		if f.startedInformers[gvr] {
			started[gvr] = informer.Informer()
		}
	}
	f.lock.Unlock()
	res := map[schema.GroupVersionResource]bool{}
	for gvr, informer := range started {
		if _, broken := informer.(*brokenInformer); broken {
			res[gvr] = false
			continue
		}
		res[gvr] = cache.WaitForCacheSync(stopCh, informer.HasSynced)
	}
	return res
}

// Shutdown marks the factory as shutting down and waits for the started
// informers to return.
func (f *DynamicFactory) Shutdown() {
	defer f.wg.Wait()
	f.lock.Lock()
	defer f.lock.Unlock()
	f.shuttingDown = true
}
