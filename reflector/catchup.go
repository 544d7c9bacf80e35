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
	// apiserver's pre-timeout bookmark. The watch cache schedules that
	// bookmark 2 s before a watch's deadline, in 1-second buckets (see
	// cacheWatcher.nextBookmarkTime in k8s.io/apiserver pkg/storage/cacher).
	// With timeoutSeconds=2 that time has passed before the watcher is
	// registered. The bookmark carries the newest resourceVersion the watch
	// cache has processed, and is sent only if that is newer than where the
	// watch started. The consistent read taken after the watch opened makes
	// it newer, even on a resource nothing writes to (see CatchUp).
	// e2e.TestCatchUpWatchGetsBookmark checks that a 3-second watch gets it
	// from kube-apiserver v1.37.2.
	DefaultCatchUpWatchTimeout = 3 * time.Second
	// DefaultCatchUpWatches is how many short watches may close without
	// catching up before the reflector relists instead.
	DefaultCatchUpWatches = 5
	// catchUpGrace is how long a short watch may stay open past its timeout
	// before the reflector stops it. A server or proxy that ignores
	// timeoutSeconds must not hold the catch-up forever.
	catchUpGrace = 2 * time.Second
	// catchUpReadInterval spaces the consistent reads of a short watch.
	catchUpReadInterval = 500 * time.Millisecond
)

// CatchUp makes a reflector bring its store up to date with the server
// quickly, without a full list. The caller is an informer that wants
// "synced" to mean what it means in client-go: the store reflects a read
// made at or after start. The caller is told the resourceVersion of a
// consistent read, and closes Done once its store has applied that version.
//
// Until Done is closed, every watch is short (WatchTimeout). Once the
// server has accepted a watch, the reflector takes a consistent read. That
// is a list with limit=1 at resourceVersion "" through the ListerWatcher,
// which returns at most one object. The order matters. The apiserver's
// watch cache delivers everything the watch must catch up on as soon as
// the watch opens. But it tells the client where it stands only with a
// bookmark, sent near the watch's deadline. It sends the bookmark only with
// a resourceVersion newer than the watch's start. The read, taken after the
// watch opened, brings the watch cache up to the newest revision in etcd.
// The apiserver serves consistent reads from its cache once that cache has
// caught up. So the bookmark comes at or past the read's resourceVersion
// about a second after the watch opened. That holds on a resource nothing
// writes to as on a busy one.
//
// The read is repeated every half second while the watch lasts. The
// bookmark needs a revision newer than the watch's start, so etcd must have
// been written to, anywhere, after the watch opened. Each read brings the
// watch cache to what etcd has by then.
//
// The reflector relists once MaxWatches short watches have ended with Done
// still open. The server then sends no bookmarks, as with the watch cache
// disabled or an aggregated apiserver, or etcd saw no write since the watch
// opened. The relist is a consistent read at "" (CauseRelistCatchUp), at or
// after the read's version. So catching up never waits on the server
// indefinitely. A watch that could not be started or ended with an error
// counts as one of those watches. A second such failure in a row relists
// at once. Otherwise a watch the server refuses would never let the store
// catch up, such as one RBAC grants list but not watch (403). Nor would a
// broken proxy that ends every watch within a second. The failures
// client-go retries without relisting, connection refused and 429, do not
// count. While the server cannot be reached or sheds load, a list could not
// be made either.
//
// A consistent list (at "") made while catching up is itself a read made
// after the start. No consistent read may have succeeded yet, because the
// limit=1 reads keep failing or no watch opened to take one. Target then
// gets the list's resourceVersion. So the store has caught up once it
// applies the list, as a client-go informer is synced after its first list.
// The relist above is at "", at or past any read taken before it. After it
// the reflector stops catching up. Its watches are ordinary ones, as after
// Done, even while the store is still applying the list. So catching up
// adds at most one full list, never a list every few watches. A list at the
// stored version, such as a relist after a 410 or a recovery's, is never a
// target. It asks for data not older than that version. A watch cache
// behind etcd serves it at its own position, which may be older than the
// server was at the start. The short watches then go on, within the same
// MaxWatches, and their reads give the target.
//
// Relist.ListedEarlier reports a consistent list made before the relist,
// such as an informer's list taken at its start. That list is a read made
// after the start, but perhaps before the reads. It gives Target its
// version, and settles the catch-up, only if no read has given a target
// yet. Otherwise it may be older than the target, and the short watches go
// on. The reflector never compares resourceVersions. Only the order in
// which the reads and lists were made tells which is newer.
type CatchUp struct {
	// Target, if set, is called once with the resourceVersion of the first
	// consistent read that succeeds. A consistent list at "" that comes
	// first gives its version instead, before it reaches Store.Replace. A
	// failed read is reported to the WatchErrorHandler as ErrList, and the
	// next short watch takes it again. Nil means the caller knows its
	// target. The reads are still taken, to bring the watch cache forward.
	Target func(resourceVersion string)
	// Done is closed by the caller once its store has caught up. Required.
	Done <-chan struct{}
	// WatchTimeout is the timeoutSeconds of each watch while Done is open.
	// Zero means DefaultCatchUpWatchTimeout. Shorter watches get no bookmark
	// from the apiserver.
	WatchTimeout time.Duration
	// MaxWatches is how many short watches may end before the reflector
	// relists, whether they closed, failed to start or ended with an error.
	// Zero means DefaultCatchUpWatches.
	MaxWatches int
}

// catchingUp reports whether watches should still be short. They are until
// the caller has caught up or a list has settled the catch-up.
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

// catchUpListed is called by a list that succeeded while catching up,
// before the list reaches Store.Replace. It gets the resourceVersion the
// list was made at and the one it returned. Only a consistent list (at "")
// counts. Made now, it is a read made after the start, at or past any read
// Target got before. If no consistent read has reached Target yet, the
// list's version does. The catch-up is then settled, with no more short
// watches or reads. A list at a given version follows a 410 or serves a
// list the store owes. A watch cache that lags the server's state at the
// start may serve it, so the short watches go on after it.
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
// has accepted. It hands the first successful read's resourceVersion to
// CatchUp.Target. It stops when ctx ends with the watch, or when the store
// has caught up. It runs beside handleWatch, which must go on consuming
// the watch.
//
// The first read follows the watch's start at once. The watch cache's
// bookmark must carry a revision newer than that start. The first read
// brings the cache only to the revision etcd has then, which is the start's
// if nothing was written anywhere in between. So the read is repeated every
// catchUpReadInterval while the watch lasts. Each read brings the cache to
// whatever etcd has by then. In a live cluster, leases
// alone move it several times a second. Each read is one request returning
// at most one object.
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

// shortWatchEnded is called when a short watch ended while the store had
// not caught up. failed says it could not be started or ended with an
// error, rather than closing normally. It returns true if the reflector
// should relist instead of watching again.
func (r *Reflector) shortWatchEnded(failed bool) bool {
	if !r.catchingUp() {
		return false
	}
	r.shortWatches++
	return r.shortWatches >= r.catchUpWatches || (failed && r.watchFailures >= watchFailuresBeforeRelist)
}
