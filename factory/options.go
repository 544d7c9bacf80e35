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
// stored. The file holds transformed objects: a changed transform applies to
// objects as they next change, not to what is stored.
func WithTransform(transform cache.TransformFunc) Option {
	return func(f *Factory) { f.transform = transform }
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

// WithDynamicMemoryOnly keeps the informers of the given resources in
// memory only.
func WithDynamicMemoryOnly(resources ...schema.GroupVersionResource) DynamicOption {
	return func(f *DynamicFactory) {
		for _, r := range resources {
			f.memoryOnly[r] = true
		}
	}
}
