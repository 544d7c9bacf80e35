package factory

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/listidentity"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
)

// The dynamic and metadata factories key their informers by resource, as
// client-go's dynamicinformer and metadatainformer do. This file holds what
// they share. That is the informer set with its Start, WaitForCacheSync and
// Shutdown, and the construction of a persistent informer from a resource
// client.

// resourceInformers is the informer set of a resource-keyed factory. Its zero
// value is ready to use.
type resourceInformers struct {
	// lock guards the fields below.
	lock             sync.Mutex
	informers        map[schema.GroupVersionResource]informers.GenericInformer
	startedInformers map[schema.GroupVersionResource]bool
	// wg tracks the goroutines start started.
	wg           sync.WaitGroup
	shuttingDown bool
}

// get returns the informer for gvr, building it on first use. build makes
// the shared informer, and generic wraps it with its lister. An error from
// build yields an informer that never syncs and reports the error when run.
func (r *resourceInformers) get(gvr schema.GroupVersionResource, build func() (cache.SharedIndexInformer, error), generic func(cache.SharedIndexInformer) informers.GenericInformer) informers.GenericInformer {
	r.lock.Lock()
	defer r.lock.Unlock()
	if informer, ok := r.informers[gvr]; ok {
		return informer
	}
	informer, err := build()
	if err != nil {
		informer = newBrokenInformer(err)
	}
	if r.informers == nil {
		r.informers = map[schema.GroupVersionResource]informers.GenericInformer{}
	}
	g := generic(informer)
	r.informers[gvr] = g
	return g
}

// start starts every informer requested so far that has not been started.
// Each runs in its own goroutine until ctx is done. After shutdown, start
// starts nothing.
func (r *resourceInformers) start(ctx context.Context) {
	r.lock.Lock()
	defer r.lock.Unlock()
	if r.shuttingDown {
		return
	}
	if r.startedInformers == nil {
		r.startedInformers = map[schema.GroupVersionResource]bool{}
	}
	for gvr, informer := range r.informers {
		if !r.startedInformers[gvr] {
			r.wg.Go(func() { informer.Informer().RunWithContext(ctx) })
			r.startedInformers[gvr] = true
		}
	}
}

// waitForCacheSync waits for every started informer to sync, or stopCh. An
// informer that could not be built is reported unsynced at once.
func (r *resourceInformers) waitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool {
	started := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	r.lock.Lock()
	for gvr, informer := range r.informers {
		if r.startedInformers[gvr] {
			started[gvr] = informer.Informer()
		}
	}
	r.lock.Unlock()
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

// shutdown stops further starts and waits for the started informers to
// return (which requires their context to be done).
func (r *resourceInformers) shutdown() {
	defer r.wg.Wait()
	r.lock.Lock()
	defer r.lock.Unlock()
	r.shuttingDown = true
}

// resourceList is what an informer of a resource-keyed factory lists, and
// the client calls that list and watch it (before tweak is applied).
type resourceList struct {
	source    string // "dynamic" or "metadata": names the collection
	gvr       schema.GroupVersionResource
	namespace string // the factory's; "" for all namespaces
	tweak     func(*metav1.ListOptions)
	list      func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	watch     func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// resourceClient is what an informer uses of a dynamic or metadata
// ResourceInterface, whose lists are L.
type resourceClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// resourceListOf returns the resourceList of a dynamic or metadata factory's
// informer. Its requests go through resource, looked up on each call as
// client-go's informers do.
func resourceListOf[L runtime.Object, R resourceClient[L]](source string, gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions), resource func() R) resourceList {
	return resourceList{
		source:    source,
		gvr:       gvr,
		namespace: namespace,
		tweak:     tweak,
		list: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return resource().List(ctx, opts)
		},
		watch: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return resource().Watch(ctx, opts)
		},
	}
}

// newResourceInformer builds the persistent informer for l in db. It has
// client-go's namespace index, as dynamicinformer and metadatainformer build
// theirs. It persists as the factory's options o say, and records cluster.
// The collection, its description and the list identity are l's. recovery,
// if not nil, is how it recovers after a 410 (see InformerOptions.Recovery).
//
// The client cannot tell a cluster-scoped resource from a namespaced one
// without discovery, so the factory's namespace always names the
// collection.
func newResourceInformer(l resourceList, example runtime.Object, o PersistenceOptions, db *persist.DB, cluster bcache.ClusterIdentity, resync time.Duration, recovery *recovery.Options) (*bcache.Informer, error) {
	if db == nil {
		return nil, fmt.Errorf("boltinformer %s factory: no cache file (pass a *persist.DB to the constructor)", l.source)
	}
	tweak := l.tweak
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return l.list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&opts)
			}
			return l.watch(ctx, opts)
		},
	}
	id := listidentity.FromOptions(l.source, l.gvr, "", l.namespace, tweakedOptions(tweak))
	p := o.persistence(db, cluster, l.gvr)
	p.Collection, p.Description, p.ListIdentity = id.Collection(), id.Description(), id.String()
	informer, err := bcache.NewSharedIndexInformerWithOptions(lw, example, bcache.InformerOptions{
		Persistence:  p,
		Metrics:      o.Metrics,
		ResyncPeriod: resync,
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		SyncedAtOpen: o.SyncedAtOpen,
		Recovery:     recovery,
	})
	if err != nil {
		return nil, fmt.Errorf("boltinformer %s factory: informer for %s: %w", l.source, l.gvr, err)
	}
	return informer, nil
}

// tweakedOptions returns the list options tweak sets on empty ones.
func tweakedOptions(tweak func(*metav1.ListOptions)) metav1.ListOptions {
	var opts metav1.ListOptions
	if tweak != nil {
		tweak(&opts)
	}
	return opts
}
