// Package persist owns boltinformer's cache file. The file is a bbolt
// database of collections. A collection holds Kubernetes objects, their
// secondary indexes and the resourceVersion they were last synced at.
// docs/persist.md gives every rule below in full.
//
// # Basics
//
// Open a file with Open, then a Collection per informer with DB.Collection.
// Collection.Apply applies a batch of Ops and sets the resourceVersion. Each
// Op carries an object with its precomputed index values.
//
// Applied changes are visible to every read when Apply returns. A background
// goroutine writes them in group commits. A commit starts after
// Options.BatchInterval, or once Options.BatchLimit changes are pending, or
// on DB.Flush and DB.Close. One bbolt transaction writes every collection's
// changes, index entries and resourceVersion. So the file always holds a
// prefix of the applied stream, and its resourceVersion is that prefix's. A
// crash loses at most the changes since the last commit. A watch resumed
// from the stored resourceVersion delivers them again.
//
// A commit appends each collection's changes to its journal, which fills
// pages. Scattered changes would otherwise rewrite a tree leaf each. The
// journal is folded into the trees once it holds Options.JournalShare of the
// records' bytes (journal.go). A fold writes the trees afresh in key order,
// a chunk per commit, and swaps them in (fold.go). Reads and Open see trees,
// the fold's copies and journal as one state. A large list into an empty
// collection is written a chunk of keys per transaction, because bbolt
// holds a buffer per page it writes (writeahead.go). Its value→key index
// entries are written once, with the resourceVersion (byvalueowed.go).
//
// Records are msgpack envelopes around a payload that Codec encodes. Typed
// objects use their generated protobuf, or JSON without one. Unstructured
// objects use msgpack, which keeps int64 and float64 apart. Indexes are
// stored as value→key and key→values buckets, so an index lookup decodes no
// object. An index value too long for a bbolt key is stored under its hash.
// Apply refuses an object key the file cannot store (see Op.Key). Collection.Versions reads every object's UID and resourceVersion
// without reading a record.
//
// Decoded objects are cached in memory. By default the cache holds all of
// them, as client-go does. CollectionOptions.CacheObjects or CacheBytes bound
// it, and memory then stays flat however large the file grows.
//
// # Caveats
//
// Objects returned by reads are shared. Treat them as read-only.
//
// Index functions are code, and the file cannot see code change. An index is
// reused on open only if its name and version match
// (CollectionOptions.Indexes). Change the version whenever an index
// function's behaviour changes.
//
// Nor can the file see where its objects came from. The owner records that
// as provenance (CollectionOptions.Provenance). A difference on open empties
// the collection, so nothing is served under another provenance.
//
// An owner that drops part of a collection it could not read records that
// the collection must be listed again (Collection.SetAside). The mark is
// written in the same commit as the drop. Only ApplyList or emptying the
// collection clears it. Collection.MustList reports it.
// Collection.SetAsideUnreadable drops only records that still do not
// decode, and keeps a key written since the caller found it unreadable.
//
// Damage never needs a person to repair it. A journal that cannot be read,
// or that lacks part of what its last commit recorded, is set aside at
// open, with the must-list mark. Damaged index entries and versions are
// rebuilt at open from the records (Collection.RebuiltAtOpen). Every
// writable open looks for them, since damage need not come from a
// transaction. A collection whose structure is damaged is emptied at
// open, and starts cold (Collection.DamageSetAside).
//
// A closed collection refuses writes and reads that need the file
// (ErrClosed), because another instance may own its buckets since. So does
// a closed checkpoint.
//
// Files are created with mode 0600, and missing directories with 0700. They
// hold whatever the cached objects hold.
//
// Only one process may open a file for writing. Open waits at most
// Options.LockTimeout for the lock, then fails with ErrLocked. Tools read a
// live cache through a hot snapshot (DB.SnapshotFile). Within a process,
// only one DB may hold a file. A second Open fails at once with
// ErrOpenInProcess, unless the first DB is closing.
//
// All exported methods are safe for concurrent use unless documented
// otherwise.
package persist
