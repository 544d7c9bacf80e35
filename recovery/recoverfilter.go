package recovery

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/reflector"
)

// The forward rule of a recovery (recover.go): every write that reaches the
// store while a recovery is under way, a watch event or a fetched object,
// passes recoveryFilter, which hands it on only if it moves its key forward,
// and ends the recovery once the store is consistent.

// writeLocked hands obj to the store as the key's new state, applying the
// forward rule; it reports whether it did. fromWatch: a watch event.
func (rec *recovery) writeLocked(key string, t watch.EventType, obj interface{}, fromWatch bool) (bool, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, rec.r.store.Add(obj) // let the store report it
	}
	n, ok := rec.version(m.GetResourceVersion())
	st := rec.keys[key]
	if fromWatch {
		delete(rec.awaitWatch, key)
		delete(rec.pending, key) // the event is newer than the list
	}
	next := rec.r.store
	if !ok {
		// Not an integer: nothing to compare. Pass it on as it is.
		switch t {
		case watch.Added:
			return true, next.Add(obj)
		case watch.Deleted:
			return true, next.Delete(obj)
		}
		return true, next.Update(obj)
	}
	if st != nil && n <= st.rv {
		rec.stats.Skipped++
		return false, nil
	}
	if t == watch.Deleted {
		rec.keys[key] = &keyState{rv: n, gone: true}
		if st != nil && st.gone {
			// The store does not hold it: its handlers never saw it.
			return true, nil
		}
		return true, next.Delete(obj)
	}
	rec.keys[key] = &keyState{uid: m.GetUID(), rv: n, obj: obj}
	switch {
	case st == nil:
		if t == watch.Added {
			return true, next.Add(obj)
		}
		return true, next.Update(obj)
	case st.gone:
		return true, next.Add(obj)
	case st.uid != "" && m.GetUID() != "" && st.uid != m.GetUID():
		// Another object under the same name: the old one is gone.
		old := st.obj
		if old == nil {
			var exists bool
			if old, exists, err = rec.r.store.Stored(key); err != nil || !exists {
				old = nil
			}
		}
		if err := next.Delete(cache.DeletedFinalStateUnknown{Key: key, Obj: old}); err != nil {
			return true, err
		}
		return true, next.Add(obj)
	}
	return true, next.Update(obj)
}

// watchedLocked advances the watch's position.
func (rec *recovery) watchedLocked(rv string) {
	if n, ok := rec.version(rv); ok && n > rec.watchN {
		rec.watchN, rec.watchRV = n, rv
	}
}

// fetchedLocked applies the result of fetching key: obj, or nil if the
// server no longer has it (in the informer's selection).
func (rec *recovery) fetchedLocked(key string, obj runtime.Object) error {
	if rec.done {
		return nil
	}
	if _, ok := rec.pending[key]; !ok {
		return nil // a watch event came first; it is newer than the list
	}
	delete(rec.pending, key)
	var err error
	if obj == nil {
		// Deleted (or out of the selection) after the list: the watch
		// delivers that deletion (an event for the key would have resolved
		// it already).
		rec.awaitWatch[key] = struct{}{}
	} else {
		var wrote bool
		if wrote, err = rec.writeLocked(key, watch.Modified, obj, false); wrote {
			rec.stats.Fetched++
		}
		if m, aerr := meta.Accessor(obj); aerr == nil {
			if n, ok := rec.version(m.GetResourceVersion()); ok {
				rec.mark = max(rec.mark, n)
			}
		}
	}
	rec.checkDoneLocked()
	return err
}

// checkDoneLocked ends the recovery once the store is consistent: nothing
// left to fetch, every deletion a fetch found seen on the watch, and the
// watch past every fetched resourceVersion. EndRecovery is a store write,
// ordered with the others under the locks; the callbacks are owed until
// they are released.
func (rec *recovery) checkDoneLocked() {
	if rec.done || len(rec.pending) > 0 || len(rec.awaitWatch) > 0 || rec.watchN < rec.mark {
		return
	}
	rec.done = true
	r := rec.r
	r.filter.deactivateLocked(rec)
	if err := r.store.EndRecovery(rec.watchRV); err != nil {
		rec.oweErrorLocked(fmt.Errorf("%w: ending a recovery at resourceVersion %q: %w", reflector.ErrStore, rec.watchRV, err))
	}
	rec.stats.Duration = r.l.Clock().Since(rec.began)
	rv, stats := rec.watchRV, rec.stats
	rec.owed = append(rec.owed, func() {
		rec.ended()
		klog.FromContext(rec.ctx).V(2).Info("Recovered", "reflector", r.l.Name(), "type", r.l.TypeDescription(),
			"resourceVersion", rv, "requests", stats.Requests, "fetched", stats.Fetched,
			"skipped", stats.Skipped, "duration", stats.Duration)
		if o, ok := r.l.Observer().(RecoveryObserver); ok {
			o.Recovered(rec.cause, rv, stats)
		}
	})
}

// oweErrorLocked owes the error handler err, to be called once the locks
// are released.
func (rec *recovery) oweErrorLocked(err error) {
	ctx := rec.ctx
	rec.owed = append(rec.owed, func() { rec.r.l.Report(ctx, err) })
}

// recoveryFilter is the reflector's Store while recoveries are set up: it
// passes every write through, except that during a recovery watch events
// go through the recovery's forward rule.
type recoveryFilter struct {
	next RecoveryStore
	r    *Recoverer

	// mu guards rec and is held while a write passes: recovery writes and
	// watch events reach next in the order they took it.
	mu  sync.Mutex
	rec *recovery // nil: no recovery under way
}

var _ reflector.Store = (*recoveryFilter)(nil)

func (f *recoveryFilter) activate(rec *recovery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rec = rec
}

// deactivate takes rec out of the way if it still is.
func (f *recoveryFilter) deactivate(rec *recovery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deactivateLocked(rec)
}

func (f *recoveryFilter) deactivateLocked(rec *recovery) {
	if f.rec == rec {
		f.rec = nil
	}
}

// lock takes f.mu and, if a recovery is under way, its mu; unlock releases
// them, then makes the calls the recovery owes (recovery.owed). Lock order:
// f.mu, then recovery.mu.
func (f *recoveryFilter) lock() *recovery {
	f.mu.Lock()
	rec := f.rec
	if rec != nil {
		rec.mu.Lock()
	}
	return rec
}

func (f *recoveryFilter) unlock(rec *recovery) {
	var owed []func()
	if rec != nil {
		owed, rec.owed = rec.owed, nil
		rec.mu.Unlock()
	}
	f.mu.Unlock()
	for _, call := range owed {
		call()
	}
}

func (f *recoveryFilter) event(t watch.EventType, obj interface{}) error {
	rec := f.lock()
	defer f.unlock(rec)
	if rec == nil {
		switch t {
		case watch.Added:
			return f.next.Add(obj)
		case watch.Deleted:
			return f.next.Delete(obj)
		}
		return f.next.Update(obj)
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return f.next.Add(obj) // the store reports it
	}
	_, err = rec.writeLocked(key, t, obj, true)
	if m, aerr := meta.Accessor(obj); aerr == nil {
		rec.watchedLocked(m.GetResourceVersion())
	}
	rec.checkDoneLocked()
	return err
}

// Add implements Store.
func (f *recoveryFilter) Add(obj interface{}) error { return f.event(watch.Added, obj) }

// Update implements Store.
func (f *recoveryFilter) Update(obj interface{}) error { return f.event(watch.Modified, obj) }

// Delete implements Store.
func (f *recoveryFilter) Delete(obj interface{}) error { return f.event(watch.Deleted, obj) }

// Bookmark implements Store.
func (f *recoveryFilter) Bookmark(resourceVersion string) error {
	rec := f.lock()
	defer f.unlock(rec)
	err := f.next.Bookmark(resourceVersion)
	if rec != nil {
		rec.watchedLocked(resourceVersion)
		rec.checkDoneLocked()
	}
	return err
}

// Replace implements Store.
func (f *recoveryFilter) Replace(list []interface{}, resourceVersion string) error {
	return f.next.Replace(list, resourceVersion)
}

// Resync implements Store.
func (f *recoveryFilter) Resync() error { return f.next.Resync() }

// watchOpened tells a recovery under way that a watch was accepted.
func (f *recoveryFilter) watchOpened() {
	f.mu.Lock()
	rec := f.rec
	f.mu.Unlock()
	if rec != nil {
		rec.watchOpened()
	}
}
