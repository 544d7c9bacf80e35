package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// schemaVersion is the on-disk layout version this build writes. Version 2
// added the journal (internal/format/journal.go). Version 3 added each
// collection's versions bucket (internal/format/versions.go), identities
// in journal entries, the deletion's version in tombstones
// (internal/format/tombstone.go) and checkpoint stamps. The stamps are read
// against the collection's in-use clock (format.ClockKey), which older
// builds of schema 3 ignore. Version 4 folds the journal by writing the
// trees afresh (fold.go). While a fold runs, part of each tree is in a copy
// below format.RebuildBucket, which older builds would not read. Version 5
// leaves the index entries by value out while a collection is filled
// (byvalueowed.go), which older builds would read as missing.
//
// An older file is marked with this build's version when opened for
// writing. An older build then refuses the file (ErrSchemaUnsupported)
// instead of misreading it. Each of its collections gets its versions
// bucket when first opened for writing. A file with a higher version is
// refused with ErrSchemaUnsupported.
const (
	schemaVersion = 5
	oldestSchema  = 1
)

// Defaults applied to zero Options fields.
const (
	DefaultLockTimeout = 10 * time.Second
	// DefaultBatchInterval is a second. A commit rewrites every page it
	// touches, which is a leaf per changed key, branches, freelist and meta.
	// So at a steady trickle of watch events, a short interval pays that per
	// event.
	// At 100 events/s, 20 ms wrote 169 KiB per event and 1 s wrote 60 KiB
	// (docs/benchmarks-history.md at 43fbeb4, "Steady state: 10 minutes of
	// churn"). Reads are served from the layers meanwhile, so events reach
	// handlers no later. A crash loses up to the interval's changes. The
	// watch resumed from the stored resourceVersion delivers them again.
	DefaultBatchInterval = time.Second
	DefaultBatchLimit    = 10000
	DefaultMmapSize      = 1 << 30
	// DefaultPageSize is the page size of new files (see Options.PageSize).
	DefaultPageSize = 32 << 10
	// DefaultCheckpointRetention is explained at Options.CheckpointRetention.
	DefaultCheckpointRetention = 7 * 24 * time.Hour
	// DefaultMaxTombstones is explained at Options.MaxTombstones.
	DefaultMaxTombstones = 10000
)

// Options configures Open. Every field's zero value is a usable default.
type Options struct {
	// LockTimeout bounds the wait for the file lock held by another process.
	// Zero means DefaultLockTimeout. The wait is never unbounded.
	LockTimeout time.Duration

	// ReadOnly opens the file with a shared lock for tools such as inspect. It
	// never writes, never creates the file, and never rebuilds indexes.
	ReadOnly bool

	// BatchInterval is the longest an applied change waits before its group
	// commit starts. Zero means DefaultBatchInterval. Shorter intervals
	// shorten what a crash loses (and what a restart then receives again)
	// at the price of more bytes written per change.
	BatchInterval time.Duration

	// BatchLimit starts a group commit early once this many changes are
	// pending across all collections. Zero means DefaultBatchLimit.
	BatchLimit int

	// NoSync skips fsync on commit. A process crash still loses at most the
	// last group, because the data is in the OS page cache. A machine crash
	// may lose more or corrupt the file. For tests and benchmarks.
	NoSync bool

	// MmapSize is the initial size of the file's memory map. While the file
	// fits, a commit never remaps, and so never waits for open readers (bbolt
	// remaps by copying every in-memory node). It reserves address space, not
	// memory. Zero means DefaultMmapSize. An existing file is mapped with
	// room to double (mmapRoom) where that is more.
	MmapSize int

	// MoveAsideCorrupt makes Open rename a corrupt or truncated file to
	// <path>.corrupt-<unix seconds>, log it, and start over with an empty
	// file. A controller then starts cold instead of failing. The renamed
	// file is kept for inspection, and MovedAside returns its path. It never
	// applies to ErrLocked, ErrSchemaUnsupported or ErrNotCacheFile. Nor
	// does it apply to a write at open that the disk refuses (full, out of
	// quota): Open fails with that error, and the file stays where it is.
	MoveAsideCorrupt bool

	// Scheme resolves typed objects for the record codec. Nil allows only
	// *unstructured.Unstructured objects and metav1.PartialObjectMetadata,
	// which every file can hold whatever its scheme (client-go's
	// scheme.Scheme does not register it).
	Scheme *runtime.Scheme

	// JournalShare is how large a collection's journal may grow, as a share
	// of its records' bytes, before it is folded into the object and index
	// trees (see internal/format/journal.go). A commit appends its changes
	// to the journal, which fills pages. Writing them into the trees would
	// rewrite a leaf per scattered change. A fold writes the trees afresh,
	// each record once, whatever the journal gathered. A larger share writes
	// fewer bytes per change, and makes the file larger by up to that share.
	// Reads take a journaled record from the journal as they take one from
	// the trees.
	// Zero means DefaultJournalShare. Negative writes every commit into the
	// trees.
	JournalShare float64

	// CheckpointRetention is how long a checkpoint may go unopened. After
	// that, it is dropped with its acknowledgements and tombstones when its
	// collection is next opened for writing. Otherwise a checkpoint whose
	// consumer was renamed or removed would keep a tombstone of every object
	// it acknowledged, for as long as the file lives. Only time the
	// collection spends open for writing counts, by the process's monotonic
	// clock. A process down for a week, or a wall clock stepped forward,
	// drops nothing. An open checkpoint counts as seen. Its stamp is renewed
	// hourly, and when it closes. Zero means DefaultCheckpointRetention.
	// Negative keeps checkpoints for ever.
	CheckpointRetention time.Duration

	// MaxTombstones bounds the tombstones one open checkpoint keeps (see
	// Checkpoint). A consumer that acknowledges adds and updates but never
	// deletions gathers one per deleted object. A deletion that would take a
	// checkpoint past the bound clears the checkpoint instead. Its consumer
	// then processes every stored object again on its next start. It learns
	// of no deletion from the checkpoint, as after a cold start. The
	// clearing is reported (utilruntime.HandleError) and counted
	// (Checkpoint.Overflows). Zero means DefaultMaxTombstones. Negative sets
	// no bound.
	MaxTombstones int

	// PageSize is the page size of a file this Open creates. An existing
	// file keeps the one it was created with. bbolt puts at least two
	// records on a page, spilling onto further whole pages. So pages a few
	// times larger than the records keep the file close to their size. The
	// price is more bytes written per scattered update, since a commit
	// rewrites every page it touches (figures in docs/benchmarks.md, "File
	// size"). Zero means DefaultPageSize.
	PageSize int

	// The fields below are set only by this package's tests, through
	// export_test.go. Open gives their zero values the behaviour every
	// other caller gets.

	// now is the clock of checkpoint retention, read for elapsed time
	// only (see Collection.inUseNow). Nil means time.Now.
	now func() time.Time
	// journalBytes, if positive, is the journal a collection gathers
	// before a fold, whatever its size and JournalShare (see
	// journalLimit). It lets tests see folds on a few objects.
	journalBytes int64
	// foldChunk, if positive, is how many keys every fold moves per commit
	// instead of the computed chunk (see foldChunk), for folds that span
	// commits on a few objects.
	foldChunk int
	// writeAheadChunk is how many keys each write-ahead transaction writes
	// (see writeahead.go). Zero means defaultWriteAheadChunk.
	writeAheadChunk int
	// writtenAhead, if set, is called after each write-ahead transaction
	// with the chunk's last key.
	writtenAhead func(last string)
	// claimWaiting, if set, is called when Open starts waiting for a DB of
	// this process to finish closing the file (see claim).
	claimWaiting func(path string)
}

// DB is an open cache file. It owns one bbolt database, the collections
// opened on it, and the goroutine that group-commits their changes.
//
// All methods are safe for concurrent use.
type DB struct {
	holder *holder // this DB's claim on the file; see claim
	path   string
	opts   Options
	bolt   *bolt.DB
	codec  *Codec

	// applyMu is held for reading by every Apply while it assigns a sequence
	// number and inserts into a collection's pending layer. A commit holds it
	// for writing while it swaps the pending layers out. So a commit's
	// barrier sequence covers exactly the layers it swapped. The package's
	// lock order is stated once, in commit.go.
	applyMu  sync.RWMutex
	applySeq atomic.Uint64
	pending  atomic.Int64 // changes applied since the last swap

	// commitMu allows one commit, index build or reset at a time. Every
	// write transaction after Open runs under it (see commit.go).
	commitMu sync.Mutex

	// mu guards the fields below it.
	mu           sync.Mutex
	collections  map[string]*Collection
	committedSeq uint64
	lastErr      error  // error of the latest failed commit, nil after a success
	lastErrSeq   uint64 // commit attempt number of lastErr
	attempts     uint64 // commit attempts so far
	commitDone   chan struct{}
	// batchTimer is the pending batch timer, or nil. There is at most one.
	// Its own callback clears it, or a commit that stopped it before it
	// fired (see noteApplied).
	batchTimer *time.Timer
	closed     bool

	closedFlag atomic.Bool // closed, readable without mu

	kick  chan struct{}
	stopc chan struct{}
	donec chan struct{}

	movedAside string // set by Open with MoveAsideCorrupt

	commitObservers map[int]func(CommitStats) // guarded by mu
	nextObserver    int                       // guarded by mu

	// derivedChecks counts the checks of a collection's index entries and
	// versions for damage (checkDerived). Tests read it.
	derivedChecks atomic.Int64
	// foldedBack counts the transactions that folded a fold's copies back
	// into the trees (abandonRebuildTx), each at once. Tests read it.
	foldedBack atomic.Int64
}

// Open opens or creates the cache file at path. Another process may hold
// the file for writing, or read-only when this Open is for writing. Open
// then waits at most opts.LockTimeout, and refuses with ErrLocked. A file
// another DB of this process holds is refused at once with
// ErrOpenInProcess (and ErrLocked), since waiting would not release it. If
// that DB is closing, Open waits for it instead, at most opts.LockTimeout.
func Open(path string, opts Options) (*DB, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.BatchInterval <= 0 {
		opts.BatchInterval = DefaultBatchInterval
	}
	if opts.BatchLimit <= 0 {
		opts.BatchLimit = DefaultBatchLimit
	}
	if opts.MmapSize <= 0 {
		opts.MmapSize = DefaultMmapSize
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.CheckpointRetention == 0 {
		opts.CheckpointRetention = DefaultCheckpointRetention
	}
	if opts.MaxTombstones == 0 {
		opts.MaxTombstones = DefaultMaxTombstones
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.writeAheadChunk <= 0 {
		opts.writeAheadChunk = defaultWriteAheadChunk
	}
	if !opts.ReadOnly {
		dir := filepath.Dir(path)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("creating directory for cache file %s: %w", path, err)
			}
		}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening cache file %s read-only: %w", path, err)
	}
	db, err := open(path, opts)
	if err == nil || !errors.Is(err, ErrCorrupt) || !opts.MoveAsideCorrupt || opts.ReadOnly {
		return db, err
	}
	aside := fmt.Sprintf("%s.corrupt-%d", path, time.Now().Unix())
	if rerr := os.Rename(path, aside); rerr != nil {
		return nil, fmt.Errorf("%w; moving it aside failed: %v", err, rerr)
	}
	utilruntime.HandleError(fmt.Errorf("boltinformer: %w; moved it to %s (kept for inspect) and starting with an empty cache: informers will list cold", err, aside))
	db, err = open(path, opts)
	if db != nil {
		db.movedAside = aside
	}
	return db, err
}

// open is Open without the corrupt-file recovery.
func open(path string, opts Options) (_ *DB, err error) {
	h, err := claim(path, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			h.unclaim()
		}
	}()
	unguarded, err := checkFile(path)
	if err != nil {
		return nil, err
	}
	// The page size matters only to a file bbolt creates. An existing file's
	// own is read from its meta pages. A damaged one keeps being reported as
	// before, against the OS page size.
	pageSize, mmapSize := 0, opts.MmapSize
	if st, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		pageSize = opts.PageSize
	} else if err == nil && !opts.ReadOnly {
		mmapSize = max(mmapSize, mmapRoom(st.Size()))
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         opts.LockTimeout,
		ReadOnly:        opts.ReadOnly,
		NoSync:          opts.NoSync,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: mmapSize,
		PageSize:        pageSize,
	})
	if err != nil {
		return nil, openError(path, opts, err)
	}
	if unguarded {
		utilruntime.HandleError(fmt.Errorf("boltinformer: %s: neither of bbolt's meta pages reads as this build expects (bbolt %s's layout), yet bbolt opened the file: the truncation check (persist/filecheck.go) no longer understands bbolt's layout, and a truncated file would crash the process on open instead of failing with ErrCorrupt. Report it; pin go.etcd.io/bbolt to the version hack/upstream-versions.txt records", path, bboltLayoutVersion))
	}
	h.opened(path)
	db := &DB{
		holder:          h,
		path:            path,
		opts:            opts,
		bolt:            bdb,
		codec:           NewCodec(opts.Scheme),
		collections:     map[string]*Collection{},
		commitObservers: map[int]func(CommitStats){},
		commitDone:      make(chan struct{}),
		kick:            make(chan struct{}, 1),
		stopc:           make(chan struct{}),
		donec:           make(chan struct{}),
	}
	if err := db.checkSchema(); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if opts.ReadOnly {
		close(db.donec)
	} else {
		go db.run()
	}
	return db, nil
}

func openError(path string, opts Options, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("%w: %s: held by another process; gave up after %s. Stop the process that has it open, or read a hot snapshot of it instead (DB.SnapshotFile in that process; see docs/operations.md, \"Snapshots and inspect\")",
			ErrLocked, path, opts.LockTimeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrInvalidMapping):
		return fmt.Errorf("%w: %s: %v. Move the file aside (keep it for inspect) and start cold", ErrCorrupt, path, err)
	}
	return fmt.Errorf("opening cache file %s: %w", path, err)
}

func (db *DB) checkSchema() error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(format.MetaBucket)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("%w: %s has buckets but no %q metadata", ErrNotCacheFile, db.path, format.MetaBucket)
			}
			if db.opts.ReadOnly {
				return fmt.Errorf("%w: %s is empty", ErrNotCacheFile, db.path)
			}
			return initSchema(tx)
		}
		raw := meta.Get(format.SchemaKey)
		v, err := strconv.Atoi(string(raw))
		if err != nil {
			return fmt.Errorf("%w: %s: schema %q is not a number", ErrNotCacheFile, db.path, raw)
		}
		if v < oldestSchema || v > schemaVersion {
			return fmt.Errorf("%w: %s has schema %d, this build reads schema %d; use the boltinformer release that wrote it, or delete the file to start cold",
				ErrSchemaUnsupported, db.path, v, schemaVersion)
		}
		if tx.Bucket(format.CollectionsBucket) == nil {
			// Every collection lives below it, so the file is corrupt
			// (and moved aside with Options.MoveAsideCorrupt).
			return fmt.Errorf("it has no %q bucket", format.CollectionsBucket)
		}
		if v < schemaVersion && !db.opts.ReadOnly {
			return errUpgradeSchema
		}
		return nil
	}
	// A file with its schema needs no write transaction, and no fsync, to
	// open. Only an empty one is initialized.
	fresh := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if tx.Bucket(format.MetaBucket) == nil && !db.opts.ReadOnly {
			fresh = true
			return nil
		}
		return check(tx)
	})
	upgrade := errors.Is(err, errUpgradeSchema)
	switch {
	case errors.Is(err, ErrNotCacheFile), errors.Is(err, ErrSchemaUnsupported):
		return err
	case err != nil && !upgrade:
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, db.path, err)
	}
	// Only what a read finds makes the file corrupt. A write that fails
	// says the disk refused it (full, out of quota), not that the file is
	// damaged. bbolt leaves the file as it was, so it must not be moved
	// aside (Options.MoveAsideCorrupt) and its cache lost.
	var what string
	switch {
	case fresh:
		what, err = "initializing it", db.bolt.Update(check)
	case upgrade:
		what = fmt.Sprintf("upgrading its schema to %d", schemaVersion)
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(format.MetaBucket).Put(format.SchemaKey, []byte(strconv.Itoa(schemaVersion)))
		})
	}
	if err != nil && !errors.Is(err, ErrNotCacheFile) {
		return fmt.Errorf("opening cache file %s: %s: %w. The file was left as it was: free space on its disk, or raise its quota, and open it again", db.path, what, err)
	}
	return err
}

// errUpgradeSchema is check's report of a version-1 file opened for writing.
var errUpgradeSchema = errors.New("older schema: upgrade")

func initSchema(tx *bolt.Tx) error {
	meta, err := tx.CreateBucket(format.MetaBucket)
	if err != nil {
		return err
	}
	if err := meta.Put(format.SchemaKey, []byte(strconv.Itoa(schemaVersion))); err != nil {
		return err
	}
	if err := meta.Put(format.CreatedKey, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return err
	}
	_, err = tx.CreateBucket(format.CollectionsBucket)
	return err
}

// MovedAside returns where Open moved a corrupt file, or "".
func (db *DB) MovedAside() string { return db.movedAside }

// Path returns the file's path.
func (db *DB) Path() string { return db.path }

// Close commits what is pending, stops the commit goroutine and closes the
// file. It returns the final commit's error, if any. Those changes are lost,
// and a restarted watch re-delivers them. Reads that need the file fail
// with ErrClosed once Close returns.
func (db *DB) Close() error {
	// Setting closed under applyMu orders it against Apply. Every Apply
	// either finished before, and is in the final commit, or sees closed.
	db.applyMu.Lock()
	db.mu.Lock()
	wasClosed := db.closed
	db.closed = true
	db.mu.Unlock()
	db.closedFlag.Store(true)
	db.applyMu.Unlock()
	if wasClosed {
		return nil
	}
	db.holder.close()
	var err error
	if !db.opts.ReadOnly {
		close(db.stopc)
		<-db.donec
		err = db.commit()
	}
	db.mu.Lock()
	close(db.commitDone)
	db.commitDone = make(chan struct{})
	db.mu.Unlock()
	if cerr := db.bolt.Close(); err == nil {
		err = cerr
	}
	db.holder.unclaim()
	return err
}

// view runs fn in a read transaction of the file. After Close it fails
// with ErrClosed, which callers test for, instead of bbolt's error.
func (db *DB) view(fn func(*bolt.Tx) error) error {
	return db.closedErr(db.bolt.View(fn))
}

// closedErr returns err, or ErrClosed where err is bbolt's report of a
// closed file.
func (db *DB) closedErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %s", ErrClosed, db.path)
	}
	return err
}

// Snapshot writes a consistent copy of the committed file to w while writes
// continue, and returns the bytes written.
func (db *DB) Snapshot(w io.Writer) (int64, error) {
	var n int64
	err := db.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// SnapshotFile flushes pending changes, then writes a consistent copy of the
// file to path (mode 0600) through a temporary file and a rename, so path
// never holds a partial snapshot. The copy opens with Open like any cache file.
func (db *DB) SnapshotFile(ctx context.Context, path string) error {
	if err := db.Flush(ctx); err != nil {
		return fmt.Errorf("snapshot of %s: flushing: %w", db.path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", db.path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("snapshot of %s: %w", db.path, err)
	}
	if _, err := db.Snapshot(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("snapshot of %s to %s: %w", db.path, path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("snapshot of %s to %s: %w", db.path, path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("snapshot of %s to %s: %w", db.path, path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// mmapRoom is the memory map Open gives an existing file of size bytes.
// It leaves room for the file to double. A restart that recovers what
// changed while the process was down rewrites a share of the collection at
// once. bbolt grows its map past a gigabyte a gigabyte at a time. A recovery
// of 10% of 100,000 Pods crossed that step and remapped mid-recovery. That
// cost 0.4 CPU-s of copying every in-memory node out of the old map, with
// every reader waited for. The room is address space only, and none on a
// 32-bit platform.
func mmapRoom(size int64) int {
	if strconv.IntSize < 64 || size <= 0 || size > maxMmapRoom/2 {
		return 0
	}
	return int(2 * size)
}

// maxMmapRoom bounds mmapRoom. bbolt's own limit on a map is far above it.
// maxMapSize on 64-bit platforms is 256 TiB.
const maxMmapRoom = 1 << 40
