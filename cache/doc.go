// Package cache provides drop-ins for client-go's tools/cache. Informer is
// a cache.SharedIndexInformer that resumes its watch after a restart instead
// of relisting. Indexer is the cache.Indexer it keeps its state in. That
// state is a persist.Collection of objects, secondary indexes and the last
// resourceVersion. docs/cache.md gives every rule below in full.
//
// # Basics
//
// NewSharedIndexInformer is client-go's constructor plus a Persistence. The
// Persistence names the open persist.DB and the collection to use.
// NewSharedIndexInformerWithOptions takes it in InformerOptions instead.
// Queue, ordering, resync, handler registration and panics follow client-go
// v0.37.2.
//
// An Informer that finds a stored resourceVersion does not list. Its listers
// serve the stored state as soon as the file is open and checked. The watch
// resumes from the stored resourceVersion. Each handler gets OnAdd(obj, true)
// for every stored object, from a background walk in key order. A key's
// initial add reaches a handler once, before any event for that key.
//
// Synced keeps client-go's meaning. The store reflects a consistent read
// taken after the informer started. A warm start is synced once its watch
// has passed a limit=1 read taken after the watch opened. The apiserver's
// bookmarks carry it there without a full list. A server without bookmarks
// costs one relist (see reflector.CatchUp). InformerOptions.SyncedAtOpen
// trades that guarantee for a start synced on the stored state.
//
// A 410 Gone costs what changed when InformerOptions.Recovery is set. The
// informer diffs a metadata list against the stored versions. It then fetches
// only new and changed objects. Without Recovery it relists once and
// reconciles the list with the stored state, as client-go does.
//
// NewIndexer returns a cache.Indexer and cache.TransactionStore on one
// collection. A write is visible to reads when it returns. It reaches the file
// in the next group commit. Replace does not rewrite objects whose
// resourceVersion did not change.
//
// # Provenance
//
// A collection records what it was listed from. That is its ListIdentity,
// its transform, the cluster and the queue mode. The informer checks them
// before it hands out anything stored. Any difference starts it cold. Until
// the check passes, handlers get nothing and listers read as empty. Writes
// to an unstarted informer's store make Run start cold, so unit tests can
// seed listers.
//
// # Memory
//
// A cold start lists in pages and stores each page while it asks for the
// next, so the list is never held whole. With Persistence.CacheObjects or
// CacheBytes, memory follows the bound, not the collection. Initial adds are
// then handed out no faster than handlers take them. A relist still holds
// the whole list, as client-go's does.
//
// # Checkpoints
//
// A handler registered through a Checkpoint skips the stored objects the
// program acknowledged. It still gets every change and the deletions it
// missed, as tombstones. See Checkpoint for the contract.
//
// # Caveats
//
// Returned objects are shared. Treat them as read-only.
//
// Index functions are code, and the file cannot see code change. A stored
// index is reused only if its name, declared version and function name
// match. Declare a new version (IndexerOptions.IndexVersions) when a function
// changes behaviour. An informer's warm start repairs stale entries, but a
// bare Indexer serves what the file holds. A failing index function does not
// panic. The write returns its error and applies nothing. A list (Replace)
// leaves out only the objects it refuses and applies the rest.
//
// A warm-started informer sends a relist's unchanged objects only to handlers
// with a resync period. Before its first resync check, client-go sends them
// to every handler.
//
// A read error is never served as absence. Get, ByIndex and the other reads
// with an error result return it. List, ListKeys and ListIndexFuncValues have
// no error result, so they panic. A store that owes a list after a read error
// makes such reads wait for that list. AddIndexers meets every stored
// record. An informer's sets aside one it cannot read, and lists it again.
// A bare Indexer's fails instead, and adds no index.
package cache
