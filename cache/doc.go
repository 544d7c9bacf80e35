// Package cache provides boltinformer's drop-ins for client-go's
// tools/cache: an Indexer whose objects, secondary indexes and
// resourceVersion live in a persist.Collection.
//
// # Basics
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
// Returned objects are shared; treat them as read-only.
package cache
