package controllerruntime

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// Options configures NewCache and New. Every zero value is usable, except
// that Path or DB is required.
type Options struct {
	// Path is the cache file, created with its directory if missing. It is
	// opened when the cache starts, or earlier by the cache's first informer
	// (IndexField, GetInformer, Get or List). It is closed when the cache
	// stops, and building the cache opens nothing.
	Path string
	// File configures opening Path, such as its lock timeout, batching and
	// MmapSize. Its Scheme is ignored, because the file's codec uses the
	// cache's scheme plus metav1's PartialObjectMetadata. So every object
	// the cache can hold can be stored.
	File persist.Options
	// DB is an already open cache file to use instead of Path, which the
	// cache does not close. Its codec's scheme must know every type the cache
	// holds, metav1.PartialObjectMetadata included (see CodecScheme).
	DB *persist.DB

	// Cluster identifies the cluster, and a collection stored for another
	// cluster is not resumed. Nil reads the kube-system namespace's UID
	// through the cache's credentials when its first informer starts. If
	// namespaced RBAC forbids that read, it reads the UID of the
	// ServiceAccount the cache authenticates as. It learns that from a
	// SelfSubjectReview, which every authenticated user may create. Nil also
	// logs which identity it used. The kind is recorded with the identity,
	// so a file written under one never resumes under the other. A client
	// that may read neither, such as a user that is not a ServiceAccount,
	// must set Cluster. Until an identity is known, as while the apiserver
	// is unreachable, informers retry and resume nothing.
	// bcache.StaticCluster sets it without asking, to any string that
	// differs between clusters and changes when one is recreated.
	Cluster bcache.ClusterIdentity

	// TransformVersion declares the version of the transforms given in
	// cache.Options (DefaultTransform, ByObject and namespace transforms).
	// It covers every object without its own Object.TransformVersion.
	// Objects are stored transformed, so change it whenever a transform's
	// behaviour changes. Otherwise the next start resumes objects shaped by
	// the old one. Empty is a version like any other, and a declared one is
	// also part of the collection's name.
	TransformVersion string

	// ByObject configures persistence per object type. The key's form
	// matters, as in controller-runtime. A typed object (&corev1.Pod{})
	// names its own informer, and so do an *unstructured.Unstructured and a
	// *metav1.PartialObjectMetadata with its GroupVersionKind set. Nil
	// persists every type as the fields above say.
	ByObject map[client.Object]Object

	// PersistSecrets lets Secrets be written to the file. Without it, every
	// informer of Secrets, typed, unstructured or metadata-only, keeps them
	// in memory and lists them at every start.
	PersistSecrets bool

	// SyncedAtOpen makes an informer that starts warm report synced on its
	// stored state as soon as the file is open, and WaitForCacheSync
	// return. By default an informer is synced once its watch has caught up
	// with a consistent read taken at start. That is what controller-runtime's
	// own cache means by synced (see bcache.InformerOptions.SyncedAtOpen).
	// Use it only for controllers that tolerate a stale start. A reconciler
	// that creates or deletes what it does not find would act on objects
	// created or deleted while the process was down.
	SyncedAtOpen bool

	// RecoverGroups names API groups whose resources kube-apiserver serves
	// from etcd, besides the built-in ones of client-go's scheme. Those are
	// the groups of custom resources (CRDs). A 410 follows a downtime longer
	// than the apiserver's watch history (about 75 s), or any apiserver
	// restart. The typed and unstructured informers of these groups then
	// recover by what changed, as those of built-in resources do. They make
	// a metadata list, then fetch the changed objects, instead of listing
	// everything again (see the package documentation). A recovery compares
	// resourceVersions as etcd revisions, so never name the group of an
	// aggregated API. Another server behind kube-apiserver serves those,
	// such as metrics.k8s.io, and boltcr cannot tell them apart from custom
	// resources. Nil makes informers of custom resources list in full after
	// a 410.
	RecoverGroups []string

	// CacheObjects and CacheBytes bound each informer's in-memory cache of
	// decoded objects. Zero for both keeps every object in memory, as
	// controller-runtime does (see bcache.Persistence).
	CacheObjects int
	CacheBytes   int64

	// Metrics, if set, exports each persistent informer's metrics and the
	// adapter's fallbacks (boltinformer_controllerruntime_fallbacks_total).
	// For a file opened from Path, it exports the file's too (see
	// bcache.Metrics). Register it on the manager's registry,
	// sigs.k8s.io/controller-runtime/pkg/metrics.Registry, to serve them
	// with controller-runtime's.
	Metrics *bcache.Metrics
}

// Object configures persistence for one object type.
type Object struct {
	// TransformVersion declares the version of this type's transform. Empty
	// falls back to Options.TransformVersion.
	TransformVersion string
	// FieldIndexVersions declares the version of the extractor of each field
	// passed to IndexField for this type. A declared field index is stored,
	// and reused by the next start as long as the version is the same. Bump
	// the version whenever the extractor changes. Undeclared field indexes
	// are rebuilt from the stored objects at every start.
	FieldIndexVersions map[string]string
	// MemoryOnly keeps this type in memory, listed at every start and never
	// written to the file.
	MemoryOnly bool
}
