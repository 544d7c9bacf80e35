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

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgofeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/processor"
	"github.com/boltinformer/boltinformer/reflector"
)

// Informer is a cache.SharedIndexInformer whose store lives in a cache file.
// When it starts with a stored resourceVersion, it does not list. Its
// listers serve the file as soon as it is open. The watch resumes from the
// stored resourceVersion. The informer reports synced once that watch has
// caught up with a consistent read taken at start, or at once with
// SyncedAtOpen. Every handler gets OnAdd(obj, true) for each stored object
// in the background. Its registration syncs after them.
//
// The server may have compacted that version away (410 Gone). The informer
// then recovers by what changed (InformerOptions.Recovery), or relists once.
// It reconciles the result with the stored state as client-go reconciles a
// relist. Objects deleted meanwhile reach handlers as
// DeletedFinalStateUnknown. Objects whose resourceVersion is unchanged are
// not rewritten. They reach only handlers with a resync period, however
// late those were added. client-go, in a relist before its first resync
// check, would send them to every handler (see the package documentation).
//
// Nothing stored is handed out or resumed unless the collection's recorded
// provenance matches. The provenance is the cluster, ListIdentity,
// transform and queue mode. Stored index entries are verified against the
// index functions during the warm start. Stored state that cannot be read
// back is set aside and relisted, reconciled with what handlers already
// got. An object the file cannot encode moves the informer to client-go's
// in-memory indexer. Each of these is logged and counted in
// boltinformer_collection_resets_total. Each error is also reported to the
// watch error handler.
//
// Everything else is client-go v0.37.2's. That is the queue, ordering,
// resync, handler registration and panics.
type Informer struct {
	// store is what deltas are applied to and listers read. It is
	// persistent unless the informer is memory-only. Then persistent is nil.
	store      storeIndexer
	persistent *Indexer
	// public is what GetStore and GetIndexer return. It is store, behind
	// gatedStore for a persistent informer. So nothing stored is read
	// before gate says the collection's provenance was checked.
	public        storeIndexer
	gate          readGate
	name          string // The collection name, for logs and metrics.
	processor     *processor.Processor
	listerWatcher cache.ListerWatcher
	objectType    runtime.Object
	opts          InformerOptions

	// ready says when the informer has synced.
	ready readiness

	cacheMutationDetector cache.MutationDetector

	resync resyncPeriods // As in client-go.
	clock  clock.WithTicker

	// report hands errors to the watch error handler. reportLocked does so
	// from another goroutine (reporter), for errors found under
	// blockDeltas. RunWithContext sets both before anything reads them.
	report, reportLocked func(context.Context, error)

	// recovery is the informer's side of a recovery (recoverysteps.go).
	recovery recoveryState

	// setAsides carries the set-asides of index builds to the running
	// informer (setaside.go).
	setAsides *setAsides

	// life is where the informer is in its run, under its own lock. start
	// is what begin decided as it started.
	life  lifecycle
	start startState

	checkpoints checkpointSet

	// blockDeltas stops delta processing while a late handler joins or a
	// handler is removed, and while the warm start hands out stored objects.
	// It is never held while waiting for the server. Nor is it held while
	// waiting for anything that needs the delta loop, such as a list the
	// store owes.
	blockDeltas sync.Mutex
	// owedJoins are handlers that joined while the store owed a list. They
	// are completed once it is applied (settleJoinsLocked). blockDeltas
	// guards them.
	owedJoins []pendingJoin

	// retell holds what set-asides owe handlers of tombstones (retell.go).
	retell retelling
}

var _ cache.SharedIndexInformer = (*Informer)(nil)

// resyncPeriods are client-go's resyncCheckPeriod and
// defaultEventHandlerResyncPeriod.
type resyncPeriods struct {
	check, handlerDefault time.Duration
}

// lifecycle is where the informer is in its life, and what it was given
// for its run. mu guards it. mu is never held while stored objects are
// delivered or the cluster is asked who it is.
type lifecycle struct {
	mu                sync.Mutex
	called            bool // RunWithContext was called.
	started, stopped  bool
	reflector         *reflector.Reflector
	watchErrorHandler cache.WatchErrorHandlerWithContext
	transform         cache.TransformFunc
	// checkpointJoins are checkpoint handlers registered before the start
	// (see joinCheckpoints).
	checkpointJoins []pendingJoin
}

// startState is what begin decided as the informer started. begin sets
// warm, delivery and paged under lifecycle.mu, before the reflector and
// the delta loop start. They never change after.
type startState struct {
	// warm is set when a stored resourceVersion exists.
	warm bool
	// delivery hands a warm start's stored state to the handlers.
	delivery *warmDelivery
	// paged takes a cold list a page at a time (see pagedList). It is nil
	// otherwise.
	paged *pagedList
	// begun is set by begin before it decides whether the start lists.
	// walk is delivery, set before begun. Both are read without
	// lifecycle.mu, by AddIndexers.
	begun atomic.Bool
	walk  atomic.Pointer[warmDelivery]
}

// storeIndexer is what the informer needs of its store. Both *Indexer and
// client-go's in-memory indexer provide it.
type storeIndexer interface {
	cache.Indexer
	cache.TransactionStore
}

// NewSharedIndexInformer is client-go's cache.NewSharedIndexInformer with
// one more argument, which says where to persist. It fails if the
// collection cannot be opened. That happens, for example, when an index
// must be rebuilt and an index function fails.
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
	if r := opts.Recovery; r != nil && r.Lister == nil {
		// NewMetadataLister's nil, where it cannot list (a fake
		// clientset): no recovery, as with Recovery nil.
		opts.Recovery = nil
	}
	if err := opts.Recovery.Validate(); err != nil {
		return nil, fmt.Errorf("InformerOptions.%w", err)
	}
	if r := opts.Recovery; r != nil {
		// A copy: the options are frozen once the informer is made.
		rc, lc := *r, *r.Lister
		rc.Lister = &lc
		opts.Recovery = &rc
	}
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
		store:                 store,
		persistent:            persistent,
		name:                  p.Collection,
		processor:             processor.New(clk),
		listerWatcher:         lw,
		objectType:            exampleObject,
		opts:                  opts,
		ready:                 readiness{loaded: make(chan struct{}), synced: make(chan struct{}), caught: newCaughtUp()},
		cacheMutationDetector: cache.NewCacheMutationDetector(fmt.Sprintf("%T", exampleObject)),
		resync:                resyncPeriods{check: opts.ResyncPeriod, handlerDefault: opts.ResyncPeriod},
		clock:                 clk,
	}
	inf.public = store
	if persistent != nil {
		inf.gate.seeds = newSeedStore(opts.Indexers)
		inf.public = gatedStore{storeIndexer: store, gate: &inf.gate}
		inf.setAsides = newSetAsides()
		persistent.onUnreadable(inf.setAsideUnreadable)
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
// reflector (name, type), but is not the one running. The watch runs on
// boltinformer's resumable reflector.
func (s *Informer) SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.started || s.life.called {
		return fmt.Errorf("informer has already started")
	}
	s.life.watchErrorHandler = handler
	return nil
}

// SetTransform implements cache.SharedInformer. The transform runs before
// an object is stored, so the file holds transformed objects.
func (s *Informer) SetTransform(handler cache.TransformFunc) error {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.started || s.life.called {
		return fmt.Errorf("informer has already started")
	}
	s.life.transform = handler
	return nil
}

// reflectorOptions completes opts with the informer's settings, for a
// reflector writing to store.
func (s *Informer) reflectorOptions(store reflector.Store, opts reflector.Options) reflector.Options {
	opts.Name = s.opts.ObjectDescription
	opts.ExpectedType = s.objectType
	opts.PageSize = s.opts.PageSize
	opts.ResyncPeriod = s.resync.check
	opts.ShouldResync = s.shouldResync
	opts.MinWatchTimeout = s.opts.MinWatchTimeout
	opts.InitialBackoff = s.opts.InitialBackoff
	opts.MaxBackoff = s.opts.MaxBackoff
	opts.Clock = s.clock
	opts.WatchErrorHandler = s.report
	opts.Observer = s.opts.Observer
	if q, ok := store.(recoveryQueue); ok {
		opts.Relister = s.recoverer(q)
	}
	return opts
}

// reportWatchErrorLocked adapts the client-go watch error handler, which
// takes a *cache.Reflector, to errors boltinformer reports. Called with
// life.mu held.
func (s *Informer) reportWatchErrorLocked() func(context.Context, error) {
	handler := s.life.watchErrorHandler
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
// recovers. Meanwhile the informer keeps serving from memory, and the commit
// loop retries. The stored resourceVersion never passes the stored objects.
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
// start's stored state has been handed out. A resync updates every stored
// object. A start handler must get a key's initial add before any update of
// it. It runs on the reflector's resync goroutine, which may wait. The
// delivery ends, at the latest, when the informer stops.
func (s *Informer) shouldResync() bool {
	if d := s.start.delivery; d != nil {
		<-d.end()
	}
	return s.processor.ShouldResync()
}

// runController is client-go's controller.RunWithContext without starting
// the reflector, which start did. processLoop drains the queue until ctx
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
// panics on index function errors instead. Ours leaves the object out of
// the store and out of the notifications, and says so.
func (s *Informer) reportProcessError(ctx context.Context, err error) {
	if err = withoutStopping(err); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to apply a watch event or a list to the store", "collection", s.name)
	}
}

// withoutStopping returns err without errStopping. errStopping is no
// failure, since the informer stopped. Errors joined with it are kept.
func withoutStopping(err error) error {
	if err == errStopping {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range j.Unwrap() {
			if e != errStopping {
				rest = append(rest, e)
			}
		}
		return errors.Join(rest...)
	}
	return err
}

// initialList reports whether a popped delta belongs to the initial list.
// After a warm start the initial state came from disk, and after a paged
// cold list it came in pages, around the queue. Nothing the queue delivers
// then is part of it, though the queue, which never saw that list, thinks
// its first relist is. client-go gives a relist's new objects
// OnAdd(obj, false).
func (s *Informer) initialList(isInInitialList bool) bool {
	return isInInitialList && !s.start.warm && !s.start.paged.handedOutWhole()
}

func (s *Informer) handleDeltas(logger klog.Logger, obj interface{}, isInInitialList bool) error {
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return errors.New("object given as Process argument is not Deltas")
	}
	deltas = s.ready.caught.skipReplayed(deltas)
	err := s.withRecoverySteps(logger, deltas, func(deltas []cache.Delta) error {
		if s.start.delivery != nil && !s.start.delivery.handOutBefore(klog.NewContext(context.Background(), logger), deltas) {
			return errStopping
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
	deltas = s.ready.caught.skipReplayed(deltas)
	err := s.withRecoverySteps(logger, deltas, func(deltas []cache.Delta) error {
		if s.start.delivery != nil && !s.start.delivery.handOutBefore(klog.NewContext(context.Background(), logger), deltas) {
			return errStopping
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

// noteAppliedLocked tells the caught-up sync what the store has applied,
// unless a recovery is under way. It passes the deltas, for a proof by
// versions (versionproof.go). It also passes the store's resourceVersion,
// after events, lists and bookmarks alike. It is called under blockDeltas.
func (s *Informer) noteAppliedLocked(deltas []cache.Delta, err error) {
	if err != nil || s.recovery.active.Load() || slices.ContainsFunc(deltas, isRecoveryStep) {
		s.ready.caught.dropMatch()
	} else {
		s.ready.caught.appliedDeltas(deltas)
	}
	if !s.recovery.active.Load() {
		s.ready.caught.applied(s.store.LastStoreSyncResourceVersion())
	}
}

// moveToMemoryLocked handles a delta the persistent store refused because
// an object cannot be encoded. Typically a transform returned a type the
// cache file's scheme does not know. Such a delta applied nothing and
// notified nobody. So the informer can go on as client-go's would. Its
// Indexer copies the state into client-go's in-memory indexer and serves
// from it. Listers already handed out follow. The Indexer drops the
// collection's resourceVersion, so the next start is cold. The informer
// reports the error. It returns true for the caller to process the delta
// again. It is called under blockDeltas.
func (s *Informer) moveToMemoryLocked(logger klog.Logger, err error) bool {
	if err == nil || !errors.Is(err, persist.ErrUnencodable) || s.persistent == nil || s.persistent.InMemory() {
		return false
	}
	if merr := s.persistent.moveToMemory(); merr != nil {
		utilruntime.HandleErrorWithLogger(logger, merr, "Cannot move the informer to memory", "collection", s.name)
		return false
	}
	s.opts.Metrics.countReset(s.name, resetUnencodable)
	s.reportLocked(klog.NewContext(context.Background(), logger), fmt.Errorf("boltinformer: collection %q: an object cannot be stored in the cache file (%w); the informer keeps its objects in memory from now on, as client-go's does, and will start cold. Register the type in the file's scheme (persist.Options.Scheme), or make the transform return a registered type", s.name, err))
	return true
}

// closeCollection commits what this informer applied, so a clean restart
// resumes from its last resourceVersion. It releases the collection, so a
// new informer in this process can open it. The indexer stays readable.
func (s *Informer) closeCollection(logger klog.Logger) {
	if s.persistent == nil {
		return
	}
	if s.start.paged != nil {
		s.start.paged.wait() // The reflectors have ended, so nothing else touches it.
	}
	s.gate.stopOwing()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.persistent.coll.Close(ctx); err != nil {
		logger.Error(err, "Flushing the informer's cache file on stop failed; the next start resumes from the last committed resourceVersion", "collection", s.name)
	}
	s.gate.indexesVerified() // After a walk cut short, lookups now fail as closed.
}

// OnAdd distributes an add. It is called under blockDeltas.
func (s *Informer) OnAdd(obj interface{}, isInInitialList bool) {
	s.givenToAll(obj)
	s.supersede(obj)
	s.noteToldLocked(obj, nil)
	s.cacheMutationDetector.AddObject(obj)
	s.processor.Distribute(processor.AddNotification{Obj: obj, IsInInitialList: isInInitialList}, false)
}

// OnUpdate distributes an update. It is called under blockDeltas. An update
// that did not change the resourceVersion is a resync. Only resyncing
// handlers get it.
func (s *Informer) OnUpdate(old, new interface{}) { s.distributeUpdate(old, new, false) }

// onRelistUpdate distributes a relist's update as OnUpdate does. It marks
// the update when the relist did not change the object's resourceVersion.
// A checkpoint's handler is not given an unchanged object it acknowledged.
// client-go gives it to every handler due for a resync. A handler with a
// resync period is due until its first resync check. For
// controller-runtime's handlers that is ten hours by default. It is called
// under blockDeltas.
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
	if !isSync {
		s.givenToAll(new)
		s.supersede(new)
		s.noteToldLocked(new, nil)
	}
	s.cacheMutationDetector.AddObject(new)
	s.processor.Distribute(processor.UpdateNotification{Old: old, New: new, RelistedUnchanged: relisted && isSync}, isSync)
}

// OnDelete distributes a delete. It is called under blockDeltas. The start
// handlers of a warm start that could not be given the key's stored state
// are not told. client-go never deletes what it did not deliver.
func (s *Informer) OnDelete(old interface{}) {
	s.supersede(old)
	if key, ok := s.notGivenKey(old); ok {
		if lacking := s.start.delivery.lacking(key); len(lacking) > 0 {
			s.noteToldLocked(old, lacking)
			s.processor.DistributeExcept(lacking, processor.DeleteNotification{Obj: old})
			return
		}
	}
	s.noteToldLocked(old, nil)
	s.processor.Distribute(processor.DeleteNotification{Obj: old}, false)
}

// givenToAll notes that every handler is being given obj's key.
func (s *Informer) givenToAll(obj interface{}) {
	if key, ok := s.notGivenKey(obj); ok {
		s.start.delivery.given(key)
	}
}

// notGivenKey returns obj's key if a warm start's delivery has keys its
// start handlers were not given. The common case costs one atomic load.
func (s *Informer) notGivenKey(obj interface{}) (string, bool) {
	if s.start.delivery == nil || s.start.delivery.notGivenCount.Load() == 0 {
		return "", false
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key, err == nil
}

// HasStarted reports whether Run was called.
func (s *Informer) HasStarted() bool {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	return s.life.started
}

// HasSynced implements cache.SharedInformer.
func (s *Informer) HasSynced() bool {
	select {
	case <-s.ready.synced:
		return true
	default:
		return false
	}
}

// HasSyncedChecker implements cache.SharedInformer.
func (s *Informer) HasSyncedChecker() cache.DoneChecker { return informerDone{s} }

type informerDone struct{ s *Informer }

func (d informerDone) Name() string          { return fmt.Sprintf("SharedIndexInformer %T", d.s.objectType) }
func (d informerDone) Done() <-chan struct{} { return d.s.ready.synced }

// LastSyncResourceVersion implements cache.SharedInformer. It returns the
// resourceVersion of the latest list, event or bookmark the reflector saw.
func (s *Informer) LastSyncResourceVersion() string {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.reflector == nil {
		return ""
	}
	return s.life.reflector.LastSyncResourceVersion()
}

// GetStore implements cache.SharedInformer.
// Until the informer has started and checked the collection's provenance
// (see RunWithContext), the store reads as empty. What was written to it
// meanwhile is the exception. Such writes make Run start cold (see the
// package documentation, Seeding listers).
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
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.stopped {
		return fmt.Errorf("indexer was not added because it has stopped already")
	}
	return s.public.AddIndexers(indexers)
}

// GetController implements cache.SharedInformer. Like client-go's, it
// cannot be run on its own.
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

// IsStopped implements cache.SharedInformer.
func (s *Informer) IsStopped() bool {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	return s.life.stopped
}
