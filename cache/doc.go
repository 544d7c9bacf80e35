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
// that finds a stored resourceVersion does not list: every handler gets
// OnAdd(obj, true) for each stored object, the informer reports synced, and
// the watch resumes from there. If the server no longer has that version
// (410 Gone), the informer relists once and reconciles the list against the
// stored state, as client-go reconciles a relist. A collection stored under
// another ListIdentity, Cluster or TransformVersion (see Persistence) is not
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
// # Caveats
//
// Index functions are code. An index stored on disk is reused only if its
// name, its declared version (IndexerOptions.IndexVersions) and its
// function's Go name all match; otherwise it is rebuilt when the Indexer
// opens. A function that changes behaviour but keeps its Go name (a closure
// over a different parameter, an edited function body) must get a new
// declared version, or the old entries would be served.
//
// Unlike client-go's indexer, a failing index function does not panic: the
// write returns the error and applies nothing.
//
// A warm-started informer sends the unchanged objects of a relist only to
// handlers with a resync period; client-go, before its first resync check,
// sends them to every handler.
//
// Returned objects are shared; treat them as read-only.
package cache
