package factory

import (
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
)

// Option configures a SharedInformerFactory, as client-go's
// informers.SharedInformerOption does.
type Option func(*Factory)

// WithNamespace limits the factory's informers to one namespace.
func WithNamespace(namespace string) Option {
	return func(f *Factory) { f.namespace = namespace }
}

// WithTweakListOptions sets a function applied to every list and watch
// request. The selectors it sets name the informers' collections, so a
// changed selector starts a new collection instead of resuming the old one.
func WithTweakListOptions(tweak internalinterfaces.TweakListOptionsFunc) Option {
	return func(f *Factory) { f.tweakListOptions = tweak }
}

// WithCustomResyncConfig sets resync periods per object type.
func WithCustomResyncConfig(resyncConfig map[metav1.Object]time.Duration) Option {
	return func(f *Factory) {
		for k, v := range resyncConfig {
			f.customResync[reflect.TypeOf(k)] = v
		}
	}
}

// WithTransform sets a transform applied to every object before it is
// stored, replacing any transform a constructor passed to InformerFor sets,
// as in client-go. The file holds transformed objects, so declare the
// transform's version with WithTransformVersion and change it whenever the
// transform's output changes.
func WithTransform(transform cache.TransformFunc) Option {
	return func(f *Factory) { f.transform = transform }
}

// WithTransformVersion declares the version of the transforms the factory's
// informers apply (WithTransform, or one a constructor passed to
// InformerFor sets with SetTransform). It is stored with each collection
// (cache.Persistence.TransformVersion): a collection stored under another
// version starts cold instead of serving objects in the old transform's
// shape. Empty is a version like any other.
func WithTransformVersion(version string) Option {
	return func(f *Factory) { f.transformVersion = version }
}

// WithListerWatcherVersion declares the version of the Go code in the
// ListerWatchers that constructors passed to InformerFor build, when that
// code is not client-go's own (a generated informer's, or
// cache.NewListWatchFromClient's): a hand-written cache.ListWatch, one
// that drops items from List, wraps Watch with watch.Filter or rewrites
// objects. Such code decides what the collection holds, like a selector,
// but no request shows it, so without a declared version those informers
// run in memory, as client-go's, and start cold at every start. With one,
// they persist: the version and the Go names of the ListerWatcher's
// functions are stored with the collection (cache.Persistence.ListIdentity),
// and a collection stored under another version or other names starts
// cold. Change the version whenever any such ListerWatcher's behaviour
// changes; a closure's name does not change with its body or with what it
// closes over. Empty is a version like any other.
func WithListerWatcherVersion(version string) Option {
	return func(f *Factory) { f.listerWatcherVersion, f.listerWatcherVersionSet = version, true }
}

// WithClusterIdentity declares the identity of the cluster the client
// reaches, stored with each collection (cache.Persistence.Cluster): a
// collection recorded under another cluster starts cold. Without it the
// factory reads, when an informer starts, the kube-system namespace's UID
// through its client, or, if that is Forbidden, the UID of the
// ServiceAccount the client authenticates as (see the package doc), and
// resumes nothing until it has one. Use this option for clients that can
// read neither (a user that is not a ServiceAccount and may not get
// kube-system), or to start warm while the apiserver is unreachable. The
// identity must differ between clusters and change when a cluster is
// recreated; do not start it with "serviceaccount/".
func WithClusterIdentity(id string) Option {
	return func(f *Factory) { f.clusterIdentity = id }
}

// WithSyncedAtOpen makes every informer of the factory that starts warm
// report synced (and WaitForCacheSync return) as soon as its file is open
// and checked, on the stored state, instead of once its watch has caught up
// with the cluster as of the informer's start (the default; see
// cache.InformerOptions.SyncedAtOpen). Only for controllers that tolerate a
// stale start: one that creates what it does not find, or deletes or
// reports what it does not find in its cache, would act on objects deleted,
// or miss objects created, while the process was down. With
// WithClusterIdentity it also lets the factory's informers sync from their
// files while the apiserver is unreachable.
func WithSyncedAtOpen() Option {
	return func(f *Factory) { f.syncedAtOpen = true }
}

// WithMetrics exports the factory's metrics on m: its persistent informers'
// (as cache.InformerOptions.Metrics, which also makes m their
// InformerMetricsProvider unless newFunc's informer had one), and the
// informers InformerFor runs in memory instead of persisting
// (boltinformer_factory_fallbacks_total, by resource and reason). Without
// it, the factory exports none.
func WithMetrics(m *bcache.Metrics) Option {
	return func(f *Factory) { f.metrics = m }
}

// WithInformerName names the factory's informers for client-go's metrics.
func WithInformerName(name *cache.InformerName) Option {
	return func(f *Factory) { f.informerName = name }
}

// WithCacheBound bounds each informer's in-memory cache of decoded objects
// (see cache.Persistence); zero for both keeps every object in memory.
func WithCacheBound(objects int, bytes int64) Option {
	return func(f *Factory) { f.cacheObjects, f.cacheBytes = objects, bytes }
}

// WithIndexVersions declares index function versions by index name, for
// every informer of the factory (see cache.IndexerOptions.IndexVersions).
func WithIndexVersions(versions map[string]string) Option {
	return func(f *Factory) { f.indexVersions = versions }
}

// WithPersistSecrets lets the factory's Secret informer persist its objects.
// Without it, Secrets are kept in memory only (see cache.Persistence).
func WithPersistSecrets() Option {
	return func(f *Factory) { f.persistSecrets = true }
}

// WithMemoryOnly keeps the informers of the given types in memory only:
// their objects never reach the file.
func WithMemoryOnly(types ...runtime.Object) Option {
	return func(f *Factory) {
		for _, t := range types {
			f.memoryOnly[reflect.TypeOf(t)] = true
		}
	}
}

// DynamicOption configures a DynamicFactory.
type DynamicOption func(*DynamicFactory)

// WithDynamicPersistSecrets lets the dynamic factory persist core/v1
// secrets; without it, an informer for them keeps them in memory only.
func WithDynamicPersistSecrets() DynamicOption {
	return func(f *DynamicFactory) { f.persistSecrets = true }
}

// WithDynamicClusterIdentity is WithClusterIdentity for the dynamic
// factory, whose default identity is read the same way through the v1
// namespaces and authentication.k8s.io/v1 selfsubjectreviews resources.
func WithDynamicClusterIdentity(id string) DynamicOption {
	return func(f *DynamicFactory) { f.clusterIdentity = id }
}

// WithDynamicSyncedAtOpen is WithSyncedAtOpen for the dynamic factory.
func WithDynamicSyncedAtOpen() DynamicOption {
	return func(f *DynamicFactory) { f.syncedAtOpen = true }
}

// WithDynamicMemoryOnly keeps the informers of the given resources in
// memory only.
func WithDynamicMemoryOnly(resources ...schema.GroupVersionResource) DynamicOption {
	return func(f *DynamicFactory) {
		for _, r := range resources {
			f.memoryOnly[r] = true
		}
	}
}

// WithDynamicRecovery makes the dynamic factory's informers recover after
// a 410, or for a list their collection owes, by what changed (see
// cache.InformerOptions.Recovery): their collection's metadata is listed
// through mc (client-go's metadata client, built from the same config as
// the dynamic client), its changed objects fetched through the dynamic
// client. It vouches that the factory's resources are served from etcd by
// kube-apiserver — built-in resources and custom resources, not aggregated
// APIs — whose resourceVersions a recovery compares as integers (one whose
// resourceVersions are not integers is listed in full). Without it the
// dynamic factory's informers relist in full.
func WithDynamicRecovery(mc metadata.Interface) DynamicOption {
	return func(f *DynamicFactory) { f.metadataClient = mc }
}

// MetadataOption configures a MetadataFactory, as client-go's
// metadatainformer.SharedInformerOption does.
type MetadataOption func(*MetadataFactory)

// WithMetadataTransform is client-go's metadatainformer.WithTransform: a
// transform applied to every object before it is stored. The file holds
// transformed objects, so declare the transform's version with
// WithMetadataTransformVersion and change it whenever its output changes.
func WithMetadataTransform(transform cache.TransformFunc) MetadataOption {
	return func(f *MetadataFactory) { f.transform = transform }
}

// WithMetadataTransformVersion is WithTransformVersion for the metadata
// factory: a collection stored under another version starts cold.
func WithMetadataTransformVersion(version string) MetadataOption {
	return func(f *MetadataFactory) { f.transformVersion = version }
}

// WithMetadataNamespace limits the metadata factory's informers to one
// namespace (NewFilteredMetadataSharedInformerFactory's namespace).
func WithMetadataNamespace(namespace string) MetadataOption {
	return func(f *MetadataFactory) { f.namespace = namespace }
}

// WithMetadataTweakListOptions sets a function applied to every list and
// watch request of the metadata factory (NewFilteredMetadataSharedInformerFactory's
// tweakListOptions). The selectors it sets name the informers' collections,
// so a changed selector starts a new collection instead of resuming the old
// one.
func WithMetadataTweakListOptions(tweak metadatainformer.TweakListOptionsFunc) MetadataOption {
	return func(f *MetadataFactory) { f.tweakListOptions = tweak }
}

// WithMetadataClusterIdentity is WithClusterIdentity for the metadata
// factory, whose default identity is the kube-system namespace's UID read
// through the metadata client.
func WithMetadataClusterIdentity(id string) MetadataOption {
	return func(f *MetadataFactory) { f.clusterIdentity = id }
}

// WithMetadataSyncedAtOpen is WithSyncedAtOpen for the metadata factory.
// kube-controller-manager's garbage collector and namespace controller act
// on what they do not find, which is what it is for.
func WithMetadataSyncedAtOpen() MetadataOption {
	return func(f *MetadataFactory) { f.syncedAtOpen = true }
}

// WithMetadataCacheBound is WithCacheBound for the metadata factory.
func WithMetadataCacheBound(objects int, bytes int64) MetadataOption {
	return func(f *MetadataFactory) { f.cacheObjects, f.cacheBytes = objects, bytes }
}

// WithMetadataPersistSecrets lets the metadata factory persist the metadata
// of core/v1 secrets; without it an informer for them keeps them in memory
// only. A Secret's metadata holds no data field, but its annotations can:
// kubectl apply copies the whole object, data included, into the
// kubectl.kubernetes.io/last-applied-configuration annotation.
func WithMetadataPersistSecrets() MetadataOption {
	return func(f *MetadataFactory) { f.persistSecrets = true }
}

// WithMetadataMemoryOnly keeps the metadata factory's informers of the
// given resources in memory only.
func WithMetadataMemoryOnly(resources ...schema.GroupVersionResource) MetadataOption {
	return func(f *MetadataFactory) {
		for _, r := range resources {
			f.memoryOnly[r] = true
		}
	}
}
