package reflector

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults for CatchUp.
const (
	// DefaultCatchUpWatchTimeout is a watch short enough that the
	// apiserver's pre-timeout bookmark comes soon, long enough that it comes
	// at all. The watch cache (k8s.io/apiserver pkg/storage/cacher,
	// cacheWatcher.nextBookmarkTime) schedules a bookmark 2 s before a
	// watch's deadline, in 1-second buckets, carrying the newest
	// resourceVersion it has processed. Measured on kube-apiserver v1.37.2
	// (e2e/bookmark_timing_test.go): 10-second watches got that bookmark
	// 7.5–8.6 s after they opened, every time; 9-second watches mostly did;
	// 3- and 5-second watches never did.
	DefaultCatchUpWatchTimeout = 10 * time.Second
	// DefaultCatchUpWatches is how many short watches may close without
	// catching up before the reflector relists instead.
	DefaultCatchUpWatches = 3
	// catchUpGrace is how long past its timeout a short watch may stay
	// open before the reflector stops it itself: a server or proxy that
	// ignores timeoutSeconds must not hold the catch-up forever.
	catchUpGrace = 2 * time.Second
)

// CatchUp makes a resuming reflector bring its store up to date with the
// server quickly, without a full list. The caller (an informer that wants
// "synced" to mean what it means in client-go: the store reflects a read
// made at or after start) is told the resourceVersion of a consistent read
// and closes Done once its store has applied that version; until then the
// reflector's watches are short, so that even on a resource nothing writes
// to, the apiserver's pre-timeout bookmark carries the watch to the read's
// version about 8 seconds after it opens (instead of with the next
// once-a-minute bookmark, or near the end of a 5-to-10-minute watch).
//
// If a short watch closes without a single bookmark (the server does not
// send them: watch cache disabled, an aggregated apiserver), or MaxWatches
// short watches have closed and Done is still open (the server's watch
// cache lags behind the read), the reflector relists with a consistent
// read at "" (cause CauseRelistCatchUp), which is at or after the read's
// version: catching up never waits on the server indefinitely.
type CatchUp struct {
	// Target, if set, is called once, before the reflector's first list or
	// watch, with the resourceVersion of a consistent read: a list with
	// limit=1 at resourceVersion "" through the ListerWatcher, returning at
	// most one object. While the read fails, ListAndWatch returns the error
	// (ErrList) and Run retries it with backoff; nothing is listed or
	// watched meanwhile. Nil: no read (the caller knows its target).
	Target func(resourceVersion string)
	// Done is closed by the caller once its store has caught up. Required.
	Done <-chan struct{}
	// WatchTimeout is the timeoutSeconds of each watch while Done is open.
	// Zero: DefaultCatchUpWatchTimeout. Shorter watches may get no bookmark
	// from the apiserver (see DefaultCatchUpWatchTimeout).
	WatchTimeout time.Duration
	// MaxWatches is how many short watches may close, each with at least
	// one bookmark, before the reflector relists. Zero:
	// DefaultCatchUpWatches.
	MaxWatches int
}

// catchingUp reports whether watches should still be short.
func (r *Reflector) catchingUp() bool {
	if r.catchUp == nil {
		return false
	}
	select {
	case <-r.catchUp.Done:
		return false
	default:
		return true
	}
}

// takeCatchUpRead takes the consistent read before the first list or
// watch, once. An error leaves everything pending (the resume included), so
// the next ListAndWatch tries the read again.
func (r *Reflector) takeCatchUpRead(ctx context.Context) error {
	if r.catchUp == nil || r.catchUp.Target == nil || r.catchUpRead {
		return nil
	}
	list, err := r.lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "", Limit: 1})
	if err != nil {
		return fmt.Errorf("%w: %s: the consistent read (limit=1) a resumed watch catches up to: %w", ErrList, r.typeDescription, err)
	}
	acc, err := meta.ListAccessor(list)
	if err != nil {
		return fmt.Errorf("%w: %s: the consistent read's resourceVersion: %w", ErrList, r.typeDescription, err)
	}
	r.catchUpRead = true
	r.catchUp.Target(acc.GetResourceVersion())
	return nil
}

// shortWatchClosed is called when a short watch closed normally while the
// store had not caught up; bookmarks is how many it delivered. It returns
// true if the reflector should relist instead of watching again.
func (r *Reflector) shortWatchClosed(bookmarks int) bool {
	if !r.catchingUp() {
		return false
	}
	r.shortWatches++
	return bookmarks == 0 || r.shortWatches >= r.catchUpWatches
}
