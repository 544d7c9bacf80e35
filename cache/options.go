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
	// DB is the open cache file. Required; the informer does not close it.
	DB *persist.DB
	// Collection names the informer's bucket tree in DB. Required. Give each
	// informer its own, and change it whenever what the informer lists
	// changes (namespace, label or field selector): a collection is only
	// ever resumed as the same list.
	Collection string
	// Description is shown by tools such as inspect.
	Description map[string]string
	// IndexVersions declares index function versions; see IndexerOptions.
	IndexVersions map[string]string

	// ListIdentity says what the informer lists: everything that decides
	// which objects the list returns and in which shape (resource, namespace,
	// label and field selectors, other list options). It is stored with the
	// collection; a collection stored under another ListIdentity is never
	// resumed: it starts cold. The factories derive it; empty is recorded as
	// empty and matches only empty.
	ListIdentity string
	// Cluster identifies the cluster the informer lists from (the factories
	// use the kube-system namespace's UID, or the client's ServiceAccount's
	// UID when that read is Forbidden). It is called when the informer
	// starts, before anything stored is handed out or resumed; a collection
	// recorded under another cluster starts cold. While it returns an error
	// (the apiserver is unreachable) the informer retries with backoff,
	// reports each error to the watch error handler and is not synced. Nil
	// records no cluster (as ""): the caller vouches that the file belongs to
	// the cluster the ListerWatcher reaches, and a collection recorded with a
	// cluster is not resumed without one. See StaticCluster.
	Cluster ClusterIdentity
	// TransformVersion declares the version of the informer's transform
	// (SetTransform): objects are stored transformed, so a collection stored
	// under another transform version (or another derived transform
	// identity) starts cold. Change it whenever the transform's behaviour
	// changes.
	TransformVersion string
	// CacheObjects and CacheBytes bound the decoded-object cache; zero for
	// both keeps every object in memory. See IndexerOptions.
	CacheObjects int
	CacheBytes   int64

	// MemoryOnly keeps the informer's objects in memory, in client-go's
	// indexer, and never writes them to the file: it starts cold every time.
	// For data that must not rest on the node's disk.
	MemoryOnly bool
	// PersistSecrets allows an informer of Secrets to persist. Without it an
	// informer whose example object is a *corev1.Secret is memory-only:
	// a cache file would otherwise hold every Secret's data unencrypted on
	// the node (the apiserver may encrypt them at rest; this file cannot).
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
// reflector's knobs; every zero value is client-go's default.
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

	// PageSize is the list page size; zero chooses as client-go does.
	PageSize int64
	// MinWatchTimeout is the shortest watch request timeout; zero is 5m.
	MinWatchTimeout time.Duration
	// Clock is for tests; nil is the real clock.
	Clock clock.WithTicker
	// Observer receives reflector events (for tests); optional.
	Observer reflector.Observer
	// Metrics, if set, exports this informer's metrics; see Metrics. It also
	// serves as InformerMetricsProvider when that is unset.
	Metrics *Metrics
	// Backoff overrides the reflector's retry backoff (tests); zero values
	// are client-go's.
	InitialBackoff, MaxBackoff time.Duration

	// SyncedAtOpen makes a warm start report synced as soon as the file is
	// open and its provenance checked: listers serve the stored state — the
	// state the file held when the process stopped — at once, before the
	// watch has delivered what changed meanwhile.
	//
	// By default (false) a warm start is synced, like a client-go informer,
	// once its store reflects a read made at or after start: when the watch
	// resumed from the stored resourceVersion has applied the
	// resourceVersion of a consistent read the informer takes as it starts
	// (one list request with limit=1 at resourceVersion "", returning at
	// most one object; no full list). Until then its first watches are short
	// (see reflector.CatchUp), so that the apiserver's pre-timeout bookmark
	// catches a quiet resource up within about a second of the watch
	// opening; a server that sends no bookmarks gets one relist instead.
	// That read needs the apiserver: while it is unreachable the informer
	// serves the stored state but is not synced.
	//
	// Set it only for controllers that tolerate a stale start: a controller
	// that creates what it does not find in its cache, or deletes or
	// reports what it does not find (garbage collection, cleanup of
	// orphans), acts wrongly on the stored state, which may miss objects
	// created, and still hold objects deleted, while the process was down.
	// With a declared cluster identity (StaticCluster) or a nil
	// Persistence.Cluster it is also what lets an informer start from its
	// file while the apiserver is unreachable.
	//
	// A cold start (no stored resourceVersion) is synced when its list has
	// been applied, as in client-go, either way.
	SyncedAtOpen bool

	// Recovery makes the informer recover after a 410, or
	// for a list the collection owes, by what changed instead of relisting
	// everything: a metadata-only list, a diff against the stored objects'
	// UIDs and resourceVersions, and fetches of what changed with the watch
	// already open (see recovery.Options and the package documentation).
	// The factories set it for the resources they can list metadata of.
	// Nil: such lists are full lists, reconciled with the stored state.
	// A Recovery without a complete Lister fails the informer's constructor.
	Recovery *recovery.Options

	// WarmListBelow: a warm start of a collection holding fewer objects
	// than this, with Recovery set, also takes a consistent metadata list,
	// and is caught up (synced) as soon as the store holds exactly the
	// listed UIDs and resourceVersions — at once if nothing changed while
	// the process was down, else once the resumed watch has replayed what
	// did — instead of waiting for the apiserver's bookmark to carry the
	// watch past a consistent read (about a second, whatever the size).
	// Handlers get the same events either way: the watch still resumes from
	// the stored resourceVersion (see versionproof.go). Zero means
	// DefaultWarmListBelow; negative: no metadata list (the fewest bytes
	// from the apiserver, synced about a second later). Ignored with
	// SyncedAtOpen and without Recovery.
	WarmListBelow int
}

// DefaultWarmListBelow is InformerOptions.WarmListBelow's default: below
// it, a consistent metadata list of realistic Pods (about 100 µs an object
// on a 2-core machine, the recovery's measured cost) takes less than the
// second a resumed watch waits for the apiserver's bookmark.
const DefaultWarmListBelow = 5000
