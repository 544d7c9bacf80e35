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
// every list after the first. Package recovery's Relister recovers only what
// changed. It gets a Relist, the reflector's side of the relist. That says
// where to list and how to report, and records the list as the watch's
// start. Its Relisted may take the watch's events (Store). It may also hand
// the watch loop writes to run between events (Writes). So the store sees
// one ordered stream from one goroutine. ErrFullList makes the reflector
// list in full instead.
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
// Run and ListAndWatch list, watch and back off on the caller's goroutine,
// with the caller's context. They write to the Store there too, except
// Resync. During a watch one helper goroutine calls Store.Resync. During a
// short CatchUp watch another takes the consistent reads. The watch phase
// cancels and joins both. Relisted.Finish joins a Relister's goroutines
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
//   - A paged list at a specific resourceVersion asks for NotOlderThan.
//     Such a list has Options.PageSize set, or follows a list at "0" that
//     came back paginated. client-go sends no resourceVersionMatch there.
//     kube-apiserver serves that as an exact read of the old version from
//     etcd.
//   - The list runs on the caller's goroutine with the caller's context.
//   - Every error, failed Store writes included, goes to
//     Options.WatchErrorHandler.
//   - Options.MinWatchTimeout under 5 minutes is honoured. The floor is 1s.
//   - A resumed start whose first watch finds its version unavailable lists
//     at once, as a cold start does. Later relists wait one backoff interval.
//   - A version the server cannot parse is unavailable too. The server
//     answers 400, 422 Invalid, or a kube-apiserver 500 naming
//     resourceVersion. The next list is a consistent read at "". client-go
//     never sends a version it did not get from the server. A stored one may
//     be damaged.
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
