// Package format is the on-disk format of a boltinformer cache file: its
// bucket and key names, the encoding of secondary-index entries, and the
// record envelope around each stored object. Package persist writes and reads
// files through it; read-only tools (persist/inspectfile) read them through
// it. Nothing here opens a file or decodes an object's payload.
//
// # Basics
//
// A file holds, below its root:
//
//	boltinformer/  schema, created
//	collections/   <name>/meta/     rv, committed, description, indexes
//	               <name>/objects/  key -> record
//	               <name>/indexes/  <index>/byValue, <index>/byKey
//	               <name>/journal/  changes not yet folded (journal.go)
//	               <name>/rebuild/  a fold's copies of objects and versions (tree.go)
//
// A record is a msgpack array (see record.go); index entries are described
// in index.go.
//
// # Caveats
//
// The byte slices below are shared: never modify them. Changing any of this
// changes the file format, which needs a new schema version in persist.
package format
