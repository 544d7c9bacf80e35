package factory

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

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
	persistence      PersistenceOptions
	// identity learns the cluster's identity through client, once for
	// every informer of the factory. It is built on first use.
	identity clusterSource

	informers resourceInformers
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
	}
	for _, opt := range options {
		opt(f)
	}
	return f
}

// ForResource returns the informer for gvr, building it on first use, with
// client-go's default namespace index. A cache file error yields an
// informer that never syncs and reports the error when run.
func (f *DynamicFactory) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	return f.informers.get(gvr, func() (cache.SharedIndexInformer, error) { return f.newInformer(gvr) },
		func(informer cache.SharedIndexInformer) informers.GenericInformer {
			return genericInformer{informer: informer, resource: gvr.GroupResource()}
		})
}

func (f *DynamicFactory) newInformer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	client, namespace := f.client, f.namespace
	list := resourceListOf[*unstructured.UnstructuredList]("dynamic", gvr, namespace, f.tweakListOptions,
		func() dynamic.ResourceInterface { return client.Resource(gvr).Namespace(namespace) })
	return newResourceInformer(list, &unstructured.Unstructured{}, f.persistence, f.db, f.cluster(),
		f.defaultResync, dynamicRecovery(f.persistence.MetadataClient, client, gvr, namespace, f.tweakListOptions))
}

// Start starts every informer requested so far that has not been started.
func (f *DynamicFactory) Start(stopCh <-chan struct{}) {
	f.informers.start(wait.ContextForChannel(stopCh))
}

// WaitForCacheSync waits for every started informer to sync, or stopCh.
func (f *DynamicFactory) WaitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool {
	return f.informers.waitForCacheSync(stopCh)
}

// Shutdown marks the factory as shutting down and waits for the started
// informers to return.
func (f *DynamicFactory) Shutdown() { f.informers.shutdown() }
