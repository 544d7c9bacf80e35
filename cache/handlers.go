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
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/boltinformer/boltinformer/processor"
)

// Handler registration works as client-go's sharedIndexInformer does it.
// This file also registers the checkpoint handlers
// (AddEventHandlerWithTombstones). A handler added to a running informer joins late, with the store's
// state as its initial adds. It joins under blockDeltas, so no delta falls
// between.

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
// the handler the tombstones of the given checkpoints once it has joined.
// Tombstones are deletions of acknowledged objects that are not acknowledged
// yet. The handler gets them as cache.DeletedFinalStateUnknown. It is for
// adapters, such as the controller-runtime one, whose framework itself
// registers the handlers a checkpoint's consumer depends on. The framework
// registers them after the informer started. A handler registered so would
// otherwise never see a deletion applied before it joined.
func (s *Informer) AddEventHandlerWithTombstones(handler cache.ResourceEventHandler, options cache.HandlerOptions, cps ...*Checkpoint) (cache.ResourceEventHandlerRegistration, error) {
	return s.addEventHandler(handler, options, nil, cps)
}

// addEventHandler is AddEventHandlerWithOptions. skip, if set, is the
// checkpoint whose acknowledged initial adds the listener drops (see
// processor.ListenerOptions.SkipInitialAdd). The tombstones of tombstones
// are given as deletions when the handler joins (see Checkpoint).
func (s *Informer) addEventHandler(handler cache.ResourceEventHandler, options cache.HandlerOptions, skip *Checkpoint, tombstones []*Checkpoint) (cache.ResourceEventHandlerRegistration, error) {
	var skipInitialAdd, skipRelisted func(interface{}) bool
	if skip != nil {
		skipInitialAdd, skipRelisted = skip.skip, skip.skipRelisted
	}
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	if s.life.stopped {
		return nil, fmt.Errorf("handler %v was not added to shared informer because it has stopped already", handler)
	}
	logger := ptr.Deref(options.Logger, klog.Background())
	resyncPeriod := ptr.Deref(options.ResyncPeriod, s.resync.handlerDefault)
	if resyncPeriod > 0 {
		if resyncPeriod < processor.MinimumResyncPeriod {
			logger.Info("Warning: resync period is too small. Changing it to the minimum allowed value", "resyncPeriod", resyncPeriod, "minimumResyncPeriod", processor.MinimumResyncPeriod)
			resyncPeriod = processor.MinimumResyncPeriod
		}
		if resyncPeriod < s.resync.check {
			if s.life.started {
				logger.Info("Warning: resync period is smaller than resync check period and the informer has already started. Changing it to the resync check period", "resyncPeriod", resyncPeriod, "resyncCheckPeriod", s.resync.check)
				resyncPeriod = s.resync.check
			} else {
				s.resync.check = resyncPeriod
				s.processor.ResyncCheckPeriodChanged(logger, resyncPeriod)
			}
		}
	}
	listener := processor.NewListener(handler, processor.ListenerOptions{Logger: logger, RequestedResyncPeriod: resyncPeriod, ResyncPeriod: processor.DetermineResyncPeriod(logger, resyncPeriod, s.resync.check), Now: s.clock.Now(), UpstreamHasSynced: s.HasSyncedChecker(), SkipInitialAdd: skipInitialAdd, SkipRelistedUnchanged: skipRelisted})
	if len(tombstones) > 0 {
		s.retell.addJoin(pendingJoin{l: listener, cps: tombstones})
	}
	if !s.life.started {
		// The processor may already run, since RunWithContext starts it
		// before it marks the informer started. Then it will not start this
		// listener's sync watcher itself. No initial adds are due yet.
		if s.processor.AddListener(listener) {
			s.processor.StartWatchSynced(listener)
		}
		if len(tombstones) > 0 {
			s.life.checkpointJoins = append(s.life.checkpointJoins, pendingJoin{l: listener, cps: tombstones})
		}
		return listener, nil
	}
	// To join safely, we 1. stop deltas, 2. list the store, 3. queue
	// synthetic initial adds for the new handler, and 4. unblock. Nothing
	// here waits for the server, as in client-go. The list the store may
	// owe (readerror.go) can only be applied by the delta loop this holds
	// up. While one is owed, the handler's initial adds are what the store
	// holds. What was set aside reaches the handler through that list, as
	// it reaches every handler. The handler's tombstones and its sync wait
	// for the list (settleJoinsLocked). Until then a key the store lacks may
	// be set aside rather than deleted.
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	started := s.processor.AddListener(listener)
	owed := s.gate.owes()
	if owed {
		listener.AwaitInitialAdds()
	}
	walking := s.walking() // Before the read, since the walk may end during it.
	items, unacknowledged := s.joinList(skip)
	for _, item := range items {
		// Queued under the lock and before the handle is returned, so its
		// HasSynced can never be true before these adds are handled.
		listener.Add(processor.AddNotification{Obj: item, IsInInitialList: true})
	}
	if skip != nil {
		skip.walk.Load().join(owedKeys(items, tombstones), unacknowledged)
		if unacknowledged && walking {
			s.retell.noteWalkJoin(listener, items)
		}
	}
	if !owed && s.gate.owes() {
		// A warm start's delivery set state aside while the store was
		// read, since it does not take blockDeltas. The read saw it wholly
		// before or after.
		owed = true
		listener.AwaitInitialAdds()
	}
	if owed {
		s.owedJoins = append(s.owedJoins, pendingJoin{l: listener, cps: tombstones})
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

// RemoveEventHandler implements cache.SharedInformer.
func (s *Informer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	s.life.mu.Lock()
	defer s.life.mu.Unlock()
	s.blockDeltas.Lock()
	defer s.blockDeltas.Unlock()
	return s.processor.RemoveListener(handle)
}
