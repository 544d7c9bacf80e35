package controllerruntime

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

// Options configures NewCache and New. Every zero value is usable except
// that Path or DB is required.
type Options struct {
	// Path is the cache file, created (with its directory) if missing. It is
	// opened when the cache starts, or before by the cache's first informer
	// (IndexField, GetInformer, Get or List), and closed when the cache
	// stops; building the cache opens nothing.
	Path string
	// File configures opening Path (lock timeout, batching, MmapSize...).
	// Its Scheme is ignored: the file's codec uses the cache's scheme plus
	// metav1's PartialObjectMetadata, so that every object the cache can
	// hold can be stored.
	File persist.Options
	// DB is an already open cache file to use instead of Path; the cache
	// does not close it. Its codec's scheme must know every type the cache
	// holds, metav1.PartialObjectMetadata included (see CodecScheme).
	DB *persist.DB

	// Cluster identifies the cluster; a collection stored for another
	// cluster is not resumed. Nil reads, through the cache's credentials
	// when its first informer starts, the kube-system namespace's UID, or,
	// if reading it is Forbidden (namespaced RBAC), the UID of the
	// ServiceAccount the cache authenticates as (from a SelfSubjectReview,
	// which every authenticated user may create), and logs which. The kind
	// is recorded with the identity: a file written under one never
	// resumes under the other. A client that may read neither (a user that
	// is not a ServiceAccount) must set Cluster; until an identity is known
	// (the apiserver unreachable, say) informers retry and resume nothing.
	// bcache.StaticCluster sets it without asking: any string that differs
	// between clusters and changes when one is recreated.
	Cluster bcache.ClusterIdentity

	// TransformVersion declares the version of the transforms given in
	// cache.Options (DefaultTransform, ByObject and namespace transforms)
	// for every object without its own Object.TransformVersion. Objects are
	// stored transformed: change it whenever a transform's behaviour
	// changes, or the next start resumes objects shaped by the old one.
	// Empty is a version like any other; a declared one is also part of the
	// collection's name.
	TransformVersion string

	// ByObject configures persistence per object type. The key's form
	// matters: a typed object (&corev1.Pod{}), an *unstructured.Unstructured
	// or a *metav1.PartialObjectMetadata with its GroupVersionKind set each
	// name their own informer, as in controller-runtime. Nil: every type
	// persists as the fields above say.
	ByObject map[client.Object]Object

	// PersistSecrets lets Secrets be written to the file. Without it every
	// informer of Secrets (typed, unstructured or metadata-only) keeps them
	// in memory and lists them at every start.
	PersistSecrets bool

	// SyncedAtOpen makes an informer that starts warm report synced (and
	// WaitForCacheSync return) on its stored state, as soon as the file is
	// open, instead of once its watch has caught up with a consistent read
	// taken at start (the default, which is what controller-runtime's own
	// cache means by synced; see bcache.InformerOptions.SyncedAtOpen). Only
	// for controllers that tolerate a stale start: a reconciler that creates
	// what it does not find, or deletes what it does not find, would act on
	// objects created or deleted while the process was down.
	SyncedAtOpen bool

	// RecoverGroups names API groups, besides the built-in ones (those of
	// client-go's scheme), whose resources kube-apiserver serves from etcd:
	// the groups of custom resources (CRDs). After a 410 — a restart after a
	// downtime longer than the apiserver's watch history (about 75 s), or
	// after any apiserver restart — the typed and unstructured informers of
	// these groups, as those of built-in resources, recover by what changed
	// (a metadata list, then fetches of the changed objects) instead of
	// listing everything again; see the package documentation. A recovery
	// compares resourceVersions as etcd revisions: never name the group of
	// an aggregated API (served by another server behind kube-apiserver,
	// such as metrics.k8s.io), which boltcr cannot tell apart from custom
	// resources. Nil: informers of custom resources list in full after a
	// 410.
	RecoverGroups []string

	// CacheObjects and CacheBytes bound each informer's in-memory cache of
	// decoded objects; zero for both keeps every object in memory, as
	// controller-runtime does (see bcache.Persistence).
	CacheObjects int
	CacheBytes   int64

	// Metrics, if set, exports each persistent informer's metrics, the
	// adapter's fallbacks (boltinformer_controllerruntime_fallbacks_total)
	// and, for a file opened from Path, the file's (see bcache.Metrics); register
	// it on the manager's registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry)
	// to serve them with controller-runtime's.
	Metrics *bcache.Metrics
}

// Object configures persistence for one object type.
type Object struct {
	// TransformVersion declares the version of this type's transform; empty
	// falls back to Options.TransformVersion.
	TransformVersion string
	// FieldIndexVersions declares, per field passed to IndexField for this
	// type, the version of its extractor. A declared field index is stored
	// and reused by the next start as long as the version is the same; bump
	// it whenever the extractor changes. Undeclared field indexes are
	// rebuilt from the stored objects at every start.
	FieldIndexVersions map[string]string
	// MemoryOnly keeps this type in memory: it is listed at every start and
	// never written to the file.
	MemoryOnly bool
}
