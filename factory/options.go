package factory

import (
	"maps"
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// The options of the three factories are client-go's, under client-go's
// names. They are WithNamespace, WithTweakListOptions,
// WithCustomResyncConfig, WithTransform and WithInformerName. The metadata factory's WithTransform
// is WithMetadataTransform. One struct, PersistenceOptions, adds what
// client-go has no counterpart for, which is how the informers persist.

// PersistenceOptions configures how a factory's informers persist, for the
// three factories alike. Pass it with WithPersistence,
// WithDynamicPersistence or WithMetadataPersistence. Every zero value is
// the default, and a factory without the option uses the zero
// PersistenceOptions. The factory keeps a copy. Changing the struct, or its
// slices and maps, after the constructor returns changes nothing.
type PersistenceOptions struct {
	// ClusterIdentity declares the identity of the cluster the client
	// reaches. It is recorded with each collection (cache.Persistence.Cluster),
	// and a collection recorded under another cluster starts cold.
	//
	// Set it for clients that can read neither the kube-system namespace nor
	// their own ServiceAccount. One is a user that is not a ServiceAccount
	// and may not get kube-system. Another is a metadata client that may not
	// get kube-system, since it cannot review itself. Set it also to start
	// warm while the apiserver is unreachable. It must differ between
	// clusters and change when a cluster is recreated. Do not start it with
	// "serviceaccount/".
	//
	// Empty means the factory reads the identity when its first informer
	// starts. It reads the kube-system namespace's UID through its client. If
	// that is Forbidden, it reads the UID of the ServiceAccount the client
	// authenticates as (see the package doc). Its informers resume nothing
	// until it has one.
	ClusterIdentity string

	// SyncedAtOpen makes every informer that starts warm report synced on
	// the stored state, as soon as its file is open and checked
	// (see cache.InformerOptions.SyncedAtOpen). WaitForCacheSync then
	// returns at once. Use it only for controllers that tolerate a stale
	// start. A controller that acts on what it does not find in its cache
	// would otherwise act on objects deleted, or miss objects created, while
	// the process was down. kube-controller-manager's garbage collector and
	// namespace controller, on the metadata factory, act on what they do
	// not find. With ClusterIdentity, it also lets the informers sync from
	// their files while the apiserver is unreachable.
	//
	// False means a warm informer is synced once its watch has caught up
	// with the cluster as of the informer's start.
	SyncedAtOpen bool

	// PersistSecrets lets the informers of core/v1 secrets write them to the
	// file. A Secret's metadata holds no data field, but its annotations can.
	// kubectl apply copies the whole object, data included, into the
	// kubectl.kubernetes.io/last-applied-configuration annotation. So this
	// holds for the metadata factory too.
	//
	// False means informers of Secrets keep them in memory only and list
	// them at every start (see cache.Persistence).
	PersistSecrets bool

	// MemoryOnly names the resources whose informers keep their objects in
	// memory only. Their objects never reach the file and are listed at
	// every start. The typed factory names an object type's resource as its
	// generated accessors do (core/v1 pods for *corev1.Pod).
	//
	// Nil means every informer persists, except those of Secrets (see
	// PersistSecrets).
	MemoryOnly []schema.GroupVersionResource

	// TransformVersion declares the version of the transforms the informers
	// apply. That covers WithTransform (WithMetadataTransform), a transform
	// that a constructor passed to InformerFor sets with SetTransform, and
	// one the caller sets with SetTransform on an informer the factory
	// returns. The file holds transformed objects. So the version is stored
	// with each collection (cache.Persistence.TransformVersion), beside the
	// transform function's Go name. A collection stored under another
	// version starts cold instead of serving objects in the old transform's
	// shape. Change it whenever a transform's output changes, because a
	// closure's name does not change with what it closes over.
	//
	// Empty is a version like any other. A factory without the option
	// records it.
	TransformVersion string

	// CacheObjects and CacheBytes bound each informer's in-memory cache of
	// decoded objects (see cache.Persistence).
	//
	// Zero for both means every object stays decoded in memory, as in
	// client-go.
	CacheObjects int
	CacheBytes   int64

	// IndexVersions declares index function versions by index name, for
	// every informer (see cache.IndexerOptions.IndexVersions). A declared
	// index is stored, and the next start reuses it while its version is the
	// same.
	//
	// Nil means indexes whose function cannot be identified are rebuilt at
	// every start.
	IndexVersions map[string]string

	// Metrics exports the factory's metrics. It serves the persistent
	// informers as cache.InformerOptions.Metrics does. It is also their
	// InformerMetricsProvider, unless newFunc's informer had one. For the
	// typed factory, it also counts the informers that InformerFor runs in
	// memory instead of persisting (boltinformer_factory_fallbacks_total, by
	// resource and reason).
	//
	// Nil means the factory exports none.
	Metrics *bcache.Metrics

	// ListerWatcherVersion declares the version of custom ListerWatcher
	// code, for the typed factory. The dynamic and metadata factories build
	// their own ListerWatchers. It covers ListerWatchers that constructors
	// passed to InformerFor build, when that code is not client-go's own.
	// client-go's own are a generated informer's and
	// cache.NewListWatchFromClient's. Custom code may be a hand-written
	// cache.ListWatch, or one that drops items from List, wraps Watch with
	// watch.Filter or rewrites objects. Such code decides what the
	// collection holds, like a selector, but no request shows it.
	//
	// With a version, those informers persist. The version and the Go names
	// of the ListerWatcher's functions are stored with the collection
	// (cache.Persistence.ListIdentity). A collection stored under another
	// version or other names starts cold. Change the version whenever any
	// such ListerWatcher's behaviour changes. A closure's name does not
	// change with its body or with what it closes over. The empty version is
	// a version like any other.
	//
	// Nil means those informers run in memory, as client-go's, and start
	// cold every time.
	ListerWatcherVersion *string

	// MetadataClient lets the dynamic factory's informers recover by what
	// changed (see cache.InformerOptions.Recovery). They recover so after a
	// 410, or for a list their collection owes. The typed and metadata
	// factories list metadata through their own clients. The collection's
	// metadata is listed through this client, which is client-go's metadata
	// client built from the same config as the dynamic client. The changed
	// objects are fetched through the dynamic client.
	//
	// Setting it vouches that kube-apiserver serves the factory's resources
	// from etcd. These are built-in resources and custom resources, not
	// aggregated APIs. A recovery compares their resourceVersions as
	// integers. A resource whose resourceVersions are not integers is listed
	// in full.
	//
	// Nil means the dynamic factory's informers relist in full.
	MetadataClient metadata.Interface
}

// frozen returns a copy of o that shares no slice or map with it.
func (o PersistenceOptions) frozen() PersistenceOptions {
	o.MemoryOnly = slices.Clone(o.MemoryOnly)
	o.IndexVersions = maps.Clone(o.IndexVersions)
	if o.ListerWatcherVersion != nil {
		v := *o.ListerWatcherVersion
		o.ListerWatcherVersion = &v
	}
	return o
}

// persistence returns the cache.Persistence of an informer of gvr. The
// collection's names are left to the caller.
func (o PersistenceOptions) persistence(db *persist.DB, cluster bcache.ClusterIdentity, gvr schema.GroupVersionResource) bcache.Persistence {
	return bcache.Persistence{
		DB:               db,
		Cluster:          cluster,
		TransformVersion: o.TransformVersion,
		IndexVersions:    o.IndexVersions,
		CacheObjects:     o.CacheObjects,
		CacheBytes:       o.CacheBytes,
		// The core recognises a typed Secret by its example object, not an
		// unstructured or metadata-only one. So the resource decides for
		// all.
		MemoryOnly:     slices.Contains(o.MemoryOnly, gvr) || (gvr == secretsResource && !o.PersistSecrets),
		PersistSecrets: o.PersistSecrets,
	}
}

// secretsResource is the one resource the factories keep in memory unless
// told otherwise (PersistenceOptions.PersistSecrets).
var secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

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
// transform's version (PersistenceOptions.TransformVersion) and change it
// whenever the transform's output changes.
func WithTransform(transform cache.TransformFunc) Option {
	return func(f *Factory) { f.transform = transform }
}

// WithInformerName names the factory's informers for client-go's metrics.
func WithInformerName(name *cache.InformerName) Option {
	return func(f *Factory) { f.informerName = name }
}

// WithPersistence sets how the factory's informers persist. A later
// WithPersistence replaces an earlier one.
func WithPersistence(o PersistenceOptions) Option {
	o = o.frozen()
	return func(f *Factory) { f.persistence = o }
}

// DynamicOption configures a DynamicFactory. client-go's dynamicinformer
// takes its namespace and tweak function as constructor arguments, and so
// does this package.
type DynamicOption func(*DynamicFactory)

// WithDynamicPersistence is WithPersistence for the dynamic factory.
func WithDynamicPersistence(o PersistenceOptions) DynamicOption {
	o = o.frozen()
	return func(f *DynamicFactory) { f.persistence = o }
}

// MetadataOption configures a MetadataFactory, as client-go's
// metadatainformer.SharedInformerOption does.
type MetadataOption func(*MetadataFactory)

// WithMetadataTransform is client-go's metadatainformer.WithTransform. It
// sets a transform applied to every object before it is stored. The file holds
// transformed objects, so declare the transform's version
// (PersistenceOptions.TransformVersion) and change it whenever its output
// changes.
func WithMetadataTransform(transform cache.TransformFunc) MetadataOption {
	return func(f *MetadataFactory) { f.transform = transform }
}

// WithMetadataPersistence is WithPersistence for the metadata factory.
func WithMetadataPersistence(o PersistenceOptions) MetadataOption {
	o = o.frozen()
	return func(f *MetadataFactory) { f.persistence = o }
}
