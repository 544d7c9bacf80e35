// Package cache provides boltinformer's drop-ins for client-go's
// tools/cache: an Informer (a cache.SharedIndexInformer) that resumes its
// watch after a restart instead of relisting, and the Indexer it keeps its
// objects, secondary indexes and resourceVersion in, a persist.Collection.
//
// # Basics
//
// NewSharedIndexInformer is client-go's constructor with one more argument,
// a Persistence: the open persist.DB and the collection to keep the
// informer's state in; NewSharedIndexInformerWithOptions takes it in
// InformerOptions, beside client-go's options. An Informer
// that finds a stored resourceVersion does not list (unless the collection
// owes a list after a read error; see Warm start): as soon as the file is
// open and its provenance checked its listers serve the stored state and
// the watch resumes from there; it reports synced once that watch has
// caught up with a read made at start (see Synced means caught up); every
// handler gets OnAdd(obj, true) for each stored object in the background
// (see Warm start). If the server no longer has that version
// (410 Gone), the informer recovers by what changed (see Recovery), or,
// without a metadata lister, relists once and reconciles the list against
// the stored state, as client-go reconciles a relist. A collection stored
// under another ListIdentity, Cluster or TransformVersion (see Persistence) is not
// resumed: the informer starts cold. Everything else — queue, ordering,
// resync, handler registration, panics — is client-go v0.37.2's. Metrics
// exports what an informer and its file do to a prometheus.Registerer.
//
// NewIndexer opens a collection of a cache file and returns a value that
// satisfies cache.Indexer (and cache.TransactionStore) of client-go v0.37.2.
// Writes are visible to reads as soon as they return and reach the file in
// the next group commit; after a restart the Indexer holds the last committed
// state, and LastStoreSyncResourceVersion returns its resourceVersion.
//
// Replace compares the new list with the stored resourceVersions: objects
// whose resourceVersion did not change are not rewritten.
//
// # Provenance
//
// A collection records what its contents came from, and is emptied
// (objects, index entries, resourceVersion) rather than served when that
// differs: for an Indexer, its ListIdentity and transform identity, checked
// when it opens; for an Informer, also the cluster (Persistence.Cluster) and
// the queue mode, checked when it starts, before anything stored is handed
// to a handler or resumed. A transform's identity is its declared
// TransformVersion plus its Go function name. Collections written before
// provenance was recorded start cold once.
//
// Until the check has passed, the informer hands out nothing stored: its
// handlers get nothing and GetStore and GetIndexer (every lister) read as
// empty, as a client-go informer's store before its first list. Writes
// through them meanwhile are kept and read back as client-go's store would
// (see Seeding listers). A cluster
// identity that needs the apiserver (the factories' default) therefore
// keeps a warm informer empty and unsynced while the apiserver is down:
// resume only what provably matches. With a declared identity
// (StaticCluster) or a nil Persistence.Cluster the warm start works
// offline: listers serve the file and the watch retries with client-go's
// backoff (failures go to the watch error handler) until the server
// answers; it then resumes, or relists once after a 410. Such an informer
// is synced while the server is down only with SyncedAtOpen.
//
// # Warm start
//
// A warm start decodes nothing before its listers serve: the store is
// complete the moment the file is open. GetStore's Get and List serve the
// file at once, decoding on demand. The handlers registered before Run get their initial
// adds from a background walk of the collection in key order, decoded on
// every core, each object once for all handlers; each registration's
// HasSynced (what cache.WaitForCacheSync should be given for a handler's
// work queue) turns true once that handler has handled all of its initial
// adds. Watch events are applied meanwhile, and client-go's per-key
// orderings hold: a key's initial add reaches a handler once and before any
// event for the key, and carries the state the event's old starts from; a
// handler added after Run gets the store's state through its late join,
// once. Across keys, a handler may get an event for one key before the
// initial add of another. Index lookups (ByIndex, Index, IndexKeys,
// ListIndexFuncValues) wait until the walk has verified every stored index
// entry (see Caveats); resyncs and a relist after a 410 wait for the walk.
// Where no handler was registered before Run, the walk only verifies the
// index entries (and fills an unbounded cache's objects): it then holds
// back while a recovery runs (InformerOptions.Recovery), which it would
// otherwise compete with for the cores, and goes on when the recovery ends
// or something waits for it (an index lookup).
//
// If a stored object cannot be read back during the walk, the collection
// keeps what handlers were given, the rest is set aside, and the informer
// relists (reported to the watch error handler, counted in
// boltinformer_collection_resets_total{reason="read_error"}); what was set
// aside returns with the relist as OnAdd(obj, false). Until the relist is
// applied the store lacks it, and the informer may already have reported
// synced, so reads through GetStore and GetIndexer that could show an object
// as absent — List, ListKeys, index lookups, a Get that finds nothing —
// wait for the relist (a Get that finds its object returns at once); if the
// informer stops first they fail with ErrIncomplete, List, ListKeys and
// ListIndexFuncValues panicking with it as with a read error. The relist is
// owed durably: the collection's must-list mark (persist.Collection.MustList)
// is written in the commit that sets the state aside and kept by every
// later event, bookmark and clean stop, so a start that finds it lists from
// the stored resourceVersion, reconciling the list with the stored state
// (the stored objects reach handlers first, as a warm start's initial adds),
// and is synced only once the list is applied; only an applied list clears
// it. The informer's own reads (late joins) do not wait: a handler added
// while the relist is owed is registered at once, as in client-go, gets the
// partial store as its initial adds (a checkpoint's handler, minus what it
// acknowledged), and the rest as adds when the relist lands; its
// registration's HasSynced waits for that relist, and a checkpoint's
// tombstones are given after it (a key the store lacks until then may have
// been set aside rather than deleted), as they are to checkpoint handlers
// registered before a start that found the must-list mark.
//
// # Recovery
//
// With InformerOptions.Recovery (a metadata lister; the typed and metadata
// factories set one) a 410, and a list the
// collection owes, cost what changed (see reflector.Recovery for the
// requests): the informer lists the collection's metadata, diffs UIDs and
// resourceVersions against the stored ones, opens the watch from the
// list's resourceVersion and fetches only new and changed objects, each key
// moving only forward. Handlers get what client-go's relist gives them,
// without the unchanged objects: objects gone, or replaced by another UID
// under the same name, as OnDelete(DeletedFinalStateUnknown) carrying the
// stored object (the new UID then as an add); changed objects as updates,
// new ones as adds; unchanged objects are not decoded, rewritten or
// delivered, except to handlers due for a resync, which get them as a
// relist's unchanged objects (read from the file), and a checkpoint's
// handler skips those it acknowledged. Watch events arrive meanwhile; no
// handler is given a key at a resourceVersion older than one it was given.
//
// The diff and the end of a recovery are applied by the delta loop in order
// with the watch events around them. The diff marks the collection
// must-list (persist.Collection.MustList) in the commit before anything of
// the recovery; the end records the watch's resourceVersion and clears the
// mark in one commit, once every changed object is applied and the watch
// has passed every fetched resourceVersion: the collection is then exactly
// the list at that version plus the events after it. A process that stops
// or crashes in between leaves the mark, and its next start recovers again
// (lister reads wait for that, as for any list the store owes); nothing
// applied is lost, and nothing is delivered twice but a change applied and
// not yet committed, as after any crash. Until the end the informer is not
// synced, whatever resourceVersion it last applied: synced still means the
// store reflects a consistent read taken at start.
//
// Without a metadata lister (a bare informer, a dynamic one, a custom
// ListerWatcher) the 410 costs one full list, reconciled as client-go
// reconciles a relist: unchanged objects are not rewritten or delivered
// beyond handlers due for a resync, but every object is transferred and
// decoded.
//
// # Seeding listers
//
// Controller unit tests write to an informer's store before it runs
// (GetIndexer().Add(obj), then a lister built on GetIndexer). Until Run has
// checked the collection's provenance, GetStore and GetIndexer are backed
// by client-go's in-memory indexer with the informer's indexers: whatever is
// written reads back as from client-go's informer, and Indexer still serves
// the file. If anything was written (Add, Update, Delete, Replace,
// Transaction), Run starts cold: the seeded objects are not the cluster's,
// so the stored collection is dropped (objects and resourceVersion) rather
// than resumed, the seeded objects are stored in its place, and the first
// list replaces them as client-go's first list replaces a seeded store —
// seeded objects the list lacks reach handlers as DeletedFinalStateUnknown,
// those it has as updates. Reads alone do not count.
//
// # Synced means caught up
//
// client-go's HasSynced means the store reflects a read made at or after
// the informer started; controllers rely on it (one that creates a child it
// does not find creates duplicates, one that cleans up what it does not
// find deletes live objects). A warm start keeps that meaning: it is synced
// once its resumed watch has applied a resourceVersion at least that of a
// consistent read — a list with limit=1 at resourceVersion "", one request
// returning at most one object — taken after the watch opened. Until then
// the watches are 3 seconds long and the read is repeated every half
// second, so that the apiserver's pre-timeout bookmark carries a quiet
// resource's watch to the read's version about a second after it opens;
// a server that does not (no bookmarks, an idle etcd) gets one relist after
// five such watches (see reflector.CatchUp). So does one that refuses the
// watch (RBAC that grants list but not watch answers 403) or ends every
// watch with an error, at the second failure in a row. A list taken while
// catching up serves as the read when none has succeeded, so the informer is
// synced once it has applied that list, as a client-go informer is after its
// first; catching up adds at most that one list. resourceVersions are
// compared as integers (etcd revisions). A cold start is synced when its
// list is applied, as in client-go.
//
// A small collection (InformerOptions.WarmListBelow, with Recovery) is also
// proved caught up by its versions: a consistent metadata list at X, and
// the store holding exactly the listed UIDs and resourceVersions means no
// change of the collection between the watch's position and X — synced at
// once when nothing changed while the process was down, without waiting
// for a bookmark; the watch still replays what did (versionmatch.go).
//
// InformerOptions.SyncedAtOpen restores the synced-on-the-stored-state
// start, for controllers that tolerate a stale start: synced at open,
// before the watch has delivered what changed while the process was down.
//
// # Bounded memory
//
// With a bounded object cache (Persistence.CacheObjects or CacheBytes) an
// informer's memory follows the bound, not the collection, through its
// starts as well as once synced:
//   - A cold start's list is never held whole. It is a consistent read
//     (resourceVersion "") in pages of InformerOptions.PageSize items (500
//     by default, reflector.PagedList); each page is stored and handed to
//     the handlers as initial adds before the next is asked for, and the
//     group commits write the pages as they come, the list's
//     resourceVersion with the last. An apiserver with the watch cache's
//     snapshots (Kubernetes 1.34 and later by default) serves every page
//     from its cache; older ones read them from etcd, as client-go's paged
//     lists do. A lister read before the informer is synced sees the pages
//     stored so far, where client-go's store is empty until its list is
//     applied. If the paged list fails part-way, the next list is an
//     ordinary one, reconciled with the pages stored as a relist is.
//   - Initial adds — a cold start's pages, a warm start's walk — are handed
//     out no faster than the handlers take them: the hand-out waits while a
//     handler has more than 1,024 notifications waiting, since those are
//     decoded objects nothing else holds. A handler that takes none for a
//     second is not waited for (it may itself wait for the hand-out: an
//     index lookup during a warm start does) until it has caught up; its
//     buffer grows meanwhile, as client-go's would. A slow handler thus
//     delays the other handlers' initial adds and their registrations'
//     HasSynced, not the informer's.
//   - Changes waiting for a group commit are held as records, not decoded
//     objects (persist.CollectionOptions.CacheObjects).
//
// A relist (after a 410, or after a paged list failed) still holds the
// whole list while it is reconciled with the stored state, as client-go's
// informer does for every list. An unbounded informer lists and hands out
// as client-go does: it keeps every object decoded anyway.
//
// # Resyncs after a warm start
//
// client-go sends an update whose resourceVersion did not change (a resync,
// or an unchanged object in a relist) to the handlers due for a resync; a
// handler is due when it is added and until the informer's first resync
// check, so a relist before that check reaches every handler. An informer
// that started warm applies one rule instead, to handlers added before Run
// and after alike: until a resync check says otherwise, such updates reach
// exactly the handlers with a non-zero resync period. The relist after a
// 410 thus tells handlers without a resync period only what changed. Cold
// starts follow client-go.
//
// # Checkpoints
//
// A warm start hands every stored object to the handlers as an initial add,
// so a controller processes all of them again. A handler registered through
// a Checkpoint (Informer.Checkpoint, CheckpointOf) is spared the initial adds
// of the objects the program acknowledged (Checkpoint.Ack) at their stored
// resourceVersion, and a relist's updates of them at that version; it gets
// everything else as without one, and the deletions of acknowledged objects
// it was not told about as tombstones.
// The acknowledgements live in the cache file, in the group commit with
// the objects, and are dropped whenever the collection starts over. A
// checkpoint's handler that joins a running informer (as controller-runtime
// registers its handlers) is given only what it has not acknowledged, found
// by reading resourceVersions from the records' headers: the acknowledged
// objects are not decoded for it. Metrics count each open checkpoint's
// acknowledged keys, tombstones, skipped initial adds and skipped relist
// updates. See Checkpoint
// for the contract and when not to use one.
//
// # Caveats
//
// Index functions are code. An index stored on disk is reused only if its
// name, its declared version (IndexerOptions.IndexVersions) and its
// function's Go name all match; otherwise it is rebuilt when the Indexer
// opens. A function that changes behaviour but keeps its Go name (a closure
// over a different parameter, an edited function body) should get a new
// declared version: an Informer's warm start recomputes every index's
// values for every stored object as it hands them out and rewrites entries
// that differ (logged, and counted in boltinformer_index_repairs_total),
// but an Indexer used on its own serves what the file holds.
//
// Unlike client-go's indexer, a failing index function does not panic: the
// write returns the error and applies nothing.
//
// A warm-started informer sends the unchanged objects of a relist only to
// handlers with a resync period; client-go, before its first resync check,
// sends them to every handler.
//
// Returned objects are shared; treat them as read-only.
//
// With an unbounded object cache (IndexerOptions.CacheObjects and
// CacheBytes zero) the Indexer keeps its indexes in memory too, updated
// under the same lock as every write, from the first read that can use them
// (it decodes whatever objects are not decoded yet and loads the indexes,
// once; an empty collection starts that way): List, ListKeys, Get,
// ByIndex, IndexKeys and ListIndexFuncValues are then served from memory,
// as client-go's, and never read the file. A bounded cache keeps its bound and reads the file.
//
// A read error is never served as absence. A controller that lists and
// misses an object treats it as deleted, so an Indexer never returns a
// partial result as complete. A failed file read (an undecodable record, a
// missing bucket, a file closed under a lister) is reported through
// utilruntime.HandleError, counted in boltinformer_read_errors_total and
// passed to the informer's watch error handler, then tried once more. If it
// fails again, the methods with an error result (Get, GetByKey, ByIndex,
// Index, IndexKeys) return the error and no objects; List, ListKeys and
// ListIndexFuncValues, whose client-go signatures have no error, panic with
// it — as client-go's own indexer panics when it cannot keep its indexes —
// because any list they could return would be wrong. The restarted process
// finds the collection unreadable at its warm start and relists what it
// cannot read (see Warm start).
// Reads served from memory (above) cannot fail this way: a file closed under
// a lister, for example, does not affect them.
package cache
