package factory

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/metadata/metadatalister"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist"
)

// MetadataFactory is a metadatainformer.SharedInformerFactory whose
// informers persist *metav1.PartialObjectMetadata to one cache file. That is
// the metadata of any resource, as kube-controller-manager's garbage
// collector, resource quota and namespace controllers watch it.
type MetadataFactory struct {
	client           metadata.Interface
	db               *persist.DB
	defaultResync    time.Duration
	namespace        string
	tweakListOptions metadatainformer.TweakListOptionsFunc
	transform        cache.TransformFunc
	persistence      PersistenceOptions
	// identity learns the cluster's identity through client, once for
	// every informer of the factory. It is built on first use.
	identity clusterSource

	informers resourceInformers
}

var _ metadatainformer.SharedInformerFactory = (*MetadataFactory)(nil)

// NewMetadataSharedInformerFactory is client-go's
// metadatainformer.NewSharedInformerFactory with a cache file. Every
// informer of the factory keeps its state in db. The factory does not close
// db, so close it after Shutdown.
func NewMetadataSharedInformerFactory(client metadata.Interface, defaultResync time.Duration, db *persist.DB, options ...MetadataOption) *MetadataFactory {
	return newMetadataFactory(client, defaultResync, db, metav1.NamespaceAll, nil, options)
}

// NewFilteredMetadataSharedInformerFactory is client-go's
// metadatainformer.NewFilteredSharedInformerFactory with a cache file.
func NewFilteredMetadataSharedInformerFactory(client metadata.Interface, defaultResync time.Duration, db *persist.DB, namespace string, tweakListOptions metadatainformer.TweakListOptionsFunc, options ...MetadataOption) *MetadataFactory {
	return newMetadataFactory(client, defaultResync, db, namespace, tweakListOptions, options)
}

// NewMetadataSharedInformerFactoryWithOptions is client-go's
// metadatainformer.NewSharedInformerFactoryWithOptions with a cache file.
func NewMetadataSharedInformerFactoryWithOptions(client metadata.Interface, defaultResync time.Duration, db *persist.DB, options ...MetadataOption) *MetadataFactory {
	return newMetadataFactory(client, defaultResync, db, metav1.NamespaceAll, nil, options)
}

func newMetadataFactory(client metadata.Interface, defaultResync time.Duration, db *persist.DB, namespace string, tweakListOptions metadatainformer.TweakListOptionsFunc, options []MetadataOption) *MetadataFactory {
	f := &MetadataFactory{
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

// ForResource returns the informer for gvr, building it on first use. It has
// client-go's default namespace index and the factory's transform. Its
// lister is client-go's metadatalister. A cache file error yields an
// informer that never syncs and reports the error when run.
func (f *MetadataFactory) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	return f.informers.get(gvr, func() (cache.SharedIndexInformer, error) { return f.newInformer(gvr) },
		func(informer cache.SharedIndexInformer) informers.GenericInformer {
			return metadataInformer{informer: informer, gvr: gvr}
		})
}

func (f *MetadataFactory) newInformer(gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	client, namespace := f.client, f.namespace
	list := resourceListOf[*metav1.PartialObjectMetadataList]("metadata", gvr, namespace, f.tweakListOptions,
		func() metadata.ResourceInterface { return client.Resource(gvr).Namespace(namespace) })
	// A Secret's metadata holds no data field, but its annotations may.
	// kubectl apply records the whole object, data included, in
	// kubectl.kubernetes.io/last-applied-configuration. So metadata Secrets
	// stay off the disk unless the program opts in, as controller-runtime's
	// adapter keeps them (PersistenceOptions.persistence).
	informer, err := newResourceInformer(list, &metav1.PartialObjectMetadata{}, f.persistence, f.db, f.cluster(),
		f.defaultResync, metadataRecovery(client, gvr, namespace, f.tweakListOptions))
	if err != nil {
		return nil, err
	}
	if f.transform != nil {
		if err := informer.SetTransform(f.transform); err != nil {
			return nil, err
		}
	}
	return informer, nil
}

// Start starts every informer requested so far that has not been started.
func (f *MetadataFactory) Start(stopCh <-chan struct{}) {
	f.StartWithContext(wait.ContextForChannel(stopCh))
}

// StartWithContext starts every informer requested so far that has not been
// started, each in its own goroutine until ctx is done.
func (f *MetadataFactory) StartWithContext(ctx context.Context) { f.informers.start(ctx) }

// WaitForCacheSync waits for every started informer to sync, or stopCh. An
// informer the factory could not build is reported unsynced at once.
func (f *MetadataFactory) WaitForCacheSync(stopCh <-chan struct{}) map[schema.GroupVersionResource]bool {
	return f.informers.waitForCacheSync(stopCh)
}

// Shutdown marks the factory as shutting down and waits for the started
// informers to return (which requires their context to be done). Informers
// flush their changes to the file as they stop.
func (f *MetadataFactory) Shutdown() { f.informers.shutdown() }

// metadataInformer is client-go's metadatainformer informer over a
// persistent informer. Its lister is client-go's metadatalister.
type metadataInformer struct {
	informer cache.SharedIndexInformer
	gvr      schema.GroupVersionResource
}

func (m metadataInformer) Informer() cache.SharedIndexInformer { return m.informer }
func (m metadataInformer) Lister() cache.GenericLister {
	return metadatalister.NewRuntimeObjectShim(metadatalister.New(m.informer.GetIndexer(), m.gvr))
}
