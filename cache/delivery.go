package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/processor"
)

// warmDelivery hands a warm start's stored objects to the handlers that were
// registered before the informer started. It hands them out as
// OnAdd(obj, true), in the background. The informer reports synced and its
// listers serve the file before a single stored object is decoded. Each
// start handler's registration reports synced once the handler has handled
// all of its initial adds. processor.InitialAddsDone follows the last one.
//
// The walk goes through the collection in key order, a chunk at a time. It
// decodes on every core ahead of the chunk being handed out. Each object is
// decoded once, and the same object goes to every start handler. With an
// unbounded cache, it also stays the object listers return.
//
// Watch events are applied meanwhile. For each key the orderings client-go
// keeps still hold, because processLoop calls handOutBefore before applying
// a delta. A key the walk has not reached yet is handed out first, from the
// store. It is marked so the walk skips it. Hence three rules hold for
// every key.
//
//   - A start handler's initial add precedes every watch event for the key.
//   - The initial add carries the state the first update's old starts from.
//     A key not handed out has had no event applied, since any event hands
//     it out first. So its stored state is the one the file held at the
//     start.
//   - Each start handler gets the key's initial add exactly once. A handler
//     registered after the start gets none from here. It got the store's
//     state from its own late join.
//
// Before a chunk is handed out, its stored index entries are recomputed with
// the index functions. They are rewritten where they differ. An index
// function may have changed without its name or declared version changing.
// Index lookups through the informer's store wait for the whole walk
// (readGate).
//
// With a bounded object cache, the walk goes no faster than the start
// handlers take what it hands out (see pacer). The objects waiting in their
// buffers are decoded objects nothing else holds.
//
// The walk holds back (walkYield) while a recovery is under way, until the
// store is consistent again (walkRecoveryHolds). The recovery
// is then what the informer waits for. Decoding the whole collection would
// take the cores the recovery's reads need. Where the apiserver shares the
// machine, it would take the apiserver's cores too. A walk may have no
// start handlers. It then only verifies the stored index entries and, with
// an unbounded cache, fills the object cache. Such a walk also holds back
// for each checkpoint open at the start. It holds back until the
// checkpoint's late-joining handler has acknowledged what it was given
// (checkpointhold.go). Whatever waits for the walk's end makes it go on.
//
// The lock order is blockDeltas, then mu, then the store's locks. The walk
// never takes blockDeltas while holding mu. It waits for the handlers
// holding neither.
type warmDelivery struct {
	s         *Informer
	listeners []*processor.Listener
	pace      *pacer // Nil when unbounded, for no pacing.

	mu sync.Mutex
	// Every key up to and including reached has been handed out, or had no
	// stored state. Keys compare as bytes, the collection's order.
	reached string
	// ahead holds keys above reached handed out before the walk got there.
	ahead map[string]struct{}
	// finished says every stored key has been handed out. Nothing is
	// checked any more. Set under mu; read without it once done is closed,
	// after which it never changes.
	finished atomic.Bool
	handed   int
	// notGiven are stored keys the start handlers were never given. Such a
	// key is an event's key whose stored state could not be read. It may
	// also be a key set aside after the walk failed. notGivenCount mirrors
	// its size, read without mu.
	notGiven      map[string]struct{}
	notGivenCount atomic.Int32

	// done is closed when the walk ends. It ends when everything was handed
	// out, a read failure was dealt with, or the informer stopped. Wait for
	// it through end, which makes a held-back walk go on.
	done  chan struct{}
	yield walkYield
}

func newWarmDelivery(s *Informer, listeners []*processor.Listener) *warmDelivery {
	for _, l := range listeners {
		l.AwaitInitialAdds()
	}
	d := &warmDelivery{s: s, listeners: listeners, ahead: map[string]struct{}{}, done: make(chan struct{})}
	if s.boundedCache() {
		d.pace = newPacer()
	}
	return d
}

// handOutBefore hands out, ahead of the walk, the stored state of every key
// the deltas touch. Each start handler's initial add for a key thus
// precedes the event. A delta about every key waits for the walk to end
// instead. A resync of the whole store and a relist are such deltas.
// processLoop calls it under blockDeltas, before the deltas are applied.
//
// It returns false when the deltas must not be applied. That is when they
// are about every key, and the walk ended unfinished because the informer
// stopped.
// A start handler would be told of keys it was never given. The informer
// stops anyway, so dropping the deltas is as if it had stopped before them.
func (d *warmDelivery) handOutBefore(ctx context.Context, deltas []cache.Delta) bool {
	select {
	case <-d.done:
		if d.handedAll() {
			return true
		}
	default:
	}
	keys := make([]string, 0, len(deltas))
	for _, delta := range deltas {
		switch delta.Type {
		case cache.Bookmark:
			continue
		case cache.ReplacedAll, cache.SyncAll:
			select {
			case <-d.end():
				return d.handedAll()
			case <-ctx.Done():
				return false
			}
		}
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(delta.Object)
		if err != nil {
			continue // processDeltas reports it
		}
		keys = append(keys, key)
	}
	// After a stop the walk may have ended short of these keys. The store is
	// still open, and hands them out as before.
	d.handOut(ctx, keys)
	return true
}

// handedAll reports whether every stored key has been handed out. A walk
// ends without that when the informer stops.
func (d *warmDelivery) handedAll() bool { return d.finished.Load() }

// handOut hands the stored state of each of keys to the start handlers
// unless the walk or an earlier event already did. A batch of a recovery's
// changes is mostly keys the walk has not reached, so their stored objects
// are decoded together, on every core. A state that cannot be read is
// reported once mu is released, from another goroutine (reportLocked). The
// watch error handler is the user's code, and may call back into the
// informer.
func (d *warmDelivery) handOut(ctx context.Context, keys []string) {
	for _, u := range d.handOutReadable(keys) {
		err := d.s.persistent.reportReadError("GetByKey", u.err)
		// An add or update that follows replaces the unreadable state,
		// and handlers see it as an add. A deletion is kept from the
		// start handlers (lacking).
		d.s.reportLocked(ctx, fmt.Errorf("boltinformer: collection %q: reading %q to hand it to the handlers before its watch event: %w", d.s.name, u.key, err))
	}
}

// unreadKey is a key whose stored state handOutReadable could not read.
type unreadKey struct {
	key string
	err error
}

// handOutReadable is handOut under mu, which it takes. It reports nothing.
// It returns the keys whose stored state could not be read, which the
// start handlers were not given.
func (d *warmDelivery) handOutReadable(keys []string) []unreadKey {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.finished.Load() {
		return nil
	}
	var due []string
	for _, key := range keys {
		if key <= d.reached {
			continue
		}
		if _, ok := d.ahead[key]; ok {
			continue
		}
		d.ahead[key] = struct{}{}
		due = append(due, key)
	}
	if len(due) == 0 {
		return nil
	}
	// Not GetByKey, whose retry waits for the delivery to end.
	if objs, err := d.s.persistent.getManyOnce(due); err == nil {
		for _, obj := range objs {
			d.distribute(obj)
		}
		return nil
	}
	// Tell which keys cannot be read, and hand out the rest.
	var unread []unreadKey
	for _, key := range due {
		obj, exists, err := d.s.persistent.getUnreported(key)
		if err != nil {
			d.notGivenLocked(key)
			unread = append(unread, unreadKey{key, err})
			continue
		}
		if exists {
			d.distribute(obj)
		}
	}
	return unread
}

// given records that every handler has now been given key (an add or an
// update was distributed). Called under blockDeltas.
func (d *warmDelivery) given(key string) {
	if d.notGivenCount.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.notGiven, key)
	d.notGivenCount.Store(int32(len(d.notGiven)))
}

// notGivenLocked records that the start handlers were not given key.
// Called with mu held.
func (d *warmDelivery) notGivenLocked(key string) {
	if d.notGiven == nil {
		d.notGiven = map[string]struct{}{}
	}
	d.notGiven[key] = struct{}{}
	d.notGivenCount.Store(int32(len(d.notGiven)))
}

// lacking returns the start handlers that were never given key and must
// not be told of its deletion, and forgets the key. A checkpoint's
// handler is told anyway, since it may hold the key from an earlier run.
// It is called under blockDeltas.
func (d *warmDelivery) lacking(key string) []*processor.Listener {
	if d.notGivenCount.Load() == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.notGiven[key]; !ok {
		return nil
	}
	delete(d.notGiven, key)
	d.notGivenCount.Store(int32(len(d.notGiven)))
	var out []*processor.Listener
	for _, l := range d.listeners {
		if !l.SkipsInitialAdds() {
			out = append(out, l)
		}
	}
	return out
}

// distribute hands one stored object to the start handlers. Called with mu
// held.
func (d *warmDelivery) distribute(obj interface{}) {
	d.s.cacheMutationDetector.AddObject(obj)
	d.s.processor.DistributeTo(d.listeners, processor.AddNotification{Obj: obj, IsInInitialList: true})
	d.handed++
}

// walk hands out every stored object not handed out yet, in key order, and
// returns nil when it has. On a read error it returns the error, having
// handed out whole chunks only. On ctx's end it returns ctx's error.
func (d *warmDelivery) walk(ctx context.Context) error {
	if walkStarting != nil {
		walkStarting()
	}
	var keys []string
	var objs []runtime.Object
	var repaired []string
	flush := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		last := keys[len(keys)-1]
		n := 0
		for i, key := range keys {
			if _, ok := d.ahead[key]; ok {
				// Handed out before its event, which may have changed it since.
				delete(d.ahead, key)
				continue
			}
			keys[n], objs[n] = key, objs[i]
			n++
		}
		keys, objs = keys[:n], objs[:n]
		r, err := d.s.persistent.repairIndexes(keys, objs)
		if err != nil {
			return fmt.Errorf("verifying stored index entries: %w", err)
		}
		repaired = append(repaired, r...)
		for _, obj := range objs {
			d.distribute(obj)
		}
		d.reached = last
		keys, objs = keys[:0], objs[:0]
		return nil
	}
	err := d.s.persistent.coll.ForEach(func(key string, obj runtime.Object) error {
		keys, objs = append(keys, key), append(objs, obj)
		if len(keys) == deliverChunk {
			if err := flush(); err != nil {
				return err
			}
			d.pace.wait(ctx, d.listeners)
			d.yield.wait(ctx)
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if len(repaired) > 0 {
		klog.FromContext(ctx).Info("Stored index entries differed from the index functions' values; rewrote them before handing the objects out (declare IndexVersions when an index function changes)",
			"collection", d.s.name, "objects", len(repaired), "firstKey", repaired[0])
		d.s.opts.Metrics.countIndexRepairs(d.s.name, len(repaired))
	}
	return err
}

// finishLocked marks every stored key handed out and queues
// InitialAddsDone to the start handlers. Called with mu held.
func (d *warmDelivery) finishLocked() {
	d.finished.Store(true)
	d.ahead = nil
	d.s.processor.DistributeTo(d.listeners, processor.InitialAddsDone{})
}

// run walks the collection and ends the delivery. It returns the read error
// that stopped the walk, if any. Then, before the delivery ends, setAside is
// called with a predicate saying which keys were handed out. setAside must
// make the store hold no state the start handlers were not given. It runs
// with mu held, so no key is handed out meanwhile. It must not take
// blockDeltas.
func (d *warmDelivery) run(ctx context.Context, setAside func(ctx context.Context, handedOut func(key string) bool) error) error {
	defer close(d.done)
	start := time.Now()
	err := d.walk(ctx)
	if ctx.Err() != nil {
		return nil // Stopped, and the handlers stop too.
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		// The keys set aside were not given. A deletion of one is kept
		// from the start handlers (lacking).
		handedOut := func(key string) bool {
			if d.handedOutLocked(key) {
				return true
			}
			d.notGivenLocked(key)
			return false
		}
		if serr := setAside(ctx, handedOut); serr != nil {
			utilruntime.HandleErrorWithContext(ctx, serr, "Setting the unreadable part of the collection aside failed", "collection", d.s.name)
		}
	}
	d.finishLocked()
	klog.FromContext(ctx).V(2).Info("Handed the stored objects to the handlers", "collection", d.s.name, "objects", d.handed, "handlers", len(d.listeners), "duration", time.Since(start), "err", err)
	return err
}

// setAside runs drop, which sets aside the stored records that still do not
// decode (setaside.go). It returns the keys drop dropped and its error. It
// holds mu, so no key is handed out meanwhile. A dropped key not handed out
// yet is not given. A deletion of it is kept from the start handlers
// (lacking). A key kept was written since, and the walk or its event hands
// it out.
func (d *warmDelivery) setAside(drop func() ([]string, error)) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dropped, err := drop()
	for _, key := range dropped {
		if !d.handedOutLocked(key) {
			d.notGivenLocked(key)
		}
	}
	return dropped, err
}

// handedOutLocked reports whether key's stored state has been handed out.
// Called with mu held.
func (d *warmDelivery) handedOutLocked(key string) bool {
	if d.finished.Load() || key <= d.reached {
		return true
	}
	_, ok := d.ahead[key]
	return ok
}

// deliverChunk is how many stored objects the walk verifies and hands out
// at a time.
const deliverChunk = 256

// walkStarting and walkHeld are test hooks (export_test.go). walkStarting
// is called as a walk begins. walkHeld is called as it starts waiting for a
// recovery to end.
var walkStarting, walkHeld func()

// end returns the channel closed when the walk ends. Asking for it means
// waiting for it, so a walk held back for a recovery goes on from then.
func (d *warmDelivery) end() <-chan struct{} {
	d.yield.hurry()
	return d.done
}

// holdForRecovery holds the walk back until the returned function is
// called.
func (d *warmDelivery) holdForRecovery() (release func()) { return d.yield.hold() }

// walkYield holds a warm start's walk back between chunks while holds are
// taken. It does so until something waits for the walk's end (hurry). From
// then on it holds the walk back no more.
type walkYield struct {
	mu      sync.Mutex
	holds   int
	hurried bool
	// resume is closed when the walk may go on. It is nil while it may.
	resume chan struct{}
}

// hold holds the walk back until release is called (once).
func (y *walkYield) hold() (release func()) {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.holds++
	if y.resume == nil && !y.hurried {
		y.resume = make(chan struct{})
	}
	return sync.OnceFunc(func() {
		y.mu.Lock()
		defer y.mu.Unlock()
		if y.holds--; y.holds == 0 {
			y.goOnLocked()
		}
	})
}

// hurry ends every hold, now and later.
func (y *walkYield) hurry() {
	y.mu.Lock()
	defer y.mu.Unlock()
	y.hurried = true
	y.goOnLocked()
}

func (y *walkYield) goOnLocked() {
	if y.resume != nil {
		close(y.resume)
		y.resume = nil
	}
}

// wait returns once the walk may go on, or ctx ended.
func (y *walkYield) wait(ctx context.Context) {
	y.mu.Lock()
	resume := y.resume
	y.mu.Unlock()
	if resume == nil {
		return
	}
	if walkHeld != nil {
		walkHeld()
	}
	select {
	case <-resume:
	case <-ctx.Done():
	}
}

// walkRecoveryHolds holds a warm start's walk back from the
// moment a recovery begins until the store is consistent again: until the
// reflector is done with the recovery and the delta loop has applied
// everything it queued, its end included. Both the walk and the recovery
// decode objects, and on a machine with few cores (where the apiserver may
// share them) the walk's decoding on every core slowed the recovery's list,
// and then the delta loop applying what it fetched: the informer, which
// waits for the recovery, synced later (at 100,000 Pods, 30% changed, 1.3×
// a cold start instead of 1.0×). The handlers' initial adds come after the
// recovery instead of beside it, which costs them time where much changed
// (docs/benchmarks-history.md at 43fbeb4, "the walk waits for the
// recovery"). A recovery's keys are still handed out ahead of the walk as
// they change, and whatever waits for the walk's end makes it go on at once.
//
// A recovery that fails after its diff leaves the store inconsistent, and
// the walk held, until a later recovery or list is applied; the reflector
// retries meanwhile, and a list waits for the walk, which makes it go on.
type walkRecoveryHolds struct {
	mu sync.Mutex
	// waiting are the holds of recoveries the reflector is done with,
	// released once the store is consistent.
	waiting []func()
}

// take is recovery.Hooks.Started: it holds d's walk back and returns what the
// reflector calls when the recovery is over, which releases the hold now
// if the store is consistent (recovering unset: the recovery failed before
// its diff, or its end is applied) and otherwise once it is.
func (h *walkRecoveryHolds) take(d *warmDelivery, recovering *atomic.Bool) (ended func()) {
	release := d.holdForRecovery()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !recovering.Load() {
			release()
			return
		}
		h.waiting = append(h.waiting, release)
	}
}

// consistent clears recovering and releases the holds waiting for it.
func (h *walkRecoveryHolds) consistent(recovering *atomic.Bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	recovering.Store(false)
	for _, release := range h.waiting {
		release()
	}
	h.waiting = nil
}
