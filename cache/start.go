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
// The ports are listed in hack/upstream-versions.txt.

package cache

import (
	"context"
	"fmt"
	"slices"
	"sync"

	clientgofeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/processor"
	"github.com/boltinformer/boltinformer/reflector"
)

// How a run starts is below. RunWithContext calls these steps in order.
//
//  1. A collection without a resourceVersion is emptied
//     (emptyForColdStart).
//  2. begin decides cold or warm from the stored resourceVersion. It builds
//     the queue and the reflector.
//  3. The checkpoint handlers registered before the start are given their
//     tombstones (joinCheckpoints).
//  4. A warm start hands the stored state to the handlers in the background
//     (delivery.go). A stored record that cannot be read during that
//     hand-off costs one relist. The relist is reconciled with what the
//     handlers already got (relistAfterReadError, keepOnly).

// emptyForColdStart empties a collection that has no resourceVersion to
// resume from, before the informer starts cold. It drops the stored state
// wholesale (persist's Reset), reading no record. So a damaged record
// cannot keep an object the list lacks. The checkpoints go with it. Their
// acknowledgements name states this start does not resume. Turning them
// into tombstones would tell handlers of deletions that never happened. A
// failure is retried with backoff, since listing into what is
// left would keep what the server deleted for good. It returns false if ctx
// ended first. A collection seeded before Run was emptied by openStore.
func (s *Informer) emptyForColdStart(ctx context.Context) bool {
	if s.persistent == nil || s.gate.seeds.seeded {
		return true
	}
	if rv := s.persistent.coll.ResourceVersion(); rv != "" && rv != "0" {
		return true
	}
	return s.retry(ctx, func() error {
		if err := s.persistent.coll.Reset(ctx, s.persistent.coll.Provenance()); err != nil {
			return fmt.Errorf("boltinformer: collection %q: emptying it for a cold start: %w; nothing is listed until it is empty", s.name, err)
		}
		return nil
	})
}

// begin builds the queue and the reflector and marks the informer started,
// under life.mu. A warm start, one with a stored resourceVersion, also
// returns the delivery of the stored state to the listeners registered
// until then. Listeners added from now on get the store's state through
// their own late join.
func (s *Informer) begin(logger klog.Logger) (*cache.RealFIFO, *reflector.Reflector, *warmDelivery) {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	fifo := s.newQueue(logger)

	var resume string
	if s.persistent != nil {
		resume = s.persistent.coll.ResourceVersion()
		// Without a transform the store gets objects as they were decoded.
		s.persistent.wirePayloads.Store(s.life.transform == nil)
	}
	if resume == "0" {
		resume = "" // "Any version", since there is nothing to resume from.
	}
	// A cold start lists into a store emptyForColdStart emptied, so the
	// list reaches handlers as initial adds.
	s.start.warm = resume != ""
	if s.persistent != nil {
		s.persistent.setReadErrorHandler(s.reportLocked) // File read errors reach it too.
	}
	var delivery *warmDelivery
	var listAfter func() <-chan struct{}
	if !s.start.warm || s.opts.SyncedAtOpen {
		s.ready.caught.finish()
	}
	if s.start.warm {
		// One rule holds for resyncs after a warm start, for handlers
		// registered now and later (see SelectResyncingListeners).
		s.processor.SelectResyncingListeners()
		delivery = newWarmDelivery(s, s.processor.Listeners())
		s.start.delivery = delivery
		s.start.walk.Store(delivery)
		holdWalk(delivery, s.openCheckpoints())
		s.gate.verifyIndexes(delivery)
		end := delivery.end
		s.persistent.retryAfter(end)
		// The relist waits for end, not done, because a walk held back
		// must go on for a relist. A checkpoint's owed work may hold it
		// (checkpointhold.go), and that handler joins only once the
		// informer synced. A recovery that failed after its diff may hold
		// it too (walkRecoveryHolds, delivery.go). That hold lasts until a
		// list is applied.
		listAfter = delivery.end
	}
	var paged reflector.PagedList
	if !s.start.warm && s.persistent != nil && !s.gate.seeds.seeded {
		// A cold list is never held whole (pagedlist.go).
		s.start.paged = newPagedList(s, s.life.transform)
		paged = s.start.paged
	}
	// Set before the debt is read. An index build's set-aside that finds
	// begun unset leaves the list to this start (setaside.go).
	s.start.begun.Store(true)
	opts := s.listIfOwed(reflector.Options{
		ResumeResourceVersion: resume,
		ListAfter:             listAfter,
		CatchUp:               s.catchUp(),
		PagedList:             paged,
	})
	if opts.CatchUp != nil && s.matchesVersions(opts.ResumeResourceVersion) {
		s.ready.proof = newProofList()
	}
	store := s.reflectorStore(fifo)
	s.life.reflector = reflector.New(s.listerWatcher, store, s.reflectorOptions(store, opts))
	s.life.started = true
	return fifo, s.life.reflector, delivery
}

// newQueue returns the informer's queue. It is called under life.mu.
func (s *Informer) newQueue(logger klog.Logger) *cache.RealFIFO {
	// The queue always reports list resourceVersions (ReplacedAll) and
	// bookmarks, whatever the AtomicFIFO gate says. Without them the stored
	// resourceVersion would be the last object's, older than the list's.
	// Bookmarks would never advance it. A restart would then replay old
	// versions over newer ones. Handlers see the same calls either way.
	// The key function and the transform let recovery steps through
	// (recoverysteps.go).
	return cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		Logger:                &logger,
		Name:                  fmt.Sprintf("RealFIFO %T", s.objectType),
		KeyFunction:           queueKey,
		Transformer:           queueTransform(s.life.transform),
		Identifier:            s.opts.Identifier,
		MetricsProvider:       s.opts.InformerMetricsProvider,
		AtomicEvents:          true,
		UnlockWhileProcessing: clientgofeatures.FeatureGates().Enabled(clientgofeatures.AtomicFIFO) && clientgofeatures.FeatureGates().Enabled(clientgofeatures.UnlockWhileProcessingFIFO),
		EmitDeltaTypeBookmark: true,
	})
}

// pendingJoin is a handler whose join is not complete. It may be a
// checkpoint's handler registered before the informer started. Its
// tombstones are given when the informer starts (joinCheckpoints). It may
// also be any handler that joined while the store owed a list. Its join is
// completed once the list is applied (settleJoinsLocked). cps are the
// checkpoints whose tombstones it is given, if any.
type pendingJoin struct {
	l   *processor.Listener
	cps []*Checkpoint
	// told are the keys the handler was told of while its join waited for
	// the owed list (noteToldLocked). Their tombstones are stale for it.
	told map[string]struct{}
}

// joinCheckpoints gives the checkpoint handlers registered before the start
// their tombstones, the deletions they have not acknowledged. It gives them
// before any watch event is processed. The store may owe a list, when the
// collection was marked must-list. Then they are given once that list is
// applied. A key the store lacks until then may have been set aside rather
// than deleted.
func (s *Informer) joinCheckpoints() {
	s.life.mu.Lock()
	joins := s.life.checkpointJoins
	s.life.checkpointJoins = nil
	s.life.mu.Unlock()
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
// owed. It runs once the list is applied and its changes handed to every
// handler. Each handler is given its tombstones, now only of keys that are
// gone. Then it is given InitialAddsDone, after which its registration may
// report synced. It is called under blockDeltas, after each applied delta.
func (s *Informer) settleJoinsLocked() {
	s.retellLocked()
	if len(s.owedJoins) == 0 || s.gate.owes() {
		return
	}
	joins := s.owedJoins
	s.owedJoins = nil
	for _, j := range joins {
		only := []*processor.Listener{j.l} // Not if it was removed meanwhile.
		for _, n := range tombstoneNotifications(s.store, j.cps) {
			key := n.(processor.DeleteNotification).Obj.(cache.DeletedFinalStateUnknown).Key
			if _, told := j.told[key]; told {
				continue // It was given a newer state of the key, then its deletion.
			}
			s.processor.DistributeTo(only, n)
		}
		s.processor.DistributeTo(only, processor.InitialAddsDone{})
	}
}

// noteToldLocked notes that every handler but those in except is being
// told of obj's key. A checkpoint's tombstone of that key is then stale
// for a handler whose join waits for the owed list. The handler holds this
// newer state, or was told of this deletion. The tombstone's older state
// would go back in time. It is called under blockDeltas.
func (s *Informer) noteToldLocked(obj interface{}, except []*processor.Listener) {
	if len(s.owedJoins) == 0 {
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	for i := range s.owedJoins {
		j := &s.owedJoins[i]
		if len(j.cps) == 0 || slices.Contains(except, j.l) {
			continue
		}
		if j.told == nil {
			j.told = map[string]struct{}{}
		}
		j.told[key] = struct{}{}
	}
}

// walking reports whether a warm start's walk has not ended.
func (s *Informer) walking() bool {
	if s.start.delivery == nil {
		return false
	}
	select {
	case <-s.start.delivery.done:
		return false
	default:
		return true
	}
}

// relistAfterReadError deals with stored state that could not be read
// back during a warm start's delivery. The informer has synced, and
// handlers have part of the stored state. The delivery has set the rest
// aside (keepOnly). The reflector is replaced by one that lists (relist).
func (s *Informer) relistAfterReadError(ctx context.Context, err error, rl *relister) {
	s.report(ctx, fmt.Errorf("boltinformer: collection %q: reading the stored state back failed (%w); set aside what the handlers were not given, relisting", s.name, err))
	s.opts.Metrics.countReset(s.name, resetReadError)
	s.relist(ctx, rl, nil)
}

// relister replaces a running informer's reflector after stored state was
// set aside. The warm start's walk (relistAfterReadError) or an index build
// (runSetAsides) sets state aside.
type relister struct {
	mu     sync.Mutex // One replacement at a time, so one reflector runs.
	stop   func()     // Stops the running reflector and waits for it, guarded by mu.
	launch func(*reflector.Reflector) (stop func())
	fifo   *cache.RealFIFO
}

// relist stops the running reflector, and starts one that lists, from no
// older than what the stopped one applied, into the same queue. The list is
// reconciled with the store as any relist is. What was set aside arrives
// as adds, what changed as updates, and what is gone as deletions. Until it
// is applied, the store lacks what was set aside. listAfter, if not nil,
// holds the list's Replace back (reflector.Options.ListAfter).
func (s *Informer) relist(ctx context.Context, rl *relister, listAfter func() <-chan struct{}) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.stop()
	if ctx.Err() != nil {
		return
	}
	s.life.mu.Lock()
	applied := s.life.reflector.LastSyncResourceVersion()
	// If the informer has not caught up yet, the short watches after the
	// relist catch it up. The list may be older than the start's consistent
	// read.
	store := s.reflectorStore(rl.fifo)
	s.life.reflector = reflector.New(s.listerWatcher, store, s.reflectorOptions(store, reflector.Options{ListFrom: applied, CatchUp: s.catchUp(), ListAfter: listAfter}))
	refl := s.life.reflector
	s.life.mu.Unlock()
	rl.stop = rl.launch(refl)
}

// keepOnly removes from the collection every key handedOut says no handler
// was given. The relist that follows is thus reconciled with what handlers
// got. keepOnly marks the collection as owing a list in the same commit. A
// stop before the relist lands then lists at the next start. persist's
// must-list mark survives the events and bookmarks applied meanwhile.
//
// It holds the Indexer's writeMu from the first owe to the last. A
// recovery's end checks the generation and commits under writeMu too. So an
// end commits before the first owe, or finds a newer generation and commits
// nothing. An end that committed after its check passed would clear the mark
// and pay the debt. The store would then lack the keys set aside, and owe
// no list.
func (s *Informer) keepOnly(ctx context.Context, handedOut func(string) bool) error {
	return s.persistent.setAside(func() error {
		s.gate.owe() // Listers wait for the relist (readerror.go).
		keys, err := s.persistent.coll.Keys()
		if err != nil {
			// Not even the keys can be read, so drop everything. Handlers
			// then see the relist as adds and updates of what they got.
			if err := s.persistent.coll.SetAsideAll(ctx); err != nil {
				return err
			}
			s.gate.owe() // See below.
			s.retell.oweAll()
			return nil
		}
		var ops []persist.Op
		retell := map[string]struct{}{}
		for _, k := range keys {
			if !handedOut(k) {
				ops = append(ops, persist.Op{Key: k, Delete: true})
				retell[k] = struct{}{}
			}
		}
		if err := s.persistent.coll.SetAside(ops); err != nil {
			return err
		}
		// Make a new generation after the drop too. A recovery that took
		// its diff between the first owe and the drop saw the keys set
		// aside. Its end must not pay the list (applyRecoveryStepLocked).
		s.gate.owe()
		s.retell.owe(retell)
		return nil
	})
}

// releaseFilePages takes the file's pages, which a sync has just walked,
// out of the process's resident set when the object cache is bounded. Such
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
