package recovery

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/boltinformer/boltinformer/reflector"
)

// The forward rule of a recovery governs every write that reaches the store
// while the recovery is under way. A watch event or a fetched object is
// handed on only if it moves its key forward. The rule's state is owned by
// the reflector's goroutine, which makes every such write. The watch's
// events come to the recovery as the watch's Store. Fetched objects come as
// the watch loop's Writes (reflector.Relisted). So no lock orders them.

// write hands obj to the store as the key's new state, applying the
// forward rule. It reports whether it did. fromWatch marks a watch event.
func (rec *attempt) write(key string, t watch.EventType, obj interface{}, fromWatch bool) (bool, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, rec.r.store.Add(obj) // let the store report it
	}
	n, ok := rec.version(m.GetResourceVersion())
	st := rec.keys[key]
	if fromWatch {
		delete(rec.awaitWatch, key)
		rec.resolve(key) // the event is newer than the list
	}
	next := rec.r.store
	if !ok {
		// Not an integer, so nothing to compare. Pass it on as it is.
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
			// The store does not hold it, so its handlers never saw it.
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
		// Another object under the same name means the old one is gone.
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

// watched advances the watch's position.
func (rec *attempt) watched(rv string) {
	if n, ok := rec.version(rv); ok && n > rec.watchN {
		rec.watchN, rec.watchRV = n, rv
	}
}

// fetched applies the result of fetching key. obj is nil if the server no
// longer has it in the informer's selection.
func (rec *attempt) fetched(key string, obj runtime.Object) error {
	if rec.done {
		return nil
	}
	if _, ok := rec.pending[key]; !ok {
		return nil // a watch event came first, and it is newer than the list
	}
	rec.resolve(key)
	var err error
	if obj == nil {
		// The object was deleted or left the selection after the list. The
		// watch delivers that deletion. An event for the key would have
		// resolved it already.
		rec.awaitWatch[key] = struct{}{}
	} else {
		var wrote bool
		if wrote, err = rec.write(key, watch.Modified, obj, false); wrote {
			rec.stats.Fetched++
		}
		if m, aerr := meta.Accessor(obj); aerr == nil {
			if n, ok := rec.version(m.GetResourceVersion()); ok {
				rec.mark = max(rec.mark, n)
			}
		}
	}
	rec.checkDone()
	return err
}

// resolve takes key off the keys to fetch.
func (rec *attempt) resolve(key string) {
	if _, ok := rec.pending[key]; ok {
		delete(rec.pending, key)
		rec.resolved.Store(key, struct{}{})
	}
}

// checkDone ends the recovery once the store is consistent. Then nothing is
// left to fetch, and every deletion a fetch found was seen on the watch. The
// watch has passed every fetched resourceVersion too. End is a store write,
// made in order with the others on the reflector's goroutine.
func (rec *attempt) checkDone() {
	if rec.done || len(rec.pending) > 0 || len(rec.awaitWatch) > 0 || rec.watchN < rec.mark {
		return
	}
	rec.done = true
	rec.over.Store(true)
	r := rec.r
	if err := r.store.End(rec.watchRV); err != nil {
		r.l.Report(rec.ctx, fmt.Errorf("%w: ending a recovery at resourceVersion %q: %w", reflector.ErrStore, rec.watchRV, err))
	}
	rec.stats.Duration = r.l.Clock().Since(rec.began)
	rec.stats.Requests = int(rec.requests.Load())
	rec.stats.Decoded += int(rec.decoded.Load())
	rv, stats := rec.watchRV, rec.stats
	rec.ended()
	klog.FromContext(rec.ctx).V(2).Info("Recovered", "reflector", r.l.Name(), "type", r.l.TypeDescription(),
		"resourceVersion", rv, "requests", stats.Requests, "fetched", stats.Fetched,
		"skipped", stats.Skipped, "duration", stats.Duration)
	if o, ok := r.l.Observer().(Observer); ok {
		o.Recovered(rec.cause, rv, stats)
	}
}

// event hands a watch event on, through the forward rule until the
// recovery is done.
func (rec *attempt) event(t watch.EventType, obj interface{}) error {
	next := rec.r.store
	if rec.done {
		switch t {
		case watch.Added:
			return next.Add(obj)
		case watch.Deleted:
			return next.Delete(obj)
		}
		return next.Update(obj)
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return next.Add(obj) // the store reports it
	}
	_, err = rec.write(key, t, obj, true)
	if m, aerr := meta.Accessor(obj); aerr == nil {
		rec.watched(m.GetResourceVersion())
	}
	rec.checkDone()
	return err
}

// The recovery is the watch's Store while it goes on (reflector.Relisted).
var _ reflector.Store = (*attempt)(nil)

// Add implements reflector.Store.
func (rec *attempt) Add(obj interface{}) error { return rec.event(watch.Added, obj) }

// Update implements reflector.Store.
func (rec *attempt) Update(obj interface{}) error { return rec.event(watch.Modified, obj) }

// Delete implements reflector.Store.
func (rec *attempt) Delete(obj interface{}) error { return rec.event(watch.Deleted, obj) }

// Bookmark implements reflector.Store.
func (rec *attempt) Bookmark(resourceVersion string) error {
	err := rec.r.store.Bookmark(resourceVersion)
	if !rec.done {
		rec.watched(resourceVersion)
		rec.checkDone()
	}
	return err
}

// Replace implements reflector.Store.
func (rec *attempt) Replace(list []interface{}, resourceVersion string) error {
	return rec.r.store.Replace(list, resourceVersion)
}

// Resync implements reflector.Store.
func (rec *attempt) Resync() error { return rec.r.store.Resync() }
