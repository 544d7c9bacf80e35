// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/shared_informer.go
//   - tools/cache/controller.go
// The ports are listed in hack/upstream-versions.txt.

package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgofeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/boltinformer/boltinformer/internal/codeid"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/processor"
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

	// Recovery, with a Lister, makes the informer recover after a 410, or
	// for a list the collection owes, by what changed instead of relisting
	// everything: a metadata-only list, a diff against the stored objects'
	// UIDs and resourceVersions, and fetches of what changed with the watch
	// already open (see reflector.Recovery and the package documentation).
	// The factories set it for the resources they can list metadata of.
	// Nil: such lists are full lists, reconciled with the stored state.
	Recovery *reflector.Recovery

	// WarmListBelow: a warm start of a collection holding fewer objects
	// than this, with Recovery set, also takes a consistent metadata list,
	// and is caught up (synced) as soon as the store holds exactly the
	// listed UIDs and resourceVersions — at once if nothing changed while
	// the process was down, else once the resumed watch has replayed what
	// did — instead of waiting for the apiserver's bookmark to carry the
	// watch past a consistent read (about a second, whatever the size).
	// Handlers get the same events either way: the watch still resumes from
	// the stored resourceVersion (see versionmatch.go). Zero means
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

// Informer is a cache.SharedIndexInformer whose store lives in a cache file.
// When it starts with a stored resourceVersion it does not list: its
// listers serve the file as soon as it is open, the watch resumes from the
// stored resourceVersion, the informer reports synced once that watch has
// caught up with a consistent read taken at start (or at once with
// SyncedAtOpen), and every handler gets OnAdd(obj, true) for each stored
// object in the background (its registration syncing after them). If the
// server has compacted that version away (410 Gone), the informer recovers
// by what changed (InformerOptions.Recovery), or relists once, and
// reconciles the result with the stored state as client-go reconciles a
// relist: objects deleted meanwhile reach handlers as
// DeletedFinalStateUnknown, objects whose resourceVersion is unchanged are
// not rewritten and reach only handlers with a resync period, however late
// they were added (client-go, in a relist before its first resync check,
// would send them to every handler; see the package documentation).
//
// Nothing stored is handed out or resumed unless the collection's recorded
// provenance matches (cluster, ListIdentity, transform, queue mode); stored
// index entries are verified against the index functions during the warm
// start; stored state that cannot be read back is set aside and relisted
// (reconciled with what handlers already got); an object the file cannot
// encode moves the informer to client-go's in-memory indexer. Each is
// logged, reported to the watch error handler where it is an error, and
// counted in boltinformer_collection_resets_total.
//
// Everything else — queue, ordering, resync, handler registration, panics —
// is client-go v0.37.2's.
type Informer struct {
	// store is what deltas are applied to and listers read: persistent
	// unless the informer is memory-only, in which case persistent is nil.
	store      storeIndexer
	persistent *Indexer
	// public is what GetStore and GetIndexer return: store, behind
	// provenStore for a persistent informer, so nothing stored is read
	// before gate says the collection's provenance was checked.
	public        storeIndexer
	gate          readGate
	name          string // the collection name, for logs and metrics
	processor     *processor.Processor
	listerWatcher cache.ListerWatcher
	objectType    runtime.Object
	opts          InformerOptions

	// loaded is closed once the initial state (listed, or opened from disk)
	// is in the store; synced once caught is done too.
	loaded, synced chan struct{}
	// caught is done once a warm start has caught up with the server (see
	// InformerOptions.SyncedAtOpen); at once for a cold start or with
	// SyncedAtOpen.
	caught *caughtUp
	// matchVersions: this start also proves itself caught up by versions
	// (versionmatch.go). Set by begin.
	matchVersions bool

	cacheMutationDetector cache.MutationDetector

	// resyncCheckPeriod and defaultEventHandlerResyncPeriod as in client-go.
	resyncCheckPeriod               time.Duration
	defaultEventHandlerResyncPeriod time.Duration
	clock                           clock.WithTicker

	// report hands errors to the watch error handler; set by RunWithContext
	// before anything reads it.
	report func(context.Context, error)

	// recovering is set while a recovery is under way (recover.go): from
	// the diff it applied until its end, or until a list is applied.
	recovering atomic.Bool

	// startedLock guards the fields below it. It is never held while
	// stored objects are delivered or the cluster is asked who it is.
	startedLock       sync.Mutex
	running           bool // RunWithContext was called
	started, stopped  bool
	reflector         *reflector.Reflector
	watchErrorHandler cache.WatchErrorHandlerWithContext
	transform         cache.TransformFunc
	// warm is set at start when a stored resourceVersion exists.
	warm bool
	// delivery hands a warm start's stored state to the handlers; set by
	// begin, before the reflector and processLoop start, and never changed.
	delivery *warmDelivery
	// paged takes a bounded informer's cold list a page at a time (see
	// pagedList); set by begin as delivery is, nil otherwise.
	paged *pagedList
	// checkpointJoins are checkpoint handlers registered before the start
	// (see joinCheckpoints).
	checkpointJoins []pendingJoin

	// checkpoints are the open checkpoints, for metrics; guarded by
	// checkpointsMu.
	checkpointsMu sync.Mutex
	checkpoints   map[*Checkpoint]struct{}

	// blockDeltas stops delta processing while a late handler joins or a
	// handler is removed, and while the warm start hands out stored objects.
	// It is never held while waiting for the server (or for anything that
	// needs the delta loop, such as a list the store owes).
	blockDeltas sync.Mutex
	// owedJoins are handlers that joined while the store owed a list; they
	// are completed once it is applied (settleJoinsLocked). Guarded by
	// blockDeltas.
	owedJoins []pendingJoin
}

var _ cache.SharedIndexInformer = (*Informer)(nil)

// storeIndexer is what the informer needs of its store; both *Indexer and
// client-go's in-memory indexer provide it.
type storeIndexer interface {
	cache.Indexer
	cache.TransactionStore
}

// NewSharedIndexInformer is client-go's cache.NewSharedIndexInformer with
// one more argument: where to persist. It fails if the collection cannot be
// opened (for example an index must be rebuilt and an index function fails).
func NewSharedIndexInformer(lw cache.ListerWatcher, exampleObject runtime.Object, defaultEventHandlerResyncPeriod time.Duration, indexers cache.Indexers, p Persistence) (*Informer, error) {
	return NewSharedIndexInformerWithOptions(lw, exampleObject, InformerOptions{
		Persistence:  p,
		ResyncPeriod: defaultEventHandlerResyncPeriod,
		Indexers:     indexers,
	})
}

// NewSharedIndexInformerWithOptions is client-go's
// cache.NewSharedIndexInformerWithOptions with persistence.
func NewSharedIndexInformerWithOptions(lw cache.ListerWatcher, exampleObject runtime.Object, opts InformerOptions) (*Informer, error) {
	p := opts.Persistence
	var store storeIndexer
	var persistent *Indexer
	if p.MemoryOnly || (isSensitive(exampleObject) && !p.PersistSecrets) {
		store = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, opts.Indexers).(storeIndexer)
	} else {
		// Provenance is checked when the informer starts, once the cluster
		// and the transform are known.
		indexer, err := newIndexer(IndexerOptions{
			DB:            p.DB,
			Collection:    p.Collection,
			Description:   p.Description,
			KeyFunc:       cache.DeletionHandlingMetaNamespaceKeyFunc,
			Indexers:      opts.Indexers,
			IndexVersions: p.IndexVersions,
			CacheObjects:  p.CacheObjects,
			CacheBytes:    p.CacheBytes,
		}, nil)
		if err != nil {
			return nil, err
		}
		store, persistent = indexer, indexer
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if opts.Metrics != nil {
		opts.Observer = opts.Metrics.observer(p.Collection, opts.Observer)
		if opts.InformerMetricsProvider == nil {
			opts.InformerMetricsProvider = opts.Metrics
		}
	}
	inf := &Informer{
		store:                           store,
		persistent:                      persistent,
		name:                            p.Collection,
		processor:                       processor.New(clk),
		listerWatcher:                   lw,
		objectType:                      exampleObject,
		opts:                            opts,
		loaded:                          make(chan struct{}),
		synced:                          make(chan struct{}),
		cacheMutationDetector:           cache.NewCacheMutationDetector(fmt.Sprintf("%T", exampleObject)),
		resyncCheckPeriod:               opts.ResyncPeriod,
		defaultEventHandlerResyncPeriod: opts.ResyncPeriod,
		clock:                           clk,
	}
	inf.caught = newCaughtUp()
	inf.public = store
	if persistent != nil {
		inf.gate.seeds = newSeedStore(opts.Indexers)
		inf.public = provenStore{storeIndexer: store, gate: &inf.gate}
	}
	return inf, nil
}

// SetWatchErrorHandler implements cache.SharedInformer.
func (s *Informer) SetWatchErrorHandler(handler cache.WatchErrorHandler) error {
	return s.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) {
		handler(r, err)
	})
}

// SetWatchErrorHandlerWithContext implements cache.SharedInformer. The
// *cache.Reflector passed to the handler describes this informer's
// reflector (name, type) but is not the one running: the watch runs on
// boltinformer's resumable reflector.
func (s *Informer) SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	if s.started || s.running {
		return fmt.Errorf("informer has already started")
	}
	s.watchErrorHandler = handler
	return nil
}

// SetTransform implements cache.SharedInformer. The transform runs before
// an object is stored, so the file holds transformed objects.
func (s *Informer) SetTransform(handler cache.TransformFunc) error {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	if s.started || s.running {
		return fmt.Errorf("informer has already started")
	}
	s.transform = handler
	return nil
}

// Run implements cache.SharedInformer.
func (s *Informer) Run(stopCh <-chan struct{}) {
	s.RunWithContext(wait.ContextForChannel(stopCh))
}

// RunWithContext implements cache.SharedInformer. It returns after the
// reflector, the queue consumer and every handler goroutine have stopped and
// the applied changes have been flushed to the file; the collection is then
// released, so a new informer may open it.
//
// Before anything stored is handed out or resumed, a persistent informer
// asks Persistence.Cluster for the cluster's identity (retrying with
// backoff while it fails; the informer is not synced meanwhile) and checks
// the collection's provenance — cluster, ListIdentity, transform, queue
// mode — against what was recorded with it: on any difference the stored
// state is dropped and the informer starts cold.
func (s *Informer) RunWithContext(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	s.startedLock.Lock()
	if s.running {
		s.startedLock.Unlock()
		logger.Info("Warning: the sharedIndexInformer has started, run more than once is not allowed")
		return
	}
	s.running = true
	report := s.reportWatchErrorLocked()
	s.startedLock.Unlock()

	// The processor stops strictly after the controller, as in client-go.
	processorStopCtx, stopProcessor := context.WithCancelCause(context.WithoutCancel(ctx))
	var wg wait.Group
	defer wg.Wait()
	defer stopProcessor(errors.New("informer is stopping"))
	wg.StartWithChannel(processorStopCtx.Done(), s.cacheMutationDetector.Run)
	wg.StartWithContext(processorStopCtx, s.processor.Run)

	defer func() {
		s.startedLock.Lock()
		defer s.startedLock.Unlock()
		s.stopped = true // No new listeners.
	}()
	defer s.closeCollection(logger)
	s.report = report

	if s.persistent != nil {
		if !s.checkProvenance(ctx) {
			return // stopped before the cluster's identity was known
		}
		// Listers may read the collection from now on (seed.go).
		s.openStore(ctx)
	}
	if s.persistent != nil {
		defer s.persistent.coll.DB().AddCommitObserver(s.commitFailures(ctx))()
	}
	if m := s.opts.Metrics; m != nil {
		m.addInformer(s)
		defer m.removeInformer(s)
	}

	// Every reflector runs under reflectorCtx; RunWithContext returns only
	// after the last one has.
	// relistAfterReadError may launch one while the informer stops: launchMu
	// keeps a Start from running beside reflectors.Wait.
	reflectorCtx, stopReflectors := context.WithCancel(ctx)
	var reflectors wait.Group
	var launchMu sync.Mutex
	launchDone := false // guarded by launchMu
	defer reflectors.Wait()
	defer func() {
		stopReflectors()
		launchMu.Lock() // a launch under way has started its reflector
		launchDone = true
		launchMu.Unlock()
	}()
	launch := func(refl *reflector.Reflector) (stop func()) {
		launchMu.Lock()
		defer launchMu.Unlock()
		if launchDone {
			return func() {}
		}
		attemptCtx, cancel := context.WithCancel(reflectorCtx)
		done := make(chan struct{})
		reflectors.Start(func() { defer close(done); refl.Run(attemptCtx) })
		return func() { cancel(); <-done }
	}

	// A warm start's store is complete as soon as it begins (the file); it
	// is synced once the resumed watch has caught up with a consistent read
	// (or at once with SyncedAtOpen). The stored objects reach the handlers
	// in the background (warmDelivery), each handler's registration syncing
	// after its own initial adds. Watch events are applied meanwhile; a
	// relist after a 410 waits for the delivery.
	fifo, refl, delivery := s.begin(logger)
	s.joinCheckpoints()
	stopFirst := launch(refl)
	if s.matchVersions {
		wg.Start(func() { s.proveByVersions(ctx) })
	}
	if delivery != nil {
		s.loadedOnceListed(ctx, &wg)
		wg.Start(func() {
			err := delivery.run(ctx, s.keepOnly)
			s.gate.verifying.Store(nil)
			if err != nil {
				s.relistAfterReadError(ctx, err, stopFirst, launch, fifo)
			}
			s.releaseFilePages(logger)
		})
	} else {
		var paged <-chan struct{} // a paged list's end; nil: none
		if s.paged != nil {
			paged = s.paged.done
		}
		wg.Start(func() {
			select {
			case <-ctx.Done():
			case <-fifo.HasSyncedChecker().Done():
				close(s.loaded)
				s.releaseFilePages(logger)
			case <-paged:
				close(s.loaded)
				s.releaseFilePages(logger)
			}
		})
	}
	wg.Start(func() {
		select {
		case <-ctx.Done():
			return
		case <-s.loaded:
		}
		select {
		case <-ctx.Done():
			return
		case <-s.caught.done:
		}
		close(s.synced)
	})
	s.runController(ctx, fifo)
}

// checkProvenance learns the cluster's identity, retrying with backoff
// while Persistence.Cluster fails, and empties the collection if it was
// stored under another provenance. It returns false if ctx ended first.
func (s *Informer) checkProvenance(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	p := s.opts.Persistence
	return s.retry(ctx, func() error {
		cluster := ""
		if p.Cluster != nil {
			var err error
			if cluster, err = p.Cluster(ctx); err != nil {
				return fmt.Errorf("boltinformer: collection %q: the cluster's identity is not known yet (%w); nothing stored is resumed until it is", s.name, err)
			}
		}
		s.startedLock.Lock()
		transform := s.transform
		s.startedLock.Unlock()
		want := map[string]string{
			provenanceList:      p.ListIdentity,
			provenanceCluster:   cluster,
			provenanceTransform: codeid.Versioned(p.TransformVersion, transform),
			provenanceQueue:     queueAtomic,
		}
		mismatch, err := s.persistent.coll.CheckProvenance(ctx, want)
		if err != nil {
			return fmt.Errorf("boltinformer: collection %q: checking what it was stored under: %w", s.name, err)
		}
		if mismatch != nil {
			reason := resetReason(mismatch)
			logger.Info("Stored collection does not match this informer; it was emptied and the informer starts cold", "collection", s.name, "reason", reason, "detail", mismatch.Error())
			s.opts.Metrics.countReset(s.name, reason)
		}
		return nil
	})
}

// retry calls fn until it succeeds, reporting each error to the watch error
// handler and waiting with the reflector's backoff (client-go's 800ms
// doubling to 30s unless InformerOptions say otherwise) in between. It
// returns false if ctx ended first.
func (s *Informer) retry(ctx context.Context, fn func() error) bool {
	delay, maxDelay := s.opts.InitialBackoff, s.opts.MaxBackoff
	if delay <= 0 {
		delay = 800 * time.Millisecond // client-go's reflector backoff
	}
	if maxDelay <= 0 {
		maxDelay = 30 * time.Second
	}
	for {
		err := fn()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.report(ctx, err)
		select {
		case <-ctx.Done():
			return false
		case <-s.clock.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}

// begin builds the queue and the reflector and marks the informer started,
// under startedLock. A warm start (a stored resourceVersion) also returns
// the delivery of the stored state to the listeners registered until then;
// listeners added from now on get the store's state through their own late
// join.
func (s *Informer) begin(logger klog.Logger) (*cache.RealFIFO, *reflector.Reflector, *warmDelivery) {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	// The queue always reports list resourceVersions (ReplacedAll) and
	// bookmarks, whatever the AtomicFIFO gate says: without them the stored
	// resourceVersion would be the last object's, older than the list's, and
	// never advanced by bookmarks, and a restart would replay old versions
	// over newer ones. Handlers see the same calls either way.
	fifo := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Logger:                &logger,
		Name:                  fmt.Sprintf("RealFIFO %T", s.objectType),
		KeyFunction:           cache.MetaNamespaceKeyFunc,
		Transformer:           s.transform,
		Identifier:            s.opts.Identifier,
		MetricsProvider:       s.opts.InformerMetricsProvider,
		AtomicEvents:          true,
		UnlockWhileProcessing: clientgofeatures.FeatureGates().Enabled(clientgofeatures.AtomicFIFO) && clientgofeatures.FeatureGates().Enabled(clientgofeatures.UnlockWhileProcessingFIFO),
		EmitDeltaTypeBookmark: true,
	})

	var resume string
	if s.persistent != nil {
		resume = s.persistent.coll.ResourceVersion()
		// Without a transform the store gets objects as they were decoded.
		s.persistent.wirePayloads.Store(s.transform == nil)
	}
	if resume == "0" {
		resume = "" // "any version": nothing to resume from
	}
	s.warm = resume != ""
	if s.persistent != nil && !s.warm && !s.gate.seeds.seeded {
		// A cold start lists into an empty store, so the list reaches
		// handlers as initial adds.
		if err := s.persistent.Replace(nil, ""); err != nil {
			utilruntime.HandleError(fmt.Errorf("boltinformer: collection %q: emptying it for a cold start: %w", s.name, err))
		}
	}
	if s.persistent != nil {
		s.persistent.setReadErrorHandler(s.report) // file read errors reach it too
	}
	var delivery *warmDelivery
	var listAfter <-chan struct{}
	if !s.warm || s.opts.SyncedAtOpen {
		s.caught.finish()
	}
	if s.warm {
		// One rule for resyncs after a warm start, for handlers registered
		// now and later: see SelectResyncingListeners.
		s.processor.SelectResyncingListeners()
		delivery = newWarmDelivery(s, s.processor.Listeners())
		s.delivery = delivery
		done := delivery.done
		s.gate.verifying.Store(&done)
		s.persistent.retryAfter(done)
		listAfter = delivery.done
	}
	var paged reflector.PagedList
	if !s.warm && s.boundedCache() && !s.gate.seeds.seeded {
		// A bounded informer's cold list never held whole (pagedlist.go).
		s.paged = newPagedList(s, s.transform)
		paged = s.paged
	}
	opts := s.listIfOwed(reflector.Options{
		ResumeResourceVersion: resume,
		ListAfter:             listAfter,
		CatchUp:               s.catchUp(),
		PagedList:             paged,
	})
	s.matchVersions = opts.CatchUp != nil && s.matchesVersions(opts.ResumeResourceVersion)
	s.reflector = reflector.New(s.listerWatcher, s.reflectorStore(fifo), s.reflectorOptions(opts))
	s.started = true
	return fifo, s.reflector, delivery
}

// pendingJoin is a handler whose join is not complete: a checkpoint's
// handler registered before the informer started, whose tombstones are
// given when it starts (joinCheckpoints), or any handler that joined while
// the store owed a list, completed once the list is applied
// (settleJoinsLocked). cps are the checkpoints whose tombstones it is
// given, if any.
type pendingJoin struct {
	l   *processor.Listener
	cps []*Checkpoint
}

// joinCheckpoints gives the checkpoint handlers registered before the start
// their tombstones (deletions they have not acknowledged), before any watch
// event is processed — or, if the store owes a list (the collection was
// marked must-list), once that list is applied: a key the store lacks until
// then may have been set aside rather than deleted.
func (s *Informer) joinCheckpoints() {
	s.startedLock.Lock()
	joins := s.checkpointJoins
	s.checkpointJoins = nil
	s.startedLock.Unlock()
	if len(joins) == 0 {
		return
	}
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	if s.gate.owes() {
		// The informer does not sync before the list is applied, so the
		// registrations may still be told to await it
		// (processor.Listener.AwaitInitialAdds).
		for _, j := range joins {
			j.l.AwaitInitialAdds()
		}
		s.owedJoins = append(s.owedJoins, joins...)
		return
	}
	for _, j := range joins {
		for _, n := range tombstoneNotifications(s.store, j.cps) {
			s.processor.DistributeTo([]*processor.Listener{j.l}, n)
		}
	}
}

// settleJoinsLocked completes the joins that waited for a list the store
// owed, once it is applied (and its changes handed to every handler): each
// handler is given its tombstones, now only of keys that are gone, then
// InitialAddsDone, after which its registration may report synced. Called
// under blockDeltas, after each applied delta.
func (s *Informer) settleJoinsLocked() {
	if len(s.owedJoins) == 0 || s.gate.owes() {
		return
	}
	joins := s.owedJoins
	s.owedJoins = nil
	for _, j := range joins {
		only := []*processor.Listener{j.l} // not if it was removed meanwhile
		for _, n := range tombstoneNotifications(s.store, j.cps) {
			s.processor.DistributeTo(only, n)
		}
		s.processor.DistributeTo(only, processor.InitialAddsDone{})
	}
}

// reflectorOptions completes opts with the informer's settings.
func (s *Informer) reflectorOptions(opts reflector.Options) reflector.Options {
	opts.Name = s.opts.ObjectDescription
	opts.ExpectedType = s.objectType
	opts.PageSize = s.opts.PageSize
	opts.ResyncPeriod = s.resyncCheckPeriod
	opts.ShouldResync = s.shouldResync
	opts.MinWatchTimeout = s.opts.MinWatchTimeout
	opts.InitialBackoff = s.opts.InitialBackoff
	opts.MaxBackoff = s.opts.MaxBackoff
	opts.Clock = s.clock
	opts.WatchErrorHandler = s.report
	opts.Observer = s.opts.Observer
	opts.Recovery = s.opts.Recovery
	return opts
}

// reportWatchErrorLocked adapts the client-go watch error handler, which
// takes a *cache.Reflector, to errors boltinformer reports. Called with
// startedLock held.
func (s *Informer) reportWatchErrorLocked() func(context.Context, error) {
	handler := s.watchErrorHandler
	if handler == nil {
		handler = cache.DefaultWatchErrorHandler
	}
	// A client-go reflector that is never run, so the handler sees the name
	// and type it expects.
	described := cache.NewReflectorWithOptions(s.listerWatcher, s.objectType, cache.NewStore(cache.MetaNamespaceKeyFunc), cache.ReflectorOptions{
		TypeDescription: s.opts.ObjectDescription,
	})
	return func(ctx context.Context, err error) { handler(ctx, described, err) }
}

// commitFailures returns a commit observer that tells the watch error
// handler when persisting starts failing (disk full, I/O errors) and when it
// recovers. Meanwhile the informer keeps serving from memory and the commit
// loop retries; the stored resourceVersion never passes the stored objects.
func (s *Informer) commitFailures(ctx context.Context) func(persist.CommitStats) {
	report := s.report
	failing := false
	return func(stats persist.CommitStats) {
		switch {
		case stats.Err != nil && !failing:
			failing = true
			report(ctx, fmt.Errorf("boltinformer: persisting collection %q: %w; serving from memory and retrying", s.name, stats.Err))
		case stats.Err == nil && failing:
			failing = false
			klog.FromContext(ctx).Info("Persisting works again; the cache file has caught up", "collection", s.name)
		}
	}
}

// shouldResync is the processor's resync check, held back until a warm
// start's stored state has been handed out: a resync updates every stored
// object, and a start handler must get a key's initial add before any
// update of it. (It runs on the reflector's resync goroutine, which may
// wait; the delivery ends, at the latest, when the informer stops.)
func (s *Informer) shouldResync() bool {
	if d := s.delivery; d != nil {
		<-d.done
	}
	return s.processor.ShouldResync()
}

// relistAfterReadError deals with stored state that could not be read
// back during a warm start's delivery. The informer has synced and handlers
// have part of the stored state; the delivery has set the rest aside
// (keepOnly). The first reflector stops and a new one lists, from no older
// than what the first one applied, into the same queue. The list is
// reconciled with the store as any relist is: what was set aside arrives as
// adds, what changed as updates, what is gone as deletions. Until it is
// applied the store lacks what was set aside.
func (s *Informer) relistAfterReadError(ctx context.Context, err error, stopFirst func(), launch func(*reflector.Reflector) func(), fifo *cache.RealFIFO) {
	s.report(ctx, fmt.Errorf("boltinformer: collection %q: reading the stored state back failed (%w); set aside what the handlers were not given, relisting", s.name, err))
	s.opts.Metrics.countReset(s.name, resetReadError)
	stopFirst()
	if ctx.Err() != nil {
		return
	}
	s.startedLock.Lock()
	applied := s.reflector.LastSyncResourceVersion()
	// If the informer has not caught up yet, the short watches after the
	// relist do (the list may be older than the start's consistent read).
	s.reflector = reflector.New(s.listerWatcher, s.reflectorStore(fifo), s.reflectorOptions(reflector.Options{ListFrom: applied, CatchUp: s.catchUp()}))
	refl := s.reflector
	s.startedLock.Unlock()
	launch(refl)
}

// keepOnly removes from the collection every key handedOut says no handler
// was given, so the relist that follows is reconciled with what handlers
// got, and marks the collection as owing a list in the same commit, so a
// stop before the relist lands lists at the next start (persist's
// must-list mark survives the events and bookmarks applied meanwhile).
func (s *Informer) keepOnly(ctx context.Context, handedOut func(string) bool) error {
	s.gate.owe() // listers wait for the relist (readerror.go)
	keys, err := s.persistent.coll.Keys()
	if err != nil {
		// Not even the keys can be read: drop everything; handlers then see
		// the relist as adds and updates of what they got.
		return s.persistent.coll.SetAsideAll(ctx)
	}
	var ops []persist.Op
	for _, k := range keys {
		if !handedOut(k) {
			ops = append(ops, persist.Op{Key: k, Delete: true})
		}
	}
	return s.persistent.coll.SetAside(ops)
}

// releaseFilePages takes the file's pages, which a sync has just walked,
// out of the process's resident set when the object cache is bounded: such
// an informer chose memory over speed, and its RSS should show what it
// keeps. The pages stay in the kernel's page cache.
func (s *Informer) releaseFilePages(logger klog.Logger) {
	p := s.opts.Persistence
	if s.persistent == nil || (p.CacheObjects == 0 && p.CacheBytes == 0) {
		return
	}
	if err := s.persistent.coll.DB().ReleaseMappedPages(); err != nil {
		logger.V(2).Info("Could not release the cache file's pages from memory", "collection", s.name, "err", err)
	}
}

// runController is client-go's controller.RunWithContext without starting
// the reflector, which start did: processLoop drains the queue until ctx
// ends.
func (s *Informer) runController(ctx context.Context, fifo *cache.RealFIFO) {
	go func() {
		<-ctx.Done()
		fifo.Close()
	}()
	wait.UntilWithContext(ctx, func(ctx context.Context) { s.processLoop(ctx, fifo) }, time.Second)
}

// processLoop is client-go's controller.processLoop.
func (s *Informer) processLoop(ctx context.Context, fifo *cache.RealFIFO) {
	logger := klog.FromContext(ctx)
	useBatch := clientgofeatures.FeatureGates().Enabled(clientgofeatures.InOrderInformersBatchProcess)
	process := func(obj interface{}, isInInitialList bool) error {
		err := s.handleDeltas(logger, obj, isInInitialList)
		s.reportProcessError(ctx, err)
		return err
	}
	processBatch := func(deltas []cache.Delta, isInInitialList bool) error {
		err := s.handleBatchDeltas(logger, deltas, isInInitialList)
		s.reportProcessError(ctx, err)
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return
		default:
		}
		var err error
		if useBatch {
			err = fifo.PopBatch(processBatch, process)
		} else {
			_, err = fifo.Pop(process)
		}
		if errors.Is(err, cache.ErrFIFOClosed) {
			return
		}
	}
}

// reportProcessError reports a delta the store refused. client-go's indexer
// panics on index function errors instead; ours leaves the object out of the
// store and out of the notifications, and says so.
func (s *Informer) reportProcessError(ctx context.Context, err error) {
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to apply a watch event to the store", "collection", s.name)
	}
}

// initialList reports whether a popped delta belongs to the initial list.
// After a warm start the initial state came from disk, so nothing the queue
// delivers is part of it, though the queue (which never saw a list) thinks
// its first relist is.
func (s *Informer) initialList(isInInitialList bool) bool {
	return isInInitialList && !s.warm
}

func (s *Informer) handleDeltas(logger klog.Logger, obj interface{}, isInInitialList bool) error {
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return errors.New("object given as Process argument is not Deltas")
	}
	err := s.withRecoverySteps(logger, deltas, func(deltas []cache.Delta) error {
		if s.delivery != nil {
			s.delivery.handOutBefore(klog.NewContext(context.Background(), logger), deltas)
		}
		err := processDeltas(logger, s, s.store, deltas, s.initialList(isInInitialList), cache.DeletionHandlingMetaNamespaceKeyFunc)
		if s.moveToMemoryLocked(logger, err) {
			err = processDeltas(logger, s, s.store, deltas, s.initialList(isInInitialList), cache.DeletionHandlingMetaNamespaceKeyFunc)
		}
		return err
	})
	s.noteAppliedLocked(deltas, err)
	s.settleJoinsLocked()
	return err
}

func (s *Informer) handleBatchDeltas(logger klog.Logger, deltas []cache.Delta, isInInitialList bool) error {
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	err := s.withRecoverySteps(logger, deltas, func(deltas []cache.Delta) error {
		if s.delivery != nil {
			s.delivery.handOutBefore(klog.NewContext(context.Background(), logger), deltas)
		}
		err := processDeltasInBatch(logger, s, s.store, deltas, s.initialList(isInInitialList), cache.DeletionHandlingMetaNamespaceKeyFunc)
		if s.moveToMemoryLocked(logger, err) {
			err = processDeltasInBatch(logger, s, s.store, deltas, s.initialList(isInInitialList), cache.DeletionHandlingMetaNamespaceKeyFunc)
		}
		return err
	})
	s.noteAppliedLocked(deltas, err)
	s.settleJoinsLocked()
	return err
}

// noteAppliedLocked tells the caught-up sync what the store has applied:
// the deltas, for a proof by versions (versionmatch.go), and its
// resourceVersion (events, lists and bookmarks alike), unless a recovery is
// under way. Called under blockDeltas.
func (s *Informer) noteAppliedLocked(deltas []cache.Delta, err error) {
	if err != nil || s.recovering.Load() || slices.ContainsFunc(deltas, isRecoveryStep) {
		s.caught.dropMatch()
	} else {
		s.caught.appliedDeltas(deltas)
	}
	if !s.recovering.Load() {
		s.caught.applied(s.store.LastStoreSyncResourceVersion())
	}
}

// moveToMemoryLocked handles a delta the persistent store refused because
// an object cannot be encoded (typically what a transform returned: a type
// the cache file's scheme does not know). Such a delta applied nothing and
// notified nobody, so the informer can go on as client-go's would: its
// Indexer copies the state into client-go's in-memory indexer and serves
// from it (listers already handed out follow) and drops the collection's
// resourceVersion so the next start is cold; the informer reports the error
// and returns true for the caller to process the delta again. Called under
// blockDeltas.
func (s *Informer) moveToMemoryLocked(logger klog.Logger, err error) bool {
	if err == nil || !errors.Is(err, persist.ErrUnencodable) || s.persistent == nil || s.persistent.InMemory() {
		return false
	}
	if merr := s.persistent.moveToMemory(); merr != nil {
		utilruntime.HandleErrorWithLogger(logger, merr, "Cannot move the informer to memory", "collection", s.name)
		return false
	}
	s.opts.Metrics.countReset(s.name, resetUnencodable)
	s.report(klog.NewContext(context.Background(), logger), fmt.Errorf("boltinformer: collection %q: an object cannot be stored in the cache file (%w); the informer keeps its objects in memory from now on, as client-go's does, and will start cold. Register the type in the file's scheme (persist.Options.Scheme), or make the transform return a registered type", s.name, err))
	return true
}

// closeCollection commits what this informer applied, so a clean restart
// resumes from its last resourceVersion, and releases the collection so a
// new informer in this process can open it. The indexer stays readable.
func (s *Informer) closeCollection(logger klog.Logger) {
	if s.persistent == nil {
		return
	}
	if s.paged != nil {
		s.paged.wait() // the reflectors have ended: nothing else touches it
	}
	s.gate.stopOwing()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.persistent.coll.Close(ctx); err != nil {
		logger.Error(err, "Flushing the informer's cache file on stop failed; the next start resumes from the last committed resourceVersion", "collection", s.name)
	}
}

// OnAdd distributes an add; called under blockDeltas.
func (s *Informer) OnAdd(obj interface{}, isInInitialList bool) {
	s.cacheMutationDetector.AddObject(obj)
	s.processor.Distribute(processor.AddNotification{Obj: obj, IsInInitialList: isInInitialList}, false)
}

// OnUpdate distributes an update; called under blockDeltas. An update that
// did not change the resourceVersion is a resync: only resyncing handlers
// get it.
func (s *Informer) OnUpdate(old, new interface{}) { s.distributeUpdate(old, new, false) }

// onRelistUpdate distributes a relist's update as OnUpdate does, marked
// when the relist did not change the object's resourceVersion: a
// checkpoint's handler is not given an unchanged object it acknowledged
// (client-go gives it to every handler due for a resync, and a handler with
// a resync period is due until its first resync check: controller-runtime's
// handlers, for ten hours by default). Called under blockDeltas.
func (s *Informer) onRelistUpdate(old, new interface{}) { s.distributeUpdate(old, new, true) }

// distributeUpdate is OnUpdate, marking the update RelistedUnchanged if it
// comes from a relist (relisted) and did not change the resourceVersion.
func (s *Informer) distributeUpdate(old, new interface{}, relisted bool) {
	isSync := false
	if accessor, err := meta.Accessor(new); err == nil {
		if oldAccessor, err := meta.Accessor(old); err == nil {
			isSync = accessor.GetResourceVersion() == oldAccessor.GetResourceVersion()
		}
	}
	s.cacheMutationDetector.AddObject(new)
	s.processor.Distribute(processor.UpdateNotification{Old: old, New: new, RelistedUnchanged: relisted && isSync}, isSync)
}

// OnDelete distributes a delete; called under blockDeltas.
func (s *Informer) OnDelete(old interface{}) {
	s.processor.Distribute(processor.DeleteNotification{Obj: old}, false)
}

// HasStarted reports whether Run was called.
func (s *Informer) HasStarted() bool {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	return s.started
}

// HasSynced implements cache.SharedInformer.
func (s *Informer) HasSynced() bool {
	select {
	case <-s.synced:
		return true
	default:
		return false
	}
}

// HasSyncedChecker implements cache.SharedInformer.
func (s *Informer) HasSyncedChecker() cache.DoneChecker { return informerDone{s} }

type informerDone struct{ s *Informer }

func (d informerDone) Name() string          { return fmt.Sprintf("SharedIndexInformer %T", d.s.objectType) }
func (d informerDone) Done() <-chan struct{} { return d.s.synced }

// LastSyncResourceVersion implements cache.SharedInformer: the
// resourceVersion of the latest list, event or bookmark the reflector saw.
func (s *Informer) LastSyncResourceVersion() string {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	if s.reflector == nil {
		return ""
	}
	return s.reflector.LastSyncResourceVersion()
}

// GetStore implements cache.SharedInformer.
// Until the informer has started and checked the collection's provenance
// (see RunWithContext) the store reads as empty, except for what was
// written to it meanwhile, which makes Run start cold (see the package
// documentation, Seeding listers).
func (s *Informer) GetStore() cache.Store { return s.public }

// GetIndexer implements cache.SharedIndexInformer.
// Like GetStore, it reads as empty until the provenance is checked, except
// for what was written to it.
func (s *Informer) GetIndexer() cache.Indexer { return s.public }

// Indexer returns the persistent indexer, or nil for a memory-only
// informer. See Indexer.InMemory for one that moved to memory because an
// object could not be stored. Unlike GetIndexer it serves what the file
// holds even before the informer has checked the collection's provenance.
func (s *Informer) Indexer() *Indexer { return s.persistent }

// AddIndexers implements cache.SharedIndexInformer.
func (s *Informer) AddIndexers(indexers cache.Indexers) error {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	if s.stopped {
		return fmt.Errorf("indexer was not added because it has stopped already")
	}
	return s.public.AddIndexers(indexers)
}

// GetController implements cache.SharedInformer; like client-go's it cannot
// be run on its own.
func (s *Informer) GetController() cache.Controller { return dummyController{s} }

type dummyController struct{ s *Informer }

func (v dummyController) RunWithContext(context.Context)      {}
func (v dummyController) Run(<-chan struct{})                 {}
func (v dummyController) HasSynced() bool                     { return v.s.HasSynced() }
func (v dummyController) HasSyncedChecker() cache.DoneChecker { return v.s.HasSyncedChecker() }
func (v dummyController) LastSyncResourceVersion() string {
	if clientgofeatures.FeatureGates().Enabled(clientgofeatures.InformerResourceVersion) {
		return v.s.LastSyncResourceVersion()
	}
	return ""
}

// AddEventHandler implements cache.SharedInformer.
func (s *Informer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(handler, cache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer.
func (s *Informer) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, resyncPeriod time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(handler, cache.HandlerOptions{ResyncPeriod: &resyncPeriod})
}

// AddEventHandlerWithOptions implements cache.SharedInformer, with client-go's
// resync period rules and late-join protocol.
func (s *Informer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return s.addEventHandler(handler, options, nil, nil)
}

// AddEventHandlerWithTombstones is AddEventHandlerWithOptions that also gives
// the handler, once it has joined, the tombstones of the given checkpoints
// of this informer (deletions of acknowledged objects that are not
// acknowledged yet) as cache.DeletedFinalStateUnknown. It is for adapters
// whose framework registers the handlers a checkpoint's consumer depends on
// itself, after the informer started (the controller-runtime adapter): such
// a handler would otherwise never see a deletion applied before it joined.
func (s *Informer) AddEventHandlerWithTombstones(handler cache.ResourceEventHandler, options cache.HandlerOptions, cps ...*Checkpoint) (cache.ResourceEventHandlerRegistration, error) {
	return s.addEventHandler(handler, options, nil, cps)
}

// addEventHandler is AddEventHandlerWithOptions; skip, if set, is the
// checkpoint whose acknowledged initial adds the listener drops (see
// processor.ListenerOptions.SkipInitialAdd), and the tombstones of
// tombstones are given as deletions when the handler joins (see
// Checkpoint).
func (s *Informer) addEventHandler(handler cache.ResourceEventHandler, options cache.HandlerOptions, skip *Checkpoint, tombstones []*Checkpoint) (cache.ResourceEventHandlerRegistration, error) {
	var skipInitialAdd, skipRelisted func(interface{}) bool
	if skip != nil {
		skipInitialAdd, skipRelisted = skip.skip, skip.skipRelisted
	}
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	if s.stopped {
		return nil, fmt.Errorf("handler %v was not added to shared informer because it has stopped already", handler)
	}
	logger := ptr.Deref(options.Logger, klog.Background())
	resyncPeriod := ptr.Deref(options.ResyncPeriod, s.defaultEventHandlerResyncPeriod)
	if resyncPeriod > 0 {
		if resyncPeriod < processor.MinimumResyncPeriod {
			logger.Info("Warning: resync period is too small. Changing it to the minimum allowed value", "resyncPeriod", resyncPeriod, "minimumResyncPeriod", processor.MinimumResyncPeriod)
			resyncPeriod = processor.MinimumResyncPeriod
		}
		if resyncPeriod < s.resyncCheckPeriod {
			if s.started {
				logger.Info("Warning: resync period is smaller than resync check period and the informer has already started. Changing it to the resync check period", "resyncPeriod", resyncPeriod, "resyncCheckPeriod", s.resyncCheckPeriod)
				resyncPeriod = s.resyncCheckPeriod
			} else {
				s.resyncCheckPeriod = resyncPeriod
				s.processor.ResyncCheckPeriodChanged(logger, resyncPeriod)
			}
		}
	}
	listener := processor.NewListener(handler, processor.ListenerOptions{Logger: logger, RequestedResyncPeriod: resyncPeriod, ResyncPeriod: processor.DetermineResyncPeriod(logger, resyncPeriod, s.resyncCheckPeriod), Now: s.clock.Now(), UpstreamHasSynced: s.HasSyncedChecker(), SkipInitialAdd: skipInitialAdd, SkipRelistedUnchanged: skipRelisted})
	if !s.started {
		// The processor may already run (RunWithContext starts it before it
		// marks the informer started); then it will not start this
		// listener's sync watcher itself. No initial adds are due yet.
		if s.processor.AddListener(listener) {
			s.processor.StartWatchSynced(listener)
		}
		if len(tombstones) > 0 {
			s.checkpointJoins = append(s.checkpointJoins, pendingJoin{listener, tombstones})
		}
		return listener, nil
	}
	// To join safely: 1. stop deltas, 2. list the store, 3. queue synthetic
	// initial adds for the new handler, 4. unblock. Nothing here waits for
	// the server, as in client-go: the list the store may owe
	// (readerror.go) can only be applied by the delta loop this holds up.
	// While one is owed the handler's initial adds are what the store
	// holds; what was set aside reaches it through that list, as it reaches
	// every handler, and its tombstones and its sync wait for the list
	// (settleJoinsLocked): until then a key the store lacks may be set
	// aside rather than deleted.
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	started := s.processor.AddListener(listener)
	owed := s.gate.owes()
	if owed {
		listener.AwaitInitialAdds()
	}
	for _, item := range s.joinList(skip) {
		// Queued under the lock and before the handle is returned, so its
		// HasSynced can never be true before these adds are handled.
		listener.Add(processor.AddNotification{Obj: item, IsInInitialList: true})
	}
	if !owed && s.gate.owes() {
		// A warm start's delivery set state aside while the store was
		// read (it does not take blockDeltas); the read saw it wholly
		// before or after.
		owed = true
		listener.AwaitInitialAdds()
	}
	if owed {
		s.owedJoins = append(s.owedJoins, pendingJoin{listener, tombstones})
	} else {
		for _, n := range tombstoneNotifications(s.store, tombstones) {
			listener.Add(n)
		}
	}
	if started {
		s.processor.StartWatchSynced(listener)
	}
	return listener, nil
}

// IsStopped implements cache.SharedInformer.
func (s *Informer) IsStopped() bool {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	return s.stopped
}

// RemoveEventHandler implements cache.SharedInformer.
func (s *Informer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	s.startedLock.Lock()
	defer s.startedLock.Unlock()
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	return s.processor.RemoveListener(handle)
}
