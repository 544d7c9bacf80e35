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
	// DefaultCatchUpWatchTimeout is the shortest watch that still gets the
	// apiserver's pre-timeout bookmark. The watch cache (k8s.io/apiserver
	// pkg/storage/cacher, cacheWatcher.nextBookmarkTime) schedules a
	// bookmark 2 s before a watch's deadline, in 1-second buckets; with
	// timeoutSeconds=2 that time has passed before the watcher is
	// registered. The bookmark carries the newest resourceVersion the watch
	// cache has processed, and is sent only if that is newer than where the
	// watch started — which the consistent read taken after the watch
	// opened (see CatchUp) makes it, even on a resource nothing writes to.
	// Measured against kube-apiserver v1.37.2
	// (e2e.TestCatchUpWatchGetsBookmark): a 3-second watch got it 0.8–1.8 s
	// after it opened.
	DefaultCatchUpWatchTimeout = 3 * time.Second
	// DefaultCatchUpWatches is how many short watches may close without
	// catching up before the reflector relists instead.
	DefaultCatchUpWatches = 5
	// catchUpGrace is how long past its timeout a short watch may stay
	// open before the reflector stops it itself: a server or proxy that
	// ignores timeoutSeconds must not hold the catch-up forever.
	catchUpGrace = 2 * time.Second
	// catchUpReadInterval spaces the consistent reads of a short watch.
	catchUpReadInterval = 500 * time.Millisecond
)

// CatchUp makes a reflector bring its store up to date with the server
// quickly, without a full list. The caller (an informer that wants
// "synced" to mean what it means in client-go: the store reflects a read
// made at or after start) is told the resourceVersion of a consistent read
// and closes Done once its store has applied that version.
//
// Until Done is closed, every watch is short (WatchTimeout), and once the
// server has accepted it the reflector takes a consistent read — a list
// with limit=1 at resourceVersion "" through the ListerWatcher, returning
// at most one object. The order matters. The apiserver's watch cache
// delivers everything the watch must catch up on as soon as the watch
// opens, but tells the client where it stands only with a bookmark, which
// it sends near the watch's deadline and only with a resourceVersion newer
// than the watch's start. The read, taken after the watch opened, brings
// the watch cache up to the newest revision in etcd (the apiserver serves
// consistent reads from its cache once it has caught up), so that bookmark
// comes at or past the read's resourceVersion about a second after the
// watch opened — on a resource nothing writes to as on a busy one.
//
// The read is repeated every half second while the watch lasts: the
// bookmark needs a revision newer than the watch's start, so etcd must have
// been written to (anywhere) after the watch opened, and each read brings
// the watch cache to what etcd has by then.
//
// If MaxWatches short watches have ended and Done is still open (the
// server sends no bookmarks: watch cache disabled, an aggregated apiserver;
// or etcd saw no write at all since the watch opened), the reflector
// relists with a consistent read at "" (cause CauseRelistCatchUp), which is
// at or after the read's version: catching up never waits on the server
// indefinitely. A watch that could not be started or ended with an error
// counts as one of those watches, and a second such failure in a row
// relists at once: a watch the server refuses (RBAC that grants list but
// not watch answers 403), a broken proxy that ends every watch within a
// second, would otherwise never let the store catch up. The failures
// client-go retries without relisting — connection refused, 429 — do not
// count: while the server cannot be reached or sheds load, a list could not
// be made either.
//
// A consistent list (at "") made while catching up is itself a read made
// after the start: if no consistent read has succeeded yet (the limit=1
// reads keep failing, or no watch opened to take one after), Target gets
// the list's resourceVersion, so the store has caught up once it applies
// the list, as a client-go informer is synced after its first list. The
// relist above is at "", at or past any read taken before it. After it the
// reflector stops catching up — its watches are ordinary ones, as after
// Done, even while the store is still applying the list — so catching up
// adds at most one full list, never a list every few watches. A list at
// the stored version (a relist after a 410, or a recovery's) is never a
// target. It asks for data not older than that version, which a watch
// cache behind etcd serves at its own position, older than the server at
// the start may be. The short watches then go on, within the same
// MaxWatches, and their reads give the target.
//
// A consistent list made before the relist that reports it
// (Relist.ListedEarlier, such as an informer's list taken at its start)
// is a read made after the start, but perhaps before the reads. It gives
// Target its version, and settles the catch-up, only if no read has given
// a target yet. Otherwise it may be older than the target, and the short
// watches go on. The reflector never compares resourceVersions: only the
// order in which the reads and lists were made tells which is newer.
type CatchUp struct {
	// Target, if set, is called once, with the resourceVersion of the first
	// consistent read that succeeds, or of the first consistent list (at
	// "") if that comes first (before the list reaches Store.Replace). Reads that fail are
	// reported to the WatchErrorHandler (ErrList) and taken again with the
	// next short watch. Nil: the caller knows its target; the reads are
	// still taken, to bring the watch cache forward.
	Target func(resourceVersion string)
	// Done is closed by the caller once its store has caught up. Required.
	Done <-chan struct{}
	// WatchTimeout is the timeoutSeconds of each watch while Done is open.
	// Zero: DefaultCatchUpWatchTimeout. Shorter watches get no bookmark
	// from the apiserver.
	WatchTimeout time.Duration
	// MaxWatches is how many short watches may end (closed, failed to
	// start or ended with an error) before the reflector relists. Zero:
	// DefaultCatchUpWatches.
	MaxWatches int
}

// catchingUp reports whether watches should still be short: the caller
// has not caught up, and no list has settled the catch-up.
func (r *Reflector) catchingUp() bool {
	if r.catchUp == nil || r.catchUpSettled {
		return false
	}
	select {
	case <-r.catchUp.Done:
		return false
	default:
		return true
	}
}

// catchUpListed is called by a list that succeeded while catching up, with
// the resourceVersion it listed at and the one it returned, before the list
// reaches Store.Replace. Only a consistent list (at "") counts. Made now, it
// is a read made after the start, at or past any read Target got before. If
// no consistent read has reached Target yet, its version does, and the
// catch-up is settled: no more short watches or reads. A list at a given
// version (after a 410, or for a list the store owes) may be served by a
// watch cache that lags the server's state at the start, so the short
// watches go on.
//
// A consistent list made earlier (Relist.ListedEarlier) may predate the
// reads. It settles the catch-up only if its version is the one Target
// got, because no read had given one before it. Reads run only beside a
// watch, never during a list, so none can race with this.
func (r *Reflector) catchUpListed(listedAt, resourceVersion string, earlier bool) {
	if listedAt != "" {
		return
	}
	handed := false
	if r.catchUp.Target != nil {
		r.catchUpTarget.Do(func() {
			r.catchUp.Target(resourceVersion)
			handed = true
		})
	}
	if handed || !earlier {
		r.catchUpSettled = true
	}
}

// catchUpRead takes the consistent reads of a short watch that the server
// has accepted, until ctx ends (the watch did) or the store has caught up,
// and hands the first successful one's resourceVersion to CatchUp.Target.
// It runs beside handleWatch, which must go on consuming the watch.
//
// The first read follows the watch's start at once. The watch cache's
// bookmark must carry a revision newer than that start, and the first read
// brings the cache only to the revision etcd has then, which is the same if
// nothing was written anywhere in between; so the read is repeated every
// catchUpReadInterval while the watch lasts, each bringing the cache to
// whatever etcd has by then (in a live cluster, leases alone move it several
// times a second). Each read is one request returning at most one object.
func (r *Reflector) catchUpRead(ctx context.Context) {
	for {
		list, err := r.lw.ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "", Limit: 1})
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.errorHandler(ctx, fmt.Errorf("%w: %s: the consistent read (limit=1) the store catches up to: %w", ErrList, r.typeDescription, err))
			}
			return
		case r.catchUp.Target != nil:
			acc, err := meta.ListAccessor(list)
			if err != nil {
				r.errorHandler(ctx, fmt.Errorf("%w: %s: the consistent read's resourceVersion: %w", ErrList, r.typeDescription, err))
				return
			}
			r.catchUpTarget.Do(func() { r.catchUp.Target(acc.GetResourceVersion()) })
		}
		t := r.clock.NewTimer(catchUpReadInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.catchUp.Done:
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// shortWatchEnded is called when a short watch closed normally, or could
// not be started or ended with an error (failed), while the store had not
// caught up. It returns true if the reflector should relist instead of
// watching again.
func (r *Reflector) shortWatchEnded(failed bool) bool {
	if !r.catchingUp() {
		return false
	}
	r.shortWatches++
	return r.shortWatches >= r.catchUpWatches || (failed && r.watchFailures >= watchFailuresBeforeRelist)
}
