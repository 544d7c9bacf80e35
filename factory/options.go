package factory

import (
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/tools/cache"
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
// factory reads the kube-system namespace's UID through its client when an
// informer starts, and resumes nothing until it has; use this option for
// clients that may not get that namespace. The identity must differ between
// clusters and change when a cluster is recreated.
func WithClusterIdentity(id string) Option {
	return func(f *Factory) { f.clusterIdentity = id }
}

// WithWaitCaughtUp makes every informer of the factory report synced (and
// WaitForCacheSync return) only once its watch has caught up with the
// cluster as of the informer's start, not as soon as the stored state is
// loaded (see cache.InformerOptions.WaitCaughtUp). Each start then costs the
// apiserver one limit=1 list per informer, still no full list. Use it for
// controllers that act on absence — garbage collection, cleanup of orphans,
// anything that deletes or reports what it does not find in its cache —
// which would otherwise act on objects deleted, or miss objects created,
// while the process was down. Such informers are not synced while the
// apiserver is unreachable.
func WithWaitCaughtUp() Option {
	return func(f *Factory) { f.waitCaughtUp = true }
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
// factory, whose default identity is the kube-system namespace's UID read
// through the namespaces resource.
func WithDynamicClusterIdentity(id string) DynamicOption {
	return func(f *DynamicFactory) { f.clusterIdentity = id }
}

// WithDynamicWaitCaughtUp is WithWaitCaughtUp for the dynamic factory.
func WithDynamicWaitCaughtUp() DynamicOption {
	return func(f *DynamicFactory) { f.waitCaughtUp = true }
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
