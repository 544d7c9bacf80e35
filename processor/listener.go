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
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/cache/synctrack"
	"k8s.io/klog/v2"
	"k8s.io/utils/buffer"
	utiltrace "k8s.io/utils/trace"
)

// InitialBufferSize is the initial capacity of a listener's ring buffer, and
// the backlog above which slow handler calls are traced (client-go's value).
const InitialBufferSize = 1024

// Listener relays notifications from a Processor to one handler. It uses
// three goroutines, two unbuffered channels and an unbounded ring buffer.
// Add sends to addCh. pop pumps addCh into nextCh through the buffer while
// nextCh is not keeping up. run receives from nextCh and calls the handler.
// watchSynced waits for the upstream to sync and tells the sync tracker.
//
// A *Listener is the registration that AddEventHandler returns. It
// implements cache.ResourceEventHandlerRegistration.
type Listener struct {
	logger      klog.Logger
	nextCh      chan interface{}
	addCh       chan interface{}
	done        chan struct{} // closed by pop when it exits: stops watchSynced
	runFinished chan struct{} // closed by run when it exits

	handler     cache.ResourceEventHandler
	handlerName string

	syncTracker       *synctrack.SingleFileTracker
	upstreamHasSynced cache.DoneChecker
	skipInitialAdd    func(obj interface{}) bool
	skipRelisted      func(obj interface{}) bool

	// pending holds notifications not yet handed to run. Only pop touches it.
	pending buffer.TypedRingGrowing[any]
	// pendingLen mirrors pending's length for readers outside pop.
	pendingLen atomic.Int64

	// requestedResyncPeriod is what the handler asked for, after the
	// minimumResyncPeriod bound. resyncPeriod is what applies. It is zero
	// when the informer does not resync.
	requestedResyncPeriod time.Duration

	// resyncLock guards resyncPeriod and nextResync.
	resyncLock   sync.Mutex
	resyncPeriod time.Duration
	nextResync   time.Time
}

var _ cache.ResourceEventHandlerRegistration = (*Listener)(nil)

// ListenerOptions configures NewListener.
type ListenerOptions struct {
	// Logger logs the handler's panics and slow calls. The zero value means
	// klog.Background().
	Logger klog.Logger

	// RequestedResyncPeriod is the resync period the handler asked for,
	// after the informer's minimum is applied. ResyncPeriod is the one that
	// applies. It is zero when the informer does not resync (see
	// DetermineResyncPeriod). Zero means no resyncs.
	RequestedResyncPeriod time.Duration
	ResyncPeriod          time.Duration

	// Now is the time the first resync is counted from. The zero value
	// means time.Now().
	Now time.Time

	// BufferSize is the initial capacity of the notification buffer, which
	// grows without bound. Zero means InitialBufferSize.
	BufferSize int

	// UpstreamHasSynced is the informer's own sync signal. The listener has
	// synced once the informer has and the handler has handled every
	// initial-list add. Required.
	UpstreamHasSynced cache.DoneChecker

	// SkipInitialAdd, if set, is asked about every initial-list add as it
	// is queued. True drops the add, so the handler never gets it and
	// HasSynced does not wait for it. Add runs it synchronously, before any
	// later change to the object is applied. So it may consult state that
	// such a change would clear, such as a checkpoint's acknowledgements.
	SkipInitialAdd func(obj interface{}) bool

	// SkipRelistedUnchanged, if set, is asked about the new object of every
	// update marked RelistedUnchanged, as SkipInitialAdd is. True drops the
	// update. Resyncs are not asked about.
	SkipRelistedUnchanged func(obj interface{}) bool
}

// NewListener returns a listener that relays notifications to handler. It
// panics if opts.UpstreamHasSynced is nil.
func NewListener(handler cache.ResourceEventHandler, opts ListenerOptions) *Listener {
	if opts.UpstreamHasSynced == nil {
		panic("processor.NewListener: ListenerOptions.UpstreamHasSynced is nil")
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = InitialBufferSize
	}
	name := nameForHandler(handler)
	l := &Listener{
		logger:                opts.Logger,
		nextCh:                make(chan interface{}),
		addCh:                 make(chan interface{}),
		done:                  make(chan struct{}),
		runFinished:           make(chan struct{}),
		upstreamHasSynced:     opts.UpstreamHasSynced,
		skipInitialAdd:        opts.SkipInitialAdd,
		skipRelisted:          opts.SkipRelistedUnchanged,
		handler:               handler,
		handlerName:           name,
		syncTracker:           synctrack.NewSingleFileTracker(fmt.Sprintf("%s + event handler %s", opts.UpstreamHasSynced.Name(), name)),
		pending:               *buffer.NewTypedRingGrowing[any](buffer.RingGrowingOptions{InitialSize: opts.BufferSize}),
		requestedResyncPeriod: opts.RequestedResyncPeriod,
		resyncPeriod:          opts.ResyncPeriod,
	}
	l.determineNextResync(opts.Now)
	return l
}

// HasSynced reports whether the informer has synced and this handler has
// handled every initial-list add it was given.
func (l *Listener) HasSynced() bool { return l.syncTracker.HasSynced() }

// SkipsInitialAdds reports whether the listener's initial adds are
// filtered (ListenerOptions.SkipInitialAdd). Such a handler keeps its own
// record of what it was given, a checkpoint.
func (l *Listener) SkipsInitialAdds() bool { return l.skipInitialAdd != nil }

// HasSyncedChecker is the DoneChecker form of HasSynced.
func (l *Listener) HasSyncedChecker() cache.DoneChecker { return l.syncTracker }

// ShutdownChan is closed once the handler will not be called again (for
// cache.ShutDownEventHandler).
func (l *Listener) ShutdownChan() <-chan struct{} { return l.runFinished }

// HandlerName is the handler's name as used in logs and metrics.
func (l *Listener) HandlerName() string { return l.handlerName }

// Pending returns the number of notifications waiting in the buffer.
func (l *Listener) Pending() int64 { return l.pendingLen.Load() }

// AwaitInitialAdds tells the listener that initial adds will be queued
// after the informer has synced, followed by InitialAddsDone. A warm start
// hands out its stored state that way, in the background. Until the handler has
// reached that InitialAddsDone, HasSynced is false. It must be called before
// the informer syncs.
func (l *Listener) AwaitInitialAdds() { l.syncTracker.Start() }

// Add queues a notification. It blocks until pop takes it, so callers must
// only call it while the listener runs (the Processor guarantees that).
func (l *Listener) Add(notification interface{}) {
	if a, ok := notification.(AddNotification); ok && a.IsInInitialList {
		if l.skipInitialAdd != nil && l.skipInitialAdd(a.Obj) {
			return
		}
		l.syncTracker.Start()
	}
	if u, ok := notification.(UpdateNotification); ok && u.RelistedUnchanged && l.skipRelisted != nil && l.skipRelisted(u.New) {
		return
	}
	l.addCh <- notification
}

func (l *Listener) pop() {
	defer utilruntime.HandleCrashWithLogger(l.logger)
	defer close(l.nextCh) // Tell run to stop.
	defer close(l.done)   // Tell watchSynced to stop.

	var nextCh chan<- interface{}
	var notification interface{}
	for {
		select {
		case nextCh <- notification:
			var ok bool
			notification, ok = l.pending.ReadOne()
			if ok {
				l.pendingLen.Add(-1)
			} else {
				nextCh = nil // Nothing to hand over: disable this case.
			}
		case add, ok := <-l.addCh:
			if !ok {
				return
			}
			if notification == nil {
				// Nothing waiting: skip the buffer.
				notification = add
				nextCh = l.nextCh
			} else {
				l.pending.WriteOne(add)
				l.pendingLen.Add(1)
			}
		}
	}
}

func (l *Listener) run() {
	defer close(l.runFinished)
	// HandleCrash catches a panic in a handler and re-panics by default. If
	// utilruntime is configured not to crash, the notification is skipped.
	// The next one is attempted after a second.
	sleepAfterCrash := false
	for next := range l.nextCh {
		if sleepAfterCrash {
			time.Sleep(time.Second)
		}
		func() {
			sleepAfterCrash = true // Reset below unless the handler panics.
			defer utilruntime.HandleCrashWithLogger(l.logger)
			if pending := l.pendingLen.Load(); pending > InitialBufferSize {
				trace := utiltrace.New("processorListener handler",
					utiltrace.Field{Key: "handler", Value: l.handlerName},
					utiltrace.Field{Key: "pendingNotifications", Value: pending})
				defer trace.LogIfLong(100 * time.Millisecond)
			}
			switch n := next.(type) {
			case UpdateNotification:
				l.handler.OnUpdate(n.Old, n.New)
			case AddNotification:
				l.handler.OnAdd(n.Obj, n.IsInInitialList)
				if n.IsInInitialList {
					l.syncTracker.Finished()
				}
			case DeleteNotification:
				l.handler.OnDelete(n.Obj)
			case InitialAddsDone:
				l.syncTracker.Finished()
			default:
				utilruntime.HandleErrorWithLogger(l.logger, nil, "unrecognized notification", "notificationType", fmt.Sprintf("%T", next))
			}
			sleepAfterCrash = false
		}()
	}
}

func (l *Listener) watchSynced() {
	select {
	case <-l.upstreamHasSynced.Done():
		l.syncTracker.UpstreamHasSynced()
	case <-l.done:
		// Stopped before the upstream synced.
	}
}

func (l *Listener) shouldResync(now time.Time) bool {
	l.resyncLock.Lock()
	defer l.resyncLock.Unlock()
	if l.resyncPeriod == 0 {
		return false
	}
	return !now.Before(l.nextResync)
}

func (l *Listener) determineNextResync(now time.Time) {
	l.resyncLock.Lock()
	defer l.resyncLock.Unlock()
	l.nextResync = now.Add(l.resyncPeriod)
}

func (l *Listener) setResyncPeriod(resyncPeriod time.Duration) {
	l.resyncLock.Lock()
	defer l.resyncLock.Unlock()
	l.resyncPeriod = resyncPeriod
}

// hasResyncPeriod reports whether the listener gets periodic resyncs.
func (l *Listener) hasResyncPeriod() bool {
	l.resyncLock.Lock()
	defer l.resyncLock.Unlock()
	return l.resyncPeriod > 0
}
