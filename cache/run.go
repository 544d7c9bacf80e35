package cache

import (
	"context"
	"errors"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/reflector"
)

// This comment lists the informer's goroutines and locks in one place. It
// gives the one order in which locks are taken across packages. persist's
// own locks and their order are in persist/commit.go.
//
// # Goroutines
//
//	goroutine          started by          what it does                          writes to
//	-----------------  ------------------  ------------------------------------  ------------------------
//	reflector          reflectors.launch   list, watch, recovery (one per        the RealFIFO: objects, and
//	                                       attempt; a relist after a read        recovery steps as items of
//	                                       error starts a second one)            their own type (recoverysteps.go)
//	fetch, page ahead  the recovery        fetch changed objects; results reach  nothing: results go over
//	                                       the reflector's goroutine (package    a channel
//	                                       recovery, "Goroutines and locks")
//	controller         runController       pops the RealFIFO, applies deltas     the store (Indexer, and
//	                                       under blockDeltas, distributes them   persist below it)
//	warm walk          runWarm             hands stored objects to the start     persist, on a read error
//	                                       handlers; after a read error, sets    (SetAside)
//	                                       aside (keepOnly) and relists
//	set-asides         RunWithContext      reports what index builds set aside   nothing: it replaces the
//	                                       (setaside.go), and relists            reflector
//	listeners          processor.Run       one pair per handler (run, pop), as   nothing of the informer's
//	                                       in client-go; call the handlers
//	sync and proof     RunWithContext      wait for loaded and caught up, then   s.ready.loaded, s.ready.synced
//	                                       close synced; prove by versions
//	paged flush        pagedList           flush a paged list's chunks           persist
//
// # Locks
//
// Outermost first. A goroutine holding one may take only those below it.
// No lock is held while a handler runs, or while anything waits for the
// server or for the delta loop.
//
//	lock                     guards                                  taken by
//	-----------------------  --------------------------------------  ----------------------------------
//	Checkpoint.mu            one handler per checkpoint              Checkpoint.AddEventHandler
//	relister.mu              one reflector replacement at a time     relist (the walk, set-asides)
//	lifecycle.mu             started, stopped, the reflector         handler joins, RunWithContext,
//	                                                                 relist, AddIndexers
//	RealFIFO's lock          the queue (client-go); held while a     the reflector's Add and Replace,
//	                         popped item is processed                the controller's Pop
//	blockDeltas              the store against joins and removals;   the controller, handler joins and
//	                         owedJoins                               removals, joinCheckpoints
//	warmDelivery.mu          the walk's progress, notGiven           the walk, handOutBefore, keepOnly,
//	                                                                 setAsideUnreadable
//	seedStore.mu             the store served before Run adopts it   lister calls, adopt
//	Indexer.writeMu          the order of store writes; set-asides   the controller, the walk's repairs,
//	                         against lists' ends (setAside)          keepOnly, setAsideUnreadable
//	retelling.mu             what set-asides owe, walkJoins          joins, supersede, keepOnly,
//	                                                                 retellLocked, setAsideUnreadable
//	gate.owedMu              the owed list                           owe, paid, stopOwing
//	Indexer.indexMu          the index functions                     writes and reads
//	persist's locks          see persist/commit.go                   the store, checkpoints, the walk
//
// lifecycle.mu and the RealFIFO's lock are never held together. Nothing
// else is taken under the leaf locks. They are checkpointSet.mu,
// owedHold.mu, walkYield.mu, walkRecoveryHolds.mu, caughtUp.mu, Metrics.mu
// and setAsides.mu.
// AddIndexers holds lifecycle.mu, then Indexer.writeMu for each build. It
// lets writeMu go before it sets records aside (setaside.go). The set-aside
// takes warmDelivery.mu, then writeMu again, then retelling.mu and
// gate.owedMu.

// Run implements cache.SharedInformer.
func (s *Informer) Run(stopCh <-chan struct{}) {
	s.RunWithContext(wait.ContextForChannel(stopCh))
}

// RunWithContext implements cache.SharedInformer. It returns once the
// reflectors, the queue consumer and every handler goroutine have stopped.
// The applied changes are then flushed and the collection released, so a
// new informer may open it.
//
// Before anything stored is handed out, a persistent informer asks
// Persistence.Cluster for the cluster's identity, retrying with backoff.
// It then checks the collection's provenance (cluster, ListIdentity,
// transform, queue mode) against what was recorded with it. On any
// difference it drops the stored state and starts cold.
func (s *Informer) RunWithContext(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	s.life.mu.Lock()
	if s.life.called {
		s.life.mu.Unlock()
		logger.Info("Warning: the sharedIndexInformer has started, run more than once is not allowed")
		return
	}
	s.life.called = true
	report := s.reportWatchErrorLocked()
	s.life.mu.Unlock()
	// Registered first, so it runs last. After the controller and the
	// processor stopped, nothing reports under a lock any more.
	locked := newReporter(ctx, report)
	defer locked.stop()

	// The processor stops strictly after the controller, as in client-go.
	processorStopCtx, stopProcessor := context.WithCancelCause(context.WithoutCancel(ctx))
	var wg wait.Group
	defer wg.Wait()
	defer stopProcessor(errors.New("informer is stopping"))
	wg.StartWithChannel(processorStopCtx.Done(), s.cacheMutationDetector.Run)
	wg.StartWithContext(processorStopCtx, s.processor.Run)

	defer func() {
		s.life.mu.Lock()
		defer s.life.mu.Unlock()
		s.life.stopped = true // No new listeners.
	}()
	defer func() {
		for _, c := range s.openCheckpoints() {
			c.walk.Load().end() // its timer
		}
	}()
	defer s.closeCollection(logger)
	s.report, s.reportLocked = report, locked.report

	if s.persistent != nil {
		if !s.checkProvenance(ctx) {
			return // stopped before the cluster's identity was known
		}
		// Listers may read the collection from now on (seed.go).
		s.openStore(ctx)
		if !s.emptyForColdStart(ctx) {
			return // stopped before the collection could be emptied
		}
	}
	if s.persistent != nil {
		defer s.persistent.coll.DB().AddCommitObserver(s.commitFailures(ctx))()
	}
	if m := s.opts.Metrics; m != nil {
		m.addInformer(s)
		defer m.removeInformer(s)
	}

	refls := newReflectors(ctx)
	defer refls.stopAll()
	fifo, refl, delivery := s.begin(logger)
	s.joinCheckpoints()
	rl := &relister{stop: refls.launch(refl), launch: refls.launch, fifo: fifo}
	if s.persistent != nil {
		wg.Start(func() { s.runSetAsides(ctx, rl) })
	}
	if s.ready.proof != nil {
		wg.Start(func() { s.proveByVersions(ctx) })
	}
	if delivery != nil {
		s.runWarm(ctx, &wg, delivery, rl)
	} else {
		s.runCold(ctx, &wg, fifo)
	}
	wg.Start(func() {
		select {
		case <-ctx.Done():
			return
		case <-s.ready.loaded:
		}
		select {
		case <-ctx.Done():
			return
		case <-s.ready.caught.done:
		}
		close(s.ready.synced)
	})
	s.runController(ctx, fifo)
}

// runWarm loads a warm start's store. The store is complete as soon as it
// begins, since it is the file. It is synced once the resumed watch has
// caught up with a consistent read, or at once with SyncedAtOpen. The
// stored objects reach the handlers in the background (warmDelivery). Each
// handler's registration syncs after its own initial adds. Watch events are
// applied meanwhile, and a relist after a 410 waits for the delivery.
func (s *Informer) runWarm(ctx context.Context, wg *wait.Group, delivery *warmDelivery, rl *relister) {
	logger := klog.FromContext(ctx)
	s.loadedOnceListed(ctx, wg)
	wg.Start(func() {
		err := delivery.run(ctx, s.keepOnly)
		if delivery.handedAll() {
			s.gate.indexesVerified()
		}
		if err == nil {
			s.retell.forgetWalkJoins()
		} else {
			s.relistAfterReadError(ctx, err, rl)
		}
		s.releaseFilePages(logger)
	})
}

// runCold loads a cold start's store. The store is loaded once the first
// list is applied, or once a paged list into the file ends.
func (s *Informer) runCold(ctx context.Context, wg *wait.Group, fifo *cache.RealFIFO) {
	logger := klog.FromContext(ctx)
	var paged <-chan struct{} // A paged list's end, or nil without one.
	if s.start.paged != nil {
		paged = s.start.paged.done
	}
	wg.Start(func() {
		select {
		case <-ctx.Done():
		case <-fifo.HasSyncedChecker().Done():
			close(s.ready.loaded)
			s.releaseFilePages(logger)
		case <-paged:
			close(s.ready.loaded)
			s.releaseFilePages(logger)
		}
	})
}

// reflectors runs an informer's reflectors, each under its own context
// below a shared one. relistAfterReadError may launch one while the
// informer stops, so mu keeps a launch from running beside stopAll's wait.
type reflectors struct {
	ctx  context.Context
	stop context.CancelFunc
	wg   wait.Group
	mu   sync.Mutex
	done bool // guarded by mu
}

func newReflectors(ctx context.Context) *reflectors {
	r := &reflectors{}
	r.ctx, r.stop = context.WithCancel(ctx)
	return r
}

// launch runs refl and returns a function that stops it and waits for it.
// After stopAll it runs nothing.
func (r *reflectors) launch(refl *reflector.Reflector) (stop func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return func() {}
	}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	r.wg.Start(func() { defer close(done); refl.Run(ctx) })
	return func() { cancel(); <-done }
}

// stopAll stops every reflector and waits for the last one to return.
func (r *reflectors) stopAll() {
	r.stop()
	r.mu.Lock() // a launch under way has started its reflector
	r.done = true
	r.mu.Unlock()
	r.wg.Wait()
}
