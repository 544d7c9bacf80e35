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
//   - tools/cache/reflector.go
// The ports are listed in hack/upstream-versions.txt.

package reflector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// watchWithResync runs the watch loop on the calling goroutine and
// startResync on one helper goroutine, as client-go's does. It cancels and waits for the helper before returning, so no goroutine
// outlives the call.
func (r *Reflector) watchWithResync(ctx context.Context) error {
	// Buffered so startResync can report and exit even if the watch loop
	// has already stopped reading.
	resyncErrC := make(chan error, 1)
	resyncCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() { r.startResync(resyncCtx, resyncErrC) })
	return r.watch(ctx, resyncErrC)
}

// startResync asks shouldResync every resyncPeriod and calls Store.Resync,
// as client-go's does. A Resync error is sent on errC and
// ends the goroutine. The watch loop then ends the watch, which makes the
// next ListAndWatch relist.
func (r *Reflector) startResync(ctx context.Context, errC chan<- error) {
	if r.resyncPeriod == 0 {
		return
	}
	logger := klog.FromContext(ctx)
	for {
		// A fresh timer per period is stopped on every exit path, as in
		// client-go's resyncChan cleanup. Failing watches must not pile up
		// timers.
		t := r.clock.NewTimer(r.resyncPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if r.shouldResync == nil || r.shouldResync() {
			logger.V(4).Info("Forcing resync", "reflector", r.name)
			if err := r.store.Resync(); err != nil {
				errC <- fmt.Errorf("%w: Resync: %w", ErrStore, err)
				return
			}
		}
	}
}

// watch starts a watch at LastSyncResourceVersion and feeds events to the
// Store, as client-go's (*Reflector).watch does. It re-watches when the
// watch closes or times out, until ctx is done.
//
// client-go gives up and relists at the first failure. That is any
// watch-start error other than connection refused or 429, any in-stream
// error other than 429, or a very short watch. This loop reports the
// error, backs off and watches once more from LastSyncResourceVersion. It
// relists at the second failure in a row (see watchFailed). While catching
// up, it also relists when the catch-up calls for it. It returns nil to
// relist then, and when the server says that version is expired or too
// large. It returns an ErrStore error when Store.Resync failed.
func (r *Reflector) watch(ctx context.Context, resyncErrC <-chan error) error {
	logger := klog.FromContext(ctx)
	// backedOff says this watch follows a backoff wait after a failed one.
	// If it finds its resourceVersion gone before any event, the relist
	// follows at once (listAtOnce). That wait was the jittered one that
	// spreads the relists of clients that all lost their watches together,
	// as in an apiserver restart. client-go
	// waits once more before its relist. After an outage's
	// connection-refused retries have grown the interval, that is seconds
	// more.
	backedOff := false
	for {
		if ctx.Err() != nil {
			return nil
		}
		// Start the clock before the request, because some proxies do not
		// flush headers until the first event.
		start := r.clock.Now()
		rv := r.LastSyncResourceVersion()
		timeoutSeconds := r.watchTimeoutSeconds()
		// While the store catches up (CatchUp), watches are short, so the
		// apiserver's pre-timeout bookmark arrives within about a second.
		short := r.catchingUp()
		if short {
			timeoutSeconds = int64(r.catchUpTimeout / time.Second)
		}
		options := metav1.ListOptions{
			ResourceVersion: rv,
			// Stop watches that hang without events, at a random time to
			// spread load.
			TimeoutSeconds: &timeoutSeconds,
			// Bookmarks keep rv fresh on quiet collections, so a restart can
			// resume instead of getting 410. Servers may ignore the flag.
			AllowWatchBookmarks: true,
		}
		// A watch at "" or "0" begins with synthetic ADDED events in no
		// particular rv order. Their rvs must not be recorded until a
		// non-ADDED event proves the initial burst is over.
		propagateRVFromStart := rv != "" && rv != "0"
		resumed := r.resumedWatch
		r.resumedWatch = false
		waited := backedOff
		backedOff = false

		w, err := r.lw.WatchWithContext(ctx, options)
		if err == nil && w == nil {
			err = errors.New("ListerWatcher returned neither a watch nor an error")
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = &watchStartError{context: fmt.Sprintf("%s: start at resourceVersion %q", r.typeDescription, rv), cause: err}
			r.errorHandler(ctx, err)
			if isResourceVersionUnavailable(err) || isInvalidResourceVersionError(err) {
				r.requestRelist(err)
				r.listAtOnce = resumed || waited
				return nil
			}
			if r.watchFailed(ctx, err, short, false) {
				return nil
			}
			if !r.sleep(ctx) {
				return nil
			}
			backedOff = true
			continue
		}

		r.listInFull = false
		if r.relisted != nil && r.relisted.WatchStarted != nil {
			r.relisted.WatchStarted()
		}
		r.observer.WatchStarted(rv)
		var deadline <-chan time.Time
		stopDeadline := func() bool { return false }
		var reading sync.WaitGroup
		readCtx, cancelRead := context.WithCancel(ctx)
		if short {
			t := r.clock.NewTimer(r.catchUpTimeout + catchUpGrace)
			deadline, stopDeadline = t.C(), t.Stop
			// The read must follow the watch's start (see CatchUp).
			reading.Go(func() { r.catchUpRead(readCtx) })
		}
		events, err := r.handleWatch(ctx, start, w, resyncErrC, propagateRVFromStart, deadline)
		stopDeadline()
		cancelRead()
		reading.Wait()
		switch {
		case err == nil:
			// Closed or timed out normally, so re-watch at once without
			// backoff.
			r.observer.WatchEnded(nil)
			r.watchFailures = 0
			if short && r.shortWatchEnded(false) {
				logger.V(2).Info("Short watches did not catch the store up to the consistent read, relisting", "reflector", r.name, "type", r.typeDescription, "shortWatches", r.shortWatches)
				r.markResourceVersionUnavailable(CauseRelistCatchUp)
				return nil
			}
			continue
		case errors.Is(err, errStopRequested):
			r.observer.WatchEnded(nil)
			return nil
		case errors.Is(err, ErrStore):
			// Store.Resync failed, and client-go relists after this too.
			r.observer.WatchEnded(err)
			return err
		}
		r.observer.WatchEnded(err)
		r.errorHandler(ctx, err)
		if isResourceVersionUnavailable(err) {
			logger.V(4).Info("Watched resourceVersion is unavailable, relisting", "reflector", r.name, "type", r.typeDescription, "resourceVersion", r.LastSyncResourceVersion())
			r.requestRelist(err)
			r.listAtOnce = (resumed || waited) && events == 0
			return nil
		}
		if r.watchFailed(ctx, err, short, events > 0) {
			return nil
		}
		if !r.sleep(ctx) {
			return nil
		}
		backedOff = true
	}
}

// watchFailed counts a watch that could not be started or ended with an
// error. An unavailable resourceVersion is not counted, since it relists at
// once. It reports whether the reflector should stop watching and relist.
// delivered says the watch handed at least one event to the Store before
// it failed. Such a watch worked, so it ends a run of failures instead of
// adding to it.
//
// Connection refused and 429 are not counted, as client-go retries them
// without relisting. The server is unreachable or shedding load, and a list
// would fare no better. Any other failure is retried once. The second in a
// row relists at LastSyncResourceVersion (CauseRelistError). client-go
// relists after the first. While catching up, a failure also counts as one
// of CatchUp.MaxWatches. Either bound then relists at ""
// (CauseRelistCatchUp), which settles the catch-up.
func (r *Reflector) watchFailed(ctx context.Context, err error, short, delivered bool) bool {
	if isRetriableWatchError(err) {
		return false
	}
	if delivered {
		// It worked until it failed, so it is not one of a run of failures.
		r.watchFailures = 0
	} else {
		r.watchFailures++
	}
	logger := klog.FromContext(ctx)
	if short && r.catchingUp() {
		if !r.shortWatchEnded(true) {
			return false
		}
		logger.V(2).Info("Watches failed while catching up, relisting", "reflector", r.name, "type", r.typeDescription, "shortWatches", r.shortWatches, "failuresInARow", r.watchFailures, "err", err)
		r.markResourceVersionUnavailable(CauseRelistCatchUp)
		return true
	}
	if r.watchFailures < watchFailuresBeforeRelist {
		return false
	}
	logger.V(2).Info("Watch failed again, relisting", "reflector", r.name, "type", r.typeDescription, "failuresInARow", r.watchFailures, "err", err)
	r.requestRelistAfterWatchFailures()
	return true
}

// handleWatch mirrors client-go's handleAnyWatch, without the watch-list
// bookmark handling. It applies events from w to the Store and records
// their resourceVersions. It goes on until w closes, ctx is done
// (errStopRequested), the resync goroutine reports an error, or an ERROR
// event arrives. It always stops w.
//
// A value on deadline ends the watch as if the server had closed it. It
// comes when the server has not closed a short CatchUp watch in time.
// events counts the events handed to the Store, not the skipped ones.
func (r *Reflector) handleWatch(ctx context.Context, start time.Time, w watch.Interface, resyncErrC <-chan error, propagateRVFromStart bool, deadline <-chan time.Time) (events int, err error) {
	defer w.Stop()
	eventReceivedBesidesAdded := false
	store := r.store
	var writes <-chan func() error
	if r.relisted != nil {
		store = cmp.Or[Store](r.relisted.Store, store)
		writes = r.relisted.Writes
	}
	for {
		var event watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return events, errStopRequested
		case err := <-resyncErrC:
			return events, err
		case <-deadline:
			klog.FromContext(ctx).V(4).Info("Short watch outlived its timeout, stopping it", "reflector", r.name, "type", r.typeDescription, "totalItems", events)
			return events, nil
		case write := <-writes:
			// A Relister's write is ordered with the events (relist.go).
			if err := write(); err != nil {
				r.errorHandler(ctx, fmt.Errorf("%w: %w", ErrStore, err))
			}
			continue
		case event, ok = <-w.ResultChan():
		}
		if !ok {
			return events, r.watchClosed(ctx, start, events)
		}
		if event.Type == watch.Error {
			return events, fmt.Errorf("%w: %s: %w", ErrWatch, r.typeDescription, apierrors.FromObject(event.Object))
		}
		if err := r.checkObject(event.Object); err != nil {
			r.errorHandler(ctx, err)
			continue
		}
		accessor, err := meta.Accessor(event.Object)
		if err != nil {
			r.errorHandler(ctx, fmt.Errorf("%w: %s: unable to understand watch event %s %T: %w", ErrUnexpectedObject, r.name, event.Type, event.Object, err))
			continue
		}
		resourceVersion := accessor.GetResourceVersion()
		switch event.Type {
		case watch.Added:
			err = store.Add(event.Object)
		case watch.Modified:
			eventReceivedBesidesAdded = true
			err = store.Update(event.Object)
		case watch.Deleted:
			eventReceivedBesidesAdded = true
			err = store.Delete(event.Object)
		case watch.Bookmark:
			// The watch has synced to resourceVersion; nothing changed.
			eventReceivedBesidesAdded = true
			err = store.Bookmark(resourceVersion)
		default:
			r.errorHandler(ctx, fmt.Errorf("%w: %s: unknown watch event type %q", ErrUnexpectedObject, r.name, event.Type))
		}
		if err != nil {
			r.errorHandler(ctx, fmt.Errorf("%w: %s %s at resourceVersion %q: %w", ErrStore, event.Type, klog.KObj(accessor), resourceVersion, err))
		}
		// As in client-go, the rv advances even when the Store failed or the
		// event type was unknown. The event was consumed either way.
		if propagateRVFromStart || eventReceivedBesidesAdded {
			r.setLastSyncResourceVersion(resourceVersion)
			if rvu, ok := r.store.(cache.ResourceVersionUpdater); ok {
				rvu.UpdateResourceVersion(resourceVersion)
			}
		}
		events++
	}
}

// watchClosed classifies a result channel closed by the server. A close
// is normal after a timeout, or when the server ended the watch. A watch
// that lasted under a second without delivering anything is client-go's
// VeryShortWatchError. That usually means a broken server or proxy, which
// must not become a hot loop.
func (r *Reflector) watchClosed(ctx context.Context, start time.Time, eventCount int) error {
	if r.clock.Since(start) < time.Second && eventCount == 0 {
		return fmt.Errorf("%w: %s: unexpected watch close - watch lasted less than a second and no items received", ErrWatch, r.name)
	}
	klog.FromContext(ctx).V(4).Info("Watch close", "reflector", r.name, "type", r.typeDescription, "totalItems", eventCount)
	return nil
}

// checkObject mirrors client-go's per-event type, GVK and Table checks.
func (r *Reflector) checkObject(obj runtime.Object) error {
	if r.expectedType != nil {
		if e, a := r.expectedType, reflect.TypeOf(obj); e != a {
			return fmt.Errorf("%w: %s: expected type %v, but watch event object had type %v", ErrUnexpectedObject, r.name, e, a)
		}
	}
	if r.expectedGVK != nil {
		if _, ok := obj.(runtime.Unstructured); ok {
			if e, a := *r.expectedGVK, obj.GetObjectKind().GroupVersionKind(); e != a {
				return fmt.Errorf("%w: %s: expected gvk %v, but watch event object had gvk %v", ErrUnexpectedObject, r.name, e, a)
			}
		}
	}
	if isUnsupportedTableObject(obj) {
		return fmt.Errorf("%w: %s: unsupported watch event object gvk %v", ErrUnexpectedObject, r.name, obj.GetObjectKind().GroupVersionKind())
	}
	return nil
}
