// Package inspectfile reads a boltinformer cache file as stored, for tools
// (cmd/inspect, tests, benchmarks): raw records and index entries, bucket
// and file statistics, and bbolt's consistency check. It never writes.
//
// Records and index entries are read as the collection's state: the object
// and index trees with the journal (schema 2) applied, so that a reader sees
// what the live collection serves, whether or not its journal was folded.
// Stats show the buckets as they are.
//
// # Basics
//
// Open validates the file as persist.Open with Options.ReadOnly does (and
// returns its errors: persist.ErrLocked, persist.ErrNotCacheFile, ...), and
// keeps both that read-only *persist.DB, for decoded reads (Collections,
// Collection lookups), and a read-only bbolt handle of its own for the raw
// reads. View runs a function over one collection's buckets in one read
// transaction.
//
// # Caveats
//
// A file a process holds for writing cannot be opened: bbolt's lock lets
// readers in only when no writer holds it. Take a snapshot of a live file
// (persist.DB.SnapshotFile) and open that.
//
// Byte slices passed out by a Collection alias the file's memory map and are
// valid only inside the View call that made it.
//
// A File is safe for concurrent use.
package inspectfile
