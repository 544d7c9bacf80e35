package cache

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/recovery"
	"github.com/boltinformer/boltinformer/reflector"
)

// Persistence says where an informer keeps its state.
type Persistence struct {
	// DB is the open cache file. It is required, and the informer does not
	// close it.
	DB *persist.DB
	// Collection names the informer's bucket tree in DB. It is required.
	// Give each informer its own. Change it whenever what the informer lists
	// changes, such as its namespace, label or field selector. A collection
	// is only ever resumed as the same list.
	Collection string
	// Description is shown by tools such as inspect.
	Description map[string]string
	// IndexVersions declares index function versions (see IndexerOptions).
	IndexVersions map[string]string

	// ListIdentity says what the informer lists. It covers everything that
	// decides which objects the list returns and in which shape. That is the
	// resource, namespace, label and field selectors, and other list options.
	// It is stored with the collection. A collection stored under another
	// ListIdentity is never resumed, and starts cold. The factories derive
	// it. Empty is recorded as empty and matches only empty.
	ListIdentity string
	// Cluster identifies the cluster the informer lists from. The factories
	// use the kube-system namespace's UID. They use the client's
	// ServiceAccount's UID when that read is Forbidden. Cluster is called
	// when the informer starts, before anything stored is handed out or
	// resumed. A collection recorded under another cluster starts cold.
	// Cluster returns an error while the apiserver is unreachable, for
	// example. While it does, the informer retries with backoff, reports
	// each error to the watch error handler and is not synced. Nil records
	// no cluster, as "". The caller then vouches that the file belongs to
	// the cluster the ListerWatcher reaches. A collection recorded with a
	// cluster is not resumed without one. See StaticCluster.
	Cluster ClusterIdentity
	// TransformVersion declares the version of the informer's transform
	// (SetTransform). Objects are stored transformed. So a collection stored
	// under another transform version starts cold. Another derived transform
	// identity has the same effect. Change it whenever the transform's
	// behaviour changes.
	TransformVersion string
	// CacheObjects and CacheBytes bound the decoded-object cache. Zero for
	// both keeps every object in memory. See IndexerOptions.
	CacheObjects int
	CacheBytes   int64

	// MemoryOnly keeps the informer's objects in memory, in client-go's
	// indexer, and never writes them to the file. The informer then starts
	// cold every time. It is for data that must not rest on the node's disk.
	MemoryOnly bool
	// PersistSecrets allows an informer of Secrets to persist. Without it,
	// an informer whose example object is a *corev1.Secret is memory-only.
	// A cache file would otherwise hold every Secret's data unencrypted on
	// the node. The apiserver may encrypt them at rest, but this file
	// cannot.
	PersistSecrets bool
}

// isSensitive reports whether objects like obj are kept out of the file
// unless the caller opts in.
func isSensitive(obj runtime.Object) bool {
	_, ok := obj.(*corev1.Secret)
	return ok
}

// InformerOptions configures NewSharedIndexInformerWithOptions. It has the
// fields of client-go's SharedIndexInformerOptions plus persistence and the
// reflector's knobs. Every zero value is client-go's default.
type InformerOptions struct {
	Persistence Persistence

	// ResyncPeriod is the default handler resync period and the resync
	// check period, as in client-go.
	ResyncPeriod time.Duration
	// Indexers are the informer's indexers.
	Indexers cache.Indexers
	// ObjectDescription describes the objects in logs.
	ObjectDescription string
	// Identifier and InformerMetricsProvider are passed to client-go's
	// RealFIFO for its metrics.
	Identifier              cache.InformerNameAndResource
	InformerMetricsProvider cache.InformerMetricsProvider

	// PageSize is the list page size. Zero chooses as client-go does.
	PageSize int64
	// MinWatchTimeout is the shortest watch request timeout. Zero is 5m.
	MinWatchTimeout time.Duration
	// Clock is for tests; nil is the real clock.
	Clock clock.WithTicker
	// Observer receives reflector events, for tests. It is optional.
	Observer reflector.Observer
	// Metrics, if set, exports this informer's metrics (see Metrics). It
	// also serves as InformerMetricsProvider when that is unset.
	Metrics *Metrics
	// Backoff overrides the reflector's retry backoff, for tests. Zero
	// values are client-go's.
	InitialBackoff, MaxBackoff time.Duration

	// SyncedAtOpen makes a warm start report synced as soon as the file is
	// open and its provenance checked. Listers then serve the stored state
	// at once. That is the state the file held when the process stopped.
	// They serve it before the watch has delivered what changed meanwhile.
	//
	// By default (false), a warm start is synced like a client-go informer.
	// That is once its store reflects a read made at or after start. The
	// informer takes a consistent read as it starts. The read is one list
	// request with limit=1 at resourceVersion "", and returns at most one
	// object. It is no full list. The start is synced when the watch resumed
	// from the stored resourceVersion has applied the read's
	// resourceVersion. Until then its first watches are short (see
	// reflector.CatchUp). The apiserver's pre-timeout bookmark thus catches
	// a quiet resource up within about a second of the watch opening. A
	// server that sends no bookmarks gets one relist instead. That read
	// needs the apiserver. While it is unreachable, the informer serves the
	// stored state but is not synced.
	//
	// Set it only for controllers that tolerate a stale start. The stored
	// state may miss objects created while the process was down. It may
	// still hold objects deleted meanwhile. Some controllers create what
	// they do not find in their cache. Others delete or report what they do
	// not find, as garbage collection and cleanup of orphans do. Such
	// controllers act wrongly on the stored state. SyncedAtOpen also lets an
	// informer start from its file while the apiserver is unreachable. That
	// needs a declared cluster identity (StaticCluster) or a nil
	// Persistence.Cluster.
	//
	// A cold start (no stored resourceVersion) is synced when its list has
	// been applied, as in client-go, either way.
	SyncedAtOpen bool

	// Recovery, with a Lister, makes the informer recover by what changed
	// instead of relisting everything. It does so after a 410, or for a
	// list the collection owes. A recovery takes a metadata-only list and
	// diffs it against the stored objects' UIDs and resourceVersions. It
	// then fetches what changed with the watch already open. See
	// recovery.Options and the package documentation. The factories set it
	// for the resources they can list metadata of. With nil, such lists are
	// full lists, reconciled with the stored state. A nil Lister is no
	// recovery either (factory.NewMetadataLister's nil for a fake clientset).
	// A Lister without ListMetadata or ListObjects fails the constructor.
	Recovery *recovery.Options

	// WarmListBelow is the collection size below which a warm start also
	// takes a consistent metadata list, with Recovery set. Such a start is
	// caught up (synced) as soon as the store holds exactly the listed UIDs
	// and resourceVersions. That is at once if nothing changed while the
	// process was down. Otherwise it is once the resumed watch has replayed
	// what did. The start does not wait for the apiserver's bookmark to
	// carry the watch past a consistent read. That takes about a second,
	// whatever the size. Handlers get the same events either way, since the
	// watch still resumes from the stored resourceVersion (see
	// versionproof.go). Zero means DefaultWarmListBelow. Negative means no
	// metadata list, with the fewest bytes from the apiserver, synced about
	// a second later. It is ignored with SyncedAtOpen and without Recovery.
	WarmListBelow int
}

// DefaultWarmListBelow is InformerOptions.WarmListBelow's default. Below
// it, a consistent metadata list of realistic Pods takes less than the
// second a resumed watch waits for the apiserver's bookmark.
const DefaultWarmListBelow = 5000
