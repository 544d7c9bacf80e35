// Package reflector keeps a Store in step with one collection on a
// Kubernetes API server by listing and watching it. It is a port of
// client-go v0.37.2's tools/cache.Reflector that can also start from a
// stored resourceVersion without listing.
//
// # Basics
//
// New takes a cache.ListerWatcher, a Store (client-go's *cache.RealFIFO
// satisfies it) and one Options value, which is copied and frozen. Run loops
// over ListAndWatch with exponential backoff until its context is done.
//
// Without Options.ResumeResourceVersion a reflector behaves like client-go's.
// It lists at "0", calls Store.Replace and watches from the list's
// resourceVersion. With it, the first ListAndWatch only watches, and events
// since that version arrive as ordinary Add, Update and Delete calls. An
// expired (410, as a status or an in-stream ERROR) or too-large version
// makes it relist as client-go does. That relist asks for data no older
// than the last version seen, and falls back to "" (a consistent read) only
// if refused again.
//
// Options.Relister is the one hook beyond client-go (relist.go). It makes
// every list after the first; package recovery's recovers only what changed.
// It gets a Relist, the reflector's side: where to list, how to report, how
// to record the list as the watch's start. Its Relisted may take the watch's
// events (Store) and hand the watch loop writes to run between events
// (Writes), so that the store sees one ordered stream from one goroutine.
// ErrFullList makes the reflector list in full instead.
//
// Each watch asks for bookmarks, and a BOOKMARK calls Store.Bookmark, so
// quiet collections stay resumable. A watch that closes normally is
// re-opened at once from LastSyncResourceVersion. Lists page as client-go's
// do. Events of another type than Options.ExpectedType are reported,
// wrapped in ErrUnexpectedObject, and skipped. Options.CatchUp keeps watches
// short until the store has caught up with a consistent read (see CatchUp).
// Options.PagedList takes a cold start's list a page at a time. Options.Observer
// sees every start, list and watch.
//
// Goroutines: Run and ListAndWatch list, watch, write to the Store (except
// Resync) and back off on the caller's goroutine, with the caller's context.
// During a watch one helper goroutine calls Store.Resync, and during a short
// CatchUp watch another takes the consistent reads; the watch phase cancels
// and joins both. A Relister's goroutines are joined by Relisted.Finish,
// before ListAndWatch returns. Nothing the reflector started outlives Run.
//
// LastSyncResourceVersion is safe to call concurrently with everything. Run
// and ListAndWatch must not run concurrently with each other or themselves.
// The Store must be safe for concurrent use, because Resync comes from the
// resync goroutine.
//
// # Caveats
//
// Deliberate differences from client-go:
//
//   - A watch that fails for another reason than an unavailable
//     resourceVersion is retried once, after backoff, from
//     LastSyncResourceVersion. The second failure in a row relists, where
//     client-go relists after the first. Connection refused and 429 are
//     retried without limit, as in client-go.
//   - Watch-list streaming (sendInitialEvents) is never used.
//   - With Options.PagedList the first list is a consistent read in pages.
//     If it fails, the next list is a consistent read too. client-go
//     retries a failed first list at "0".
//   - A paged list at a specific resourceVersion (Options.PageSize, or
//     the default page size once a list at "0" came back paginated) asks
//     for NotOlderThan. client-go sends no resourceVersionMatch, which
//     kube-apiserver serves as an exact read of that old version from etcd.
//   - The list runs on the caller's goroutine with the caller's context.
//   - Every error, failed Store writes included, goes to
//     Options.WatchErrorHandler.
//   - Options.MinWatchTimeout under 5 minutes is honoured; the floor is 1s.
//   - A resumed start whose first watch finds its version unavailable lists
//     at once, as a cold start does. Later relists wait one backoff interval.
//   - A version the server cannot parse (400, 422 Invalid, or kube-apiserver's
//     500 naming resourceVersion) is unavailable too, and the next list is a
//     consistent read at "". client-go never sends a version it did not get
//     from the server; a stored one may be damaged.
//
// A resumed watch is only correct if ResumeResourceVersion comes from the
// same cluster and collection as the ListerWatcher, and the Store holds the
// state as of that version. The server cannot tell.
//
// LastSyncResourceVersion is not synchronized with the Store, as in
// client-go. A persistent store records the versions it is handed instead.
//
// A watch started at "" or "0" begins with synthetic ADDED events in no
// order, whose resourceVersions are not recorded until another event type
// arrives.
package reflector
