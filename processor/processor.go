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

package processor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// MinimumResyncPeriod is the smallest resync period a handler may ask for.
const MinimumResyncPeriod = 1 * time.Second

// Processor holds the listeners of one informer and distributes
// notifications to them.
type Processor struct {
	clock clock.Clock
	wg    wait.Group

	// listenersLock guards the fields below. distribute holds it for
	// reading while it blocks on listeners' Add, so adding or removing a
	// listener waits for the notification in flight to be handed over.
	listenersLock    sync.RWMutex
	listenersRCond   *sync.Cond // Wait requires listenersLock held for reading.
	listenersStarted bool
	// listeners maps each listener to whether it is due for the current resync.
	listeners map[*Listener]bool
	// selective is set by SelectResyncingListeners. From then on, a new
	// listener is due only if it has a resync period.
	selective bool
}

// New returns a Processor that reads time from clk.
func New(clk clock.Clock) *Processor {
	p := &Processor{clock: clk}
	p.listenersRCond = sync.NewCond(p.listenersLock.RLocker())
	return p
}

// AddListener registers l. If the processor runs, it starts l's pop and run
// goroutines and reports true. It does not start l's watchSynced. The caller
// first hands l its initial adds, then calls StartWatchSynced.
func (p *Processor) AddListener(l *Listener) (started bool) {
	p.listenersLock.Lock()
	defer p.listenersLock.Unlock()
	if p.listeners == nil {
		p.listeners = make(map[*Listener]bool)
	}
	p.listeners[l] = !p.selective || l.hasResyncPeriod()
	if p.listenersStarted {
		p.wg.Start(l.run)
		p.wg.Start(l.pop)
	}
	return p.listenersStarted
}

// StartWatchSynced starts l's watchSynced goroutine (for a listener added
// while the processor runs, once its initial adds are queued).
func (p *Processor) StartWatchSynced(l *Listener) {
	p.wg.Start(l.watchSynced)
}

// RemoveListener unregisters the listener behind handle and stops it. An
// unknown handle is ignored, as in client-go.
func (p *Processor) RemoveListener(handle cache.ResourceEventHandlerRegistration) error {
	p.listenersLock.Lock()
	defer p.listenersLock.Unlock()
	l, ok := handle.(*Listener)
	if !ok {
		return fmt.Errorf("invalid key type %T", handle)
	}
	if p.listeners == nil {
		return nil
	}
	if _, exists := p.listeners[l]; !exists {
		return nil
	}
	delete(p.listeners, l)
	if p.listenersStarted {
		close(l.addCh) // Tell pop to stop; pop tells run.
	} else {
		close(l.runFinished)
	}
	return nil
}

// Listeners returns the registered listeners (for metrics).
func (p *Processor) Listeners() []*Listener {
	p.listenersLock.RLock()
	defer p.listenersLock.RUnlock()
	out := make([]*Listener, 0, len(p.listeners))
	for l := range p.listeners {
		out = append(out, l)
	}
	return out
}

// Distribute sends notification to every listener, or, when sync is true, to
// the listeners due for the current resync.
func (p *Processor) Distribute(notification interface{}, sync bool) {
	p.listenersLock.RLock()
	defer p.listenersLock.RUnlock()
	// Wait for listeners to run before blocking on their channels. If the
	// processor stops, listeners is cleared and we return.
	for !p.listenersStarted && len(p.listeners) > 0 {
		p.listenersRCond.Wait()
	}
	for l, isSyncing := range p.listeners {
		if !sync || isSyncing {
			l.Add(notification)
		}
	}
}

// Run starts every listener, waits for ctx to end, then stops them and
// returns once all their goroutines have exited.
func (p *Processor) Run(ctx context.Context) {
	func() {
		p.listenersLock.Lock()
		defer p.listenersLock.Unlock()
		for l := range p.listeners {
			p.wg.Start(l.watchSynced)
			p.wg.Start(l.run)
			p.wg.Start(l.pop)
		}
		p.listenersStarted = true
		// Wake every waiter. A warm start's delivery and the queue may both
		// be distributing already.
		p.listenersRCond.Broadcast()
	}()
	<-ctx.Done()

	p.listenersLock.Lock()
	defer p.listenersLock.Unlock()
	for l := range p.listeners {
		close(l.addCh) // Tell pop to stop; pop tells run.
	}
	// Listeners cannot be reused.
	p.listeners = nil
	p.listenersStarted = false
	p.listenersRCond.Broadcast() // Wake every distributor waiting for a start.
	p.wg.Wait()
}

// AnySyncing reports whether a notification distributed with sync set
// (a resync, or a relist's unchanged object) would reach any listener.
func (p *Processor) AnySyncing() bool {
	p.listenersLock.RLock()
	defer p.listenersLock.RUnlock()
	for _, isSyncing := range p.listeners {
		if isSyncing {
			return true
		}
	}
	return false
}

// ShouldResync marks the listeners due for a resync, schedules their next
// one, and reports whether any is due.
func (p *Processor) ShouldResync() bool {
	p.listenersLock.Lock()
	defer p.listenersLock.Unlock()
	resyncNeeded := false
	now := p.clock.Now()
	for l := range p.listeners {
		due := l.shouldResync(now)
		p.listeners[l] = due
		if due {
			resyncNeeded = true
			l.determineNextResync(now)
		}
	}
	return resyncNeeded
}

// SelectResyncingListeners marks exactly the listeners with a resync period
// as due for resync notifications, until the next ShouldResync. A listener
// added later is due only if it has a resync period too.
//
// client-go marks every new listener due, and only its periodic resync
// check narrows that down. So a relist before the first check sends
// unchanged objects to every handler. A warm-started informer calls this
// before it resumes. The relist that follows a 410 then sends unchanged
// objects only to handlers that asked for resyncs.
func (p *Processor) SelectResyncingListeners() {
	p.listenersLock.Lock()
	defer p.listenersLock.Unlock()
	p.selective = true
	for l := range p.listeners {
		p.listeners[l] = l.hasResyncPeriod()
	}
}

// DistributeExcept is Distribute (not a resync) to every listener except
// those in except. It lets a warm start keep a key's deletion from handlers
// that were never given the key.
func (p *Processor) DistributeExcept(except []*Listener, notification interface{}) {
	p.listenersLock.RLock()
	defer p.listenersLock.RUnlock()
	for !p.listenersStarted && len(p.listeners) > 0 {
		p.listenersRCond.Wait()
	}
	for l := range p.listeners {
		if !slices.Contains(except, l) {
			l.Add(notification)
		}
	}
}

// DistributeTo is Distribute (not a resync) to those of listeners that are
// still registered. A warm start hands the stored state to the listeners
// registered before it began. Listeners that join meanwhile get that state
// through their own synthetic initial adds.
func (p *Processor) DistributeTo(listeners []*Listener, notification interface{}) {
	p.listenersLock.RLock()
	defer p.listenersLock.RUnlock()
	for !p.listenersStarted && len(p.listeners) > 0 {
		p.listenersRCond.Wait()
	}
	for _, l := range listeners {
		if _, ok := p.listeners[l]; ok {
			l.Add(notification)
		}
	}
}

// ResyncCheckPeriodChanged re-derives every listener's resync period from a
// new check period.
func (p *Processor) ResyncCheckPeriodChanged(logger klog.Logger, resyncCheckPeriod time.Duration) {
	p.listenersLock.RLock()
	defer p.listenersLock.RUnlock()
	for l := range p.listeners {
		l.setResyncPeriod(DetermineResyncPeriod(logger, l.requestedResyncPeriod, resyncCheckPeriod))
	}
}

// DetermineResyncPeriod returns the resync period that applies to a handler
// asking for desired on an informer that checks every check. It is zero if
// either is zero, and otherwise at least check.
func DetermineResyncPeriod(logger klog.Logger, desired, check time.Duration) time.Duration {
	if desired == 0 {
		return desired
	}
	if check == 0 {
		logger.Info("Warning: the specified resyncPeriod is invalid because this shared informer doesn't support resyncing", "desired", desired)
		return 0
	}
	if desired < check {
		logger.Info("Warning: the specified resyncPeriod is being increased to the minimum resyncCheckPeriod", "desired", desired, "resyncCheckPeriod", check)
		return check
	}
	return desired
}
