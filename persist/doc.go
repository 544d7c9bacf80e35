// Package persist owns boltinformer's cache file: a bbolt database holding
// collections of Kubernetes objects, their secondary indexes and the
// resourceVersion they were last synced at.
//
// # Basics
//
// Open a file with Open, then a Collection per informer with DB.Collection.
// Collection.Apply applies a batch of Ops (objects with their precomputed
// index values) and sets the collection's resourceVersion. Applied changes
// are visible to every read when Apply returns; a background goroutine writes
// them in group commits: after Options.BatchInterval, or sooner once
// Options.BatchLimit changes are pending, or on DB.Flush and DB.Close. Each
// commit writes the changes of every collection of the file, their index
// entries and their resourceVersions in one bbolt transaction, so the file
// always holds a prefix of the applied stream and its stored resourceVersion
// is exactly that prefix's. A crash loses at most the changes applied since
// the last commit, which a watch resumed from the stored resourceVersion
// delivers again.
//
// A commit appends each collection's changes to the collection's journal,
// which fills pages, rather than rewriting a leaf of the object and index
// trees per scattered change; the journal is folded into the trees in bulk
// once it holds Options.JournalShare of the records' bytes, a chunk of keys
// per commit (see journal.go). Every read, and Open, sees trees and journal
// as one state; in memory the journal keeps where each record is, not the
// record. Each collection also keeps every object's UID and
// resourceVersion (Collection.Versions), beside the objects and in the
// same commits, readable without touching a record. A large list loaded
// into an empty collection is written a chunk of keys per transaction, the
// resourceVersion with the last (see writeahead.go): a bbolt transaction
// holds a buffer per page it writes.
//
// Records are msgpack envelopes (internal/format) around a payload encoded by
// Codec: the generated protobuf of typed objects (JSON for the rare typed
// object without one), msgpack for unstructured ones, which, unlike JSON,
// keeps int64 and float64 apart.
// Secondary indexes are stored per index as value→key and key→values
// buckets, so index lookups never decode objects.
//
// Decoded objects are cached in memory: all of them by default, as client-go
// does, or a bounded number (CollectionOptions.CacheObjects/CacheBytes), in
// which case memory stays flat however many objects the file holds and cold
// reads decode from the file; changes waiting for a commit are then held as
// records, not objects, and a list received in pages can be applied as it
// comes (ApplyPart, then ApplyList).
//
// # Caveats
//
// Objects returned by reads are shared with the cache and other readers:
// treat them as read-only, as with client-go's stores.
//
// Index functions are code, and the file cannot see code change. An index is
// reused on open only if its name and version (CollectionOptions.Indexes)
// are those it was built with; callers must change the version whenever an
// index function's behaviour changes.
//
// Nor can the file see where its objects came from. An owner records that
// as a collection's provenance (CollectionOptions.Provenance,
// Collection.CheckProvenance): opaque name/value pairs compared on open; a
// difference empties the collection — objects, index entries and
// resourceVersion — so nothing is served under another provenance.
//
// An owner that drops part of a collection it could not read back records
// that the collection must be listed again (Collection.SetAside,
// SetAsideAll): the mark is written in the same commit as the drop, kept by
// every later Apply and by Close, and cleared only by ApplyList or by
// emptying the collection. Collection.MustList reports it.
//
// Files are created with mode 0600 and missing parent directories with 0700:
// they hold whatever the cached objects hold.
//
// Damage is never a state a person must repair: a journal that cannot be
// read is set aside at open (Collection.JournalSetAside) with the must-list
// mark, leaving a checkpoint's tombstone for each acknowledged object only
// the journal held, and a checkpoint's tombstone that cannot be decoded is
// delivered with what can be read of it. A closed collection refuses reads that need
// the file (ErrClosed): another instance may have changed it since. So do
// the collections of a closed DB.
//
// Only one process may open a file for writing; Open waits at most
// Options.LockTimeout for the lock and then fails with ErrLocked. Tools read
// a live cache through a hot snapshot (DB.SnapshotFile) instead. Within a
// process, likewise, only one DB may have a file open for writing: Open of a
// file another DB of the process holds fails at once with ErrOpenInProcess
// (and ErrLocked), naming the cause, unless that DB is closing, which Open
// waits for (at most LockTimeout).
//
// All exported methods are safe for concurrent use unless documented
// otherwise.
package persist
