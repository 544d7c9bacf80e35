package format

// Buckets and keys of the file's root.
var (
	// MetaBucket holds the file's schema version and creation time.
	MetaBucket = []byte("boltinformer")
	// CollectionsBucket holds one bucket per collection.
	CollectionsBucket = []byte("collections")
	SchemaKey         = []byte("schema")
	CreatedKey        = []byte("created")
)

// Buckets and keys of one collection, below CollectionsBucket/<name>.
var (
	// CollMetaBucket holds RVKey, CommittedKey, ClockKey, DescriptionKey,
	// IndexVersionsKey, JournalKey and, while set, MustListKey,
	// RebuildKey and ByValueOwedKey.
	CollMetaBucket = []byte("meta")
	// ObjectsBucket maps each object key to its record.
	ObjectsBucket = []byte("objects")
	// IndexesBucket holds a bucket per index, with ByValueBucket and
	// ByKeyBucket inside.
	IndexesBucket = []byte("indexes")
	// CheckpointsBucket, once a consumer acknowledged anything, holds a
	// bucket per checkpoint mapping object keys to the resourceVersion the
	// consumer last finished processing (see persist.Checkpoint).
	CheckpointsBucket = []byte("checkpoints")
	// TombstonesBucket holds a bucket per checkpoint mapping the keys of
	// deleted, acknowledged objects to their last record, until the
	// deletion is acknowledged.
	TombstonesBucket = []byte("tombstones")
	// CheckpointSeenBucket maps each checkpoint's name to when it was last
	// open, by the collection's in-use clock (ClockKey): a checkpoint not
	// opened for persist.Options.CheckpointRetention of it is dropped.
	CheckpointSeenBucket = []byte("checkpointSeen")

	RVKey        = []byte("rv")
	CommittedKey = []byte("committed")
	// ClockKey holds the collection's in-use clock (seconds, decimal),
	// written by every commit. It runs only while a process has the
	// collection open for writing: checkpoint retention counts neither
	// downtime nor a stepped wall clock. A collection written before it
	// was kept starts it at its newest checkpoint stamp (Unix time).
	ClockKey         = []byte("clock")
	DescriptionKey   = []byte("description")
	IndexVersionsKey = []byte("indexes")
	// MustListKey, when present, says the collection holds only part of
	// what was listed (stored state that could not be read back was set
	// aside): it must not be resumed from its resourceVersion until a list
	// has been applied.
	MustListKey = []byte("mustList")
	// TreeBytesKey (schema 2) holds the bytes of the records in
	// ObjectsBucket as a decimal number, kept by every write to it, so
	// that the journal's limit needs no walk of the tree. A file without
	// it (written before, or by an owner that lost count) is counted once.
	TreeBytesKey = []byte("treeBytes")
)
