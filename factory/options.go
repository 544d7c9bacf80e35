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
// names (WithNamespace, WithTweakListOptions, WithCustomResyncConfig,
// WithTransform, WithInformerName; the metadata factory's WithTransform is
// WithMetadataTransform), plus one struct, PersistenceOptions, for what
// client-go has no counterpart for: how the informers persist.

// PersistenceOptions configures how a factory's informers persist, for the
// three factories alike: pass it with WithPersistence,
// WithDynamicPersistence or WithMetadataPersistence. Every zero value is
// the default, and the zero PersistenceOptions is what a factory without
// the option uses. The factory keeps a copy: changing the struct, or its
// slices and maps, after the constructor returns changes nothing.
type PersistenceOptions struct {
	// ClusterIdentity declares the identity of the cluster the client
	// reaches, recorded with each collection (cache.Persistence.Cluster): a
	// collection recorded under another cluster starts cold. Set it for
	// clients that can read neither the kube-system namespace nor their own
	// ServiceAccount (a user that is not a ServiceAccount and may not get
	// kube-system; a metadata client that may not get kube-system, since it
	// cannot review itself), or to start warm while the apiserver is
	// unreachable. It must differ between clusters and change when a cluster
	// is recreated; do not start it with "serviceaccount/".
	//
	// Empty: the factory reads, when its first informer starts, the
	// kube-system namespace's UID through its client or, if that is
	// Forbidden, the UID of the ServiceAccount the client authenticates as
	// (see the package doc), and its informers resume nothing until it has
	// one.
	ClusterIdentity string

	// SyncedAtOpen makes every informer that starts warm report synced (and
	// WaitForCacheSync return) as soon as its file is open and checked, on
	// the stored state (see cache.InformerOptions.SyncedAtOpen). Only for
	// controllers that tolerate a stale start: one that creates what it does
	// not find, or deletes or reports what it does not find in its cache,
	// would act on objects deleted, or miss objects created, while the
	// process was down. kube-controller-manager's garbage collector and
	// namespace controller, on the metadata factory, act on what they do
	// not find. With ClusterIdentity it also lets the informers sync from
	// their files while the apiserver is unreachable.
	//
	// False: a warm informer is synced once its watch has caught up with the
	// cluster as of the informer's start.
	SyncedAtOpen bool

	// PersistSecrets lets the informers of core/v1 secrets write them to the
	// file. A Secret's metadata holds no data field, but its annotations
	// can (kubectl apply copies the whole object, data included, into the
	// kubectl.kubernetes.io/last-applied-configuration annotation), so this
	// holds for the metadata factory too.
	//
	// False: informers of Secrets keep them in memory only and list them at
	// every start (see cache.Persistence).
	PersistSecrets bool

	// MemoryOnly names the resources whose informers keep their objects in
	// memory only: they never reach the file, and are listed at every start.
	// The typed factory names an object type's resource as its generated
	// accessors do (core/v1 pods for *corev1.Pod).
	//
	// Nil: every informer persists, except those of Secrets (see
	// PersistSecrets).
	MemoryOnly []schema.GroupVersionResource

	// TransformVersion declares the version of the transforms the informers
	// apply: WithTransform's (WithMetadataTransform's), one a constructor
	// passed to InformerFor sets with SetTransform, or one the caller sets
	// with SetTransform on an informer the factory returns. The file holds
	// transformed objects, so it is stored with each collection
	// (cache.Persistence.TransformVersion), beside the transform function's
	// Go name, and a collection stored under another version starts cold
	// instead of serving objects in the old transform's shape. Change it
	// whenever a transform's output changes: a closure's name does not
	// change with what it closes over.
	//
	// Empty: a version like any other, the one a factory without the option
	// records.
	TransformVersion string

	// CacheObjects and CacheBytes bound each informer's in-memory cache of
	// decoded objects (see cache.Persistence).
	//
	// Zero for both: every object stays decoded in memory, as in client-go.
	CacheObjects int
	CacheBytes   int64

	// IndexVersions declares index function versions by index name, for
	// every informer (see cache.IndexerOptions.IndexVersions): a declared
	// index is stored and reused by the next start while its version is the
	// same.
	//
	// Nil: indexes whose function cannot be identified are rebuilt at every
	// start.
	IndexVersions map[string]string

	// Metrics exports the factory's metrics: its persistent informers' (as
	// cache.InformerOptions.Metrics, which also makes it their
	// InformerMetricsProvider unless newFunc's informer had one), and, for
	// the typed factory, the informers InformerFor runs in memory instead of
	// persisting (boltinformer_factory_fallbacks_total, by resource and
	// reason).
	//
	// Nil: the factory exports none.
	Metrics *bcache.Metrics

	// ListerWatcherVersion declares, for the typed factory (the dynamic and
	// metadata factories build their own ListerWatchers), the version of the
	// Go code in the ListerWatchers that constructors passed to InformerFor
	// build, when that code is not client-go's own (a generated informer's,
	// or cache.NewListWatchFromClient's): a hand-written cache.ListWatch,
	// one that drops items from List, wraps Watch with watch.Filter or
	// rewrites objects. Such code decides what the collection holds, like a
	// selector, but no request shows it. With a version those informers
	// persist: the version and the Go names of the ListerWatcher's functions
	// are stored with the collection (cache.Persistence.ListIdentity), and a
	// collection stored under another version or other names starts cold.
	// Change it whenever any such ListerWatcher's behaviour changes; a
	// closure's name does not change with its body or with what it closes
	// over. The empty version is a version like any other.
	//
	// Nil: those informers run in memory, as client-go's, and start cold at
	// every start.
	ListerWatcherVersion *string

	// MetadataClient makes, for the dynamic factory (the typed and metadata
	// factories list metadata through their own clients), its informers
	// recover after a 410, or for a list their collection owes, by what
	// changed (see cache.InformerOptions.Recovery): their collection's
	// metadata is listed through it (client-go's metadata client, built
	// from the same config as the dynamic client), its changed objects
	// fetched through the dynamic client. Setting it vouches that the
	// factory's resources are served from etcd by kube-apiserver — built-in
	// resources and custom resources, not aggregated APIs — whose
	// resourceVersions a recovery compares as integers (one whose
	// resourceVersions are not integers is listed in full).
	//
	// Nil: the dynamic factory's informers relist in full.
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

// persistence returns the cache.Persistence of an informer of gvr: the
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
		// unstructured or metadata-only one: the resource decides for all.
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

// WithPersistence sets how the factory's informers persist; a later
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

// WithMetadataTransform is client-go's metadatainformer.WithTransform: a
// transform applied to every object before it is stored. The file holds
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
