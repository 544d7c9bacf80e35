// Package reflector keeps a Store in step with one collection on a
// Kubernetes API server by listing and watching it, like client-go v0.37.2's
// tools/cache.Reflector, except that it can start from a given
// resourceVersion without listing. It is the part of a persistent informer
// that, after a restart, watches from the resourceVersion stored on disk
// instead of relisting the cluster.
//
// # Basics
//
// New takes a cache.ListerWatcher, a Store (client-go's *cache.RealFIFO
// satisfies it) and one Options value, which is copied and frozen. Run loops
// over ListAndWatch with exponential backoff until its context is done.
//
// Without Options.ResumeResourceVersion a reflector behaves like client-go's:
// it lists at resourceVersion "0" (served from the apiserver's watch cache),
// calls Store.Replace, and watches from the list's resourceVersion. With it,
// the first ListAndWatch makes no list request: it watches from that
// resourceVersion, and events since then arrive as ordinary Add, Update and
// Delete calls. If the server says the version is gone — HTTP 410
// Gone/Expired, as a status or as an in-stream ERROR event (an apiserver that
// restarted answers the latter) — or too large, the reflector relists once
// and calls Store.Replace, which is where a persistent store reconciles
// against its disk contents. As in client-go, a relist after an expired
// version asks for data no older than the last resourceVersion it saw
// (served from the apiserver's watch cache, sparing etcd after an apiserver
// restart) and falls back to resourceVersion "" (a consistent read) only if
// that list is refused too; after a too-large version it lists at "" at
// once. The relist waits one backoff interval (800ms to 1.6s by default),
// as client-go's does, which spreads the relists of many clients after an
// apiserver restart; but where the resumed watch itself is answered so,
// before any event, the reflector lists at once, as a cold start does (see
// Caveats).
//
// With Options.Recovery (a MetadataLister) and a Store that is a
// RecoveryStore, every list after the first is a recovery, which transfers
// and decodes only what changed (recover.go): a paged metadata-only list
// (PartialObjectMetadataList) at the last resourceVersion with
// resourceVersionMatch=NotOlderThan, never at "0"; a diff of UIDs and
// resourceVersions against the store, applied by the store in order with
// the writes before it (RecoveryStore.BeginRecovery: objects gone or
// replaced by another UID are deleted, unchanged ones left alone); the
// watch opened from the metadata list's resourceVersion; and only then the
// fetches of the new and changed objects, at least as new as the list: one
// object per request (a list with its name as a metadata.name field
// selector beside the lister's selectors), Recovery.Workers at a time, or a
// namespace, or the collection where Recovery.FullListFraction of it
// changed (a quarter) or a rate-limited client could not make the requests
// in about 10 s. A MetadataWireLister's metadata pages are read from their
// protobuf bytes as they arrive, not decoded; once the first page shows
// Recovery.FirstPageFraction of its limit (5%) newer than the stored
// resourceVersion, a WireLister's recovery stops reading it and lists in
// full at once instead (recoverlist.go). While the pages after the first are read, the objects
// they show newer than the stored resourceVersion are fetched already
// (recoverprefetch.go), within the bounds of the plan above; what that
// finds is applied once the diff is and the watch has opened. Each next
// page is asked for as soon as the page before tells its continue token
// (its ListMeta precedes its items), so the server encodes it while that
// page is read. Fetched
// objects and watch events reach the store as they come through one filter
// that lets each key move only forward: an object at a resourceVersion not
// newer than the key's last one is dropped, and one with another UID
// follows a cache.DeletedFinalStateUnknown of the key's last state. Once
// every changed object is fetched (or found gone and its deletion seen on
// the watch) and the watch has passed every fetched resourceVersion, the
// store is told the recovery ended at the watch's resourceVersion
// (RecoveryStore.EndRecovery), and the filter steps aside. A recovery is
// reported through Observer.Listed (the metadata list) and, for a
// RecoveryObserver, Recovered. A server that cannot list metadata (an
// aggregated API's may not), or a resourceVersion that is not an integer,
// makes the recovery list the collection in full through the lister if it
// is a WireLister (recoverlist.go): that one list serves as the metadata
// list and as the fetches, each item's UID and resourceVersion are read
// from the bytes of a protobuf response as it arrives, only the bytes of
// items newer than the stored resourceVersion are kept, and only the new
// and changed items are decoded, then applied before the watch opens; resourceVersions
// that are not integers are only told equal or not. A lister that is not a
// WireLister, or a store that cannot recover, makes that list a full one,
// through Store.Replace.
//
// Each watch asks for bookmarks; a BOOKMARK event calls Store.Bookmark and,
// like every event, advances LastSyncResourceVersion, so quiet collections
// stay resumable. A watch that closes or times out normally is re-opened at
// once from LastSyncResourceVersion without listing. A watch that cannot be
// started or ends with an error is retried once, after backoff, from
// LastSyncResourceVersion; the second failure in a row relists, as
// client-go relists after the first (see Caveats). Lists page exactly as
// client-go's do (see Options.PageSize), through k8s.io/client-go/tools/pager.
// Events carrying an object of another type than Options.ExpectedType (or
// GVK than Options.ExpectedGVK) are reported to Options.WatchErrorHandler,
// wrapped in ErrUnexpectedObject, and skipped. With Options.ResyncPeriod set,
// Store.Resync is called periodically while watching, when
// Options.ShouldResync agrees.
//
// With Options.CatchUp the reflector brings its store up to a consistent
// read quickly, without a list: until the caller says it has caught up,
// watches last 3 seconds and consistent limit=1 reads follow each one's
// opening, so the apiserver's pre-timeout bookmark carries the watch past
// the read (see CatchUp). Five short watches without that, or two failed
// watches in a row (403 from RBAC without the watch verb, a proxy that ends
// every watch), end in one consistent list; a list made while catching up
// serves as the read when none has succeeded, and after it the watches are
// ordinary, so catching up adds at most one full list.
//
// With Options.PagedList a cold start's list is never held whole: it is a
// consistent read in pages, each handed to the PagedList as it arrives,
// then the list's resourceVersion (see PagedList); a store that keeps its
// objects elsewhere needs memory for a page, not for the collection. Later
// lists go to Store.Replace.
//
// Options.Observer sees how each start happened (StartCause), every list and
// every watch, for metrics and tests.
//
// Goroutines: Run, and a direct ListAndWatch, do all listing, watching, Store
// writes (except Resync and a recovery's fetched objects) and backoff
// waiting on the caller's goroutine; requests carry the caller's context, so
// cancelling it aborts an in-flight list or watch. While a watch phase
// runs, one helper goroutine owns the
// resync timer and calls Store.Resync, and during a short CatchUp watch a
// second one takes the consistent reads. The watch phase starts them and, on
// the way out, cancels them and waits for them. A recovery adds one fetch
// goroutine, started once its diff is applied, which waits for the watch to
// open and runs up to Recovery.Workers request goroutines of its own;
// ListAndWatch cancels and joins it on its way out, and a fetch that fails
// three times ends the watch, so that Run backs off and recovers again.
// Before it, a metadata list of several pages runs up to Recovery.Workers
// prefetch goroutines, which the fetch goroutine joins, and which a list
// or recovery that fails before it cancels and joins; and, read through a
// MetadataWireLister, one goroutine at a time making the next page's
// request while a page is read (recovermetadata.go), joined before the
// list returns. Shutdown is a chain: cancelling the
// context ends the backoff wait or makes the event loop return, which stops
// the watcher (watch.Interface.Stop); the watch phase then cancels and joins
// the resync goroutine; ListAndWatch returns and Run returns without another
// backoff. Nothing the reflector started outlives Run or ListAndWatch.
//
// LastSyncResourceVersion is safe to call concurrently with everything.
// Run and ListAndWatch must not run concurrently with each other or
// themselves. Store methods are called from the reflector goroutine, from
// the resync goroutine for Resync, and during a recovery from its fetch
// goroutine, so the Store must be safe for concurrent use. A recovery's
// writes, watch events included, reach the store one at a time, under its
// filter's lock (recoverfilter.go), so that they keep the order of the
// forward rule. The recovery's callbacks (the error handler, the end of
// Recovery.Started, RecoveryObserver.Recovered) run after that lock is
// released.
//
// # Caveats
//
// After an expired answer on a watch the relist (without a recovery) is
// client-go's: at the last resourceVersion, unpaged, so the apiserver's
// watch cache serves it, and at "" (a consistent read from etcd) only if
// that list is refused too; after a too-large answer it is at "" at once. A
// recovery's metadata list follows the same fallback.
//
// A recovery compares resourceVersions as integers: a MetadataLister vouches
// that they are etcd revisions (kube-apiserver's own resources, built-in or
// custom; not aggregated APIs). Its metadata list is not free: every
// object's metadata includes its managedFields, so it reads 57% (ConfigMaps)
// to 71% (Pods) of a full list's bytes for realistic objects, measured
// against kube-apiserver v1.37; what it saves is decoding, storing and
// delivering the unchanged objects, and transferring their contents. Its
// fetches go through the lister's client, rate limiter included. A
// recovery from a full list transfers every object, as client-go's list
// does, and holds the list's bytes until its diff is applied; it saves
// decoding (protobuf only: a JSON response is decoded whole), writing and
// delivering the unchanged objects.
//
// Deliberate differences from client-go:
//
//   - A watch that cannot be started, or ends with an error, for a reason
//     other than an expired or too-large resourceVersion (5xx, 403, 401, an
//     in-stream error, a watch that closed in under a second without
//     events) is reported to the error handler and retried once, after
//     backoff, from LastSyncResourceVersion; client-go relists at once. A
//     passing failure thus costs no list, and whether a resourceVersion is
//     still valid is the server's call (it answers 410 when it is too old).
//     The second such failure in a row relists as client-go's does: at
//     LastSyncResourceVersion, after one more backoff (CauseRelistError), or
//     at "" while catching up (CauseRelistCatchUp). A watch the server keeps
//     refusing — RBAC that grants list but not watch — therefore relists
//     every second attempt, where client-go relists every attempt, and the
//     store follows the server through those lists. A watch that delivered
//     events before it failed ends a run of failures rather than adding to
//     it. As in client-go, connection refused and 429 (at the start or in
//     the stream) are retried with backoff without limit and never relist.
//   - Watch-list streaming (client-go's WatchListClient feature,
//     sendInitialEvents) is never used, whatever the feature gate says: every
//     start is a paged list plus a watch, or a resumed watch.
//   - With Options.PagedList the first list is at resourceVersion "" (a
//     consistent read), in pages, where client-go's is at "0", which the
//     watch cache serves whole whatever the limit.
//   - The list runs on the caller's goroutine with the caller's context;
//     client-go runs it on a goroutine that may outlive a cancelled context.
//   - Every error, including retried watch failures and failed Store writes,
//     goes to Options.WatchErrorHandler; client-go logs some of them itself.
//     The default handler logs at client-go's levels.
//   - Options.MinWatchTimeout values under 5 minutes are honoured (client-go
//     ignores them); the floor is one second.
//   - A start that resumes, and whose first watch is answered with an
//     expired or too large resourceVersion before any event, lists without
//     the backoff interval client-go waits before a relist: the process has
//     just started, and client-go's cold start lists at once. Every later
//     relist waits, as client-go's, so that clients whose watches all end
//     at once (an apiserver restart) do not all list at once.
//
// Correctness of a resumed watch rests on the caller: ResumeResourceVersion
// must come from the same cluster and the same collection (resource,
// namespace, label and field selectors) as the ListerWatcher, and the Store
// must already hold the state as of that version. The server cannot detect a
// resourceVersion taken from another collection of the same cluster.
//
// LastSyncResourceVersion is not synchronized with the Store: it may name an
// event the Store has not applied yet, and it advances even when a Store
// write fails (the failure is reported). A persistent store should record
// the resourceVersions it receives through Replace, Add/Update/Delete
// objects and Bookmark instead.
//
// A watch started at "" or "0" (only possible when a list returned no
// resourceVersion) begins with synthetic ADDED events in no order; as in
// client-go their resourceVersions are not recorded until another event type
// arrives.
package reflector
