package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// IndexValuesFunc computes the values of the named index for obj. It is how a
// collection (re)builds an index from stored objects.
type IndexValuesFunc func(index string, obj runtime.Object) ([]string, error)

// CollectionOptions configures DB.Collection. Every zero value is usable.
type CollectionOptions struct {
	// Description is free-form metadata shown by tools (resource, namespace,
	// selectors). It is written when the collection is opened for writing.
	Description map[string]string

	// Indexes names the collection's secondary indexes with a version each.
	// An index stored under the same name and version is trusted as is. An
	// index whose version differs, or that is new, is rebuilt from the
	// stored objects with IndexValues before the collection is returned.
	// A stored index not named here is kept dormant and unread. AddIndexes
	// may adopt it at the same version without a rebuild. client-go's
	// informers get most of their indexes from AddIndexers, after
	// construction. The first change applied drops the dormant indexes,
	// because it would not keep them up to date. Change the version
	// whenever an index function's behaviour changes.
	Indexes map[string]string

	// IndexValues computes index values when an index has to be (re)built.
	// Required when Indexes names an index the file does not hold at that
	// version.
	IndexValues IndexValuesFunc

	// CacheObjects and CacheBytes bound the cache of decoded objects (bytes are
	// counted as encoded record bytes). Zero for both keeps every object
	// decoded in memory, as client-go does. With a bound, memory stays flat
	// however many objects are stored, and cold reads decode from the file.
	// An object whose record alone is larger than CacheBytes is not cached,
	// so it never pushes the others out. Each read of it decodes it again.
	CacheObjects int
	CacheBytes   int64

	// Provenance, if not nil, is what the owner records about where the
	// collection's contents come from. For an informer, that is the
	// cluster, the list and the transform. It is compared with the recorded
	// provenance when the collection opens. If any pair differs, is missing
	// or is extra, every stored object, index entry and the resourceVersion
	// are dropped before the collection is returned. ResetAtOpen then says
	// why. Nil neither checks nor records anything, for an owner that
	// checks later with CheckProvenance.
	Provenance map[string]string
}

// Collection is one set of objects in a DB with its secondary indexes and its
// resource version, stored in its own bucket tree.
//
// Applied changes are visible to every read at once and reach the file with
// the next group commit. Reads return objects shared with other readers and
// with the cache. Treat them as read-only, as with client-go's stores.
//
// Methods are safe for concurrent use, except that AddIndexes must not run
// concurrently with Apply.
type Collection struct {
	db   *DB
	name string
	key  []byte

	cache *objectCache
	// mem is set once an unbounded cache is known to hold every object, with
	// every index in memory (see memindex.go). Apply keeps both current.
	// Readers holding mu only for reading publish it, hence atomic. memMu
	// serializes those publishers.
	mem   atomic.Pointer[memIndex]
	memMu sync.Mutex
	// aheadMu lets one decodeAhead run at a time. The others wait for it
	// and find its objects cached.
	aheadMu sync.Mutex

	// closed is set by Close. From then on, every write fails with
	// ErrClosed (closedErr).
	closed atomic.Bool
	// released is set, under mu, once Close has flushed and given up the
	// collection's name. Reads that need the file fail from then on (see
	// view). A reader holding mu sees it set or finishes before Close
	// returns. Reads of the file alone load it without mu (fileView).
	released atomic.Bool

	// mu guards the fields below. Apply takes it for writing. Reads that
	// consult the layers or the file take it for reading. That keeps them
	// from caching a decoded object older than a concurrent Apply. The
	// layers and journal are the write path's states. commit.go's table
	// says who writes each, under which locks.
	mu         sync.RWMutex
	pending    *layer
	committing *layer // nil unless a commit of it is in flight or failed
	// journaled and folding hold the changes in the file's journal, not yet
	// in the trees. They are nil when there are none.
	journaled, folding *layer
	journal            journalState // guarded by db.commitMu, not mu
	rv                 string
	mustList           bool              // see MustList
	indexes            map[string]string // name -> version
	// dormant maps the names of stored indexes the options did not name to
	// their versions. They are kept for AddIndexes to adopt until the first
	// Apply drops them.
	dormant    map[string]string
	provenance map[string]string // as recorded in the file

	resetAtOpen *ProvenanceMismatch // set once by DB.Collection
	// damageSetAside is why DB.Collection emptied the collection, if it
	// found its structure damaged (see DamageSetAside).
	damageSetAside error
	// journalSetAside is why DB.Collection set the journal aside, if it
	// did (see JournalSetAside).
	journalSetAside error
	// rebuiltAtOpen is why DB.Collection rebuilt damaged index entries or
	// versions, if it did (see RebuiltAtOpen).
	rebuiltAtOpen error
	// recordsSetAside is why an index build set records aside, if one did
	// (see RecordsSetAside). Guarded by mu.
	recordsSetAside error
	// droppedCheckpoints names the checkpoints DB.Collection dropped as
	// abandoned (see DroppedCheckpoints).
	droppedCheckpoints []string
	// clockBase is the collection's in-use clock when it was opened, and
	// clockStart the time then, by Options.now (see inUseNow). Set by load
	// before the collection is shared.
	clockBase, clockStart time.Time

	// checkpoints holds the open checkpoints by name. Guarded by mu.
	checkpoints map[string]*Checkpoint
}

// Collection opens, or creates, the named collection.
func (db *DB) Collection(name string, opts CollectionOptions) (*Collection, error) {
	if err := checkBucketName("collection", name); err != nil {
		return nil, err
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := db.collections[name]; ok {
		db.mu.Unlock()
		return nil, fmt.Errorf("collection %q is already open on %s", name, db.path)
	}
	db.mu.Unlock()

	c := &Collection{
		db:      db,
		name:    name,
		key:     []byte(name),
		cache:   newObjectCache(opts.CacheObjects, opts.CacheBytes),
		pending: newLayer(),
		indexes: map[string]string{},
	}
	var err error
	if db.opts.ReadOnly {
		err = db.view(c.load)
	} else {
		// Most opens find the collection as the options describe it. They
		// need no write transaction, hence no fsync. A component opening
		// sixty informers would otherwise wait for sixty.
		unchanged := false
		check := func(tx *bolt.Tx) error {
			var err error
			unchanged, err = c.unchanged(tx, opts)
			return err
		}
		err = db.view(check)
		// Each set-aside is made at most once, and the check runs again
		// after it: the journal's set-aside may reveal damage the check
		// stopped short of, and the reverse.
		for err != nil {
			var setAside func(*bolt.Tx) error
			switch {
			case errors.Is(err, errCollectionDamaged) && c.damageSetAside == nil:
				// A collection whose structure is damaged cannot be
				// read, nor written without failing every commit of the
				// file. So it is emptied whole, and its owner lists it
				// as on a cold start.
				c.damageSetAside, setAside = err, c.setAsideDamagedTx
			case errors.Is(err, errJournalUnreadable) && c.journalSetAside == nil && c.damageSetAside == nil:
				// Damage to the journal is set aside as damage to a
				// record is. It never makes a collection that cannot be
				// opened.
				c.journalSetAside = err
				setAside = func(tx *bolt.Tx) error { return c.setAsideJournalTx(tx, opts.IndexValues != nil) }
			}
			if setAside == nil {
				break
			}
			db.commitMu.Lock()
			err = db.closedErr(db.bolt.Update(setAside))
			db.commitMu.Unlock()
			if err == nil {
				err = db.view(check)
			}
		}
		if err == nil && !unchanged {
			db.commitMu.Lock()
			// create may write the trees in place. A fold in progress is
			// finished first, a chunk per transaction. If that fails,
			// create folds the copies back in its own (fold.go).
			_ = c.finishFold(false)
			err = db.closedErr(db.bolt.Update(func(tx *bolt.Tx) error { return c.create(tx, opts) }))
			db.commitMu.Unlock()
		}
	}
	if err == nil {
		err = c.completeIfEmpty()
	}
	if err != nil {
		return nil, fmt.Errorf("opening collection %q in %s: %w", name, db.path, err)
	}
	if c.damageSetAside != nil {
		utilruntime.HandleError(fmt.Errorf("boltinformer: collection %q in %s: %w; it was emptied, and its owner lists it again as on a cold start", name, db.path, c.damageSetAside))
	}
	if c.recordsSetAside != nil {
		utilruntime.HandleError(fmt.Errorf("boltinformer: collection %q in %s: building an index: %w; the records were set aside, and its owner lists it again", name, db.path, c.recordsSetAside))
	}
	if c.rebuiltAtOpen != nil {
		utilruntime.HandleError(fmt.Errorf("boltinformer: collection %q in %s: damaged entries were found and rebuilt from the stored objects, losing nothing: %w", name, db.path, c.rebuiltAtOpen))
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.collections[name]; ok {
		return nil, fmt.Errorf("collection %q is already open on %s", name, db.path)
	}
	db.collections[name] = c
	return c, nil
}

func (c *Collection) bucket(tx *bolt.Tx) *bolt.Bucket {
	return tx.Bucket(format.CollectionsBucket).Bucket(c.key)
}

// load reads the stored metadata of an existing collection. A collection
// whose structure is damaged is an error wrapping errCollectionDamaged.
// Nothing of it is loaded then.
func (c *Collection) load(tx *bolt.Tx) error {
	b, err := c.collectionBucket(tx)
	if err != nil {
		return err
	}
	if b == nil {
		return ErrNoCollection
	}
	if err := checkStructure(b); err != nil {
		return err
	}
	meta := b.Bucket(format.CollMetaBucket)
	provenance, err := loadProvenance(meta)
	if err != nil {
		return fmt.Errorf("%w: %w", errCollectionDamaged, err)
	}
	indexes := map[string]string{}
	if raw := meta.Get(format.IndexVersionsKey); raw != nil {
		if err := msgpack.Unmarshal(raw, &indexes); err != nil {
			return damagedError("its index versions do not decode: %v", err)
		}
	}
	if err := checkIndexBuckets(b, indexes); err != nil {
		return err
	}
	if err := checkRebuild(b); err != nil {
		return err
	}
	if err := c.loadJournal(b); err != nil {
		return err
	}
	rv := meta.Get(format.RVKey)
	if len(rv) > 0 && !plausibleResourceVersion(rv) {
		return damagedError("its resourceVersion %q is none a server gives", rv)
	}
	c.rv = string(rv)
	c.mustList = meta.Get(format.MustListKey) != nil
	c.loadClock(b)
	c.provenance, c.indexes = provenance, indexes
	return nil
}

// errCollectionDamaged marks a collection whose structure cannot be read
// at open. A bucket it needs is missing, a plain value stands where a
// bucket belongs or a bucket where a value does, or its metadata does not
// decode. Its resourceVersion may be none a server gives. Reads would fail or
// panic on it, and commits would fail for every collection of the file.
// So DB.Collection empties it (setAsideDamagedTx), and a read-only open
// fails.
var errCollectionDamaged = errors.New("the collection's structure is damaged")

// damagedError returns an error wrapping errCollectionDamaged and
// ErrCorruptRecord that says what is damaged.
func damagedError(format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{errCollectionDamaged, ErrCorruptRecord}, args...)...)
}

// collectionBucket returns the collection's bucket, or nil if the file has
// none. A plain value under the collection's name is damage.
func (c *Collection) collectionBucket(tx *bolt.Tx) (*bolt.Bucket, error) {
	root := tx.Bucket(format.CollectionsBucket)
	if b := root.Bucket(c.key); b != nil {
		return b, nil
	}
	if root.Get(c.key) != nil {
		return nil, damagedError("a plain value stands where its bucket belongs")
	}
	return nil, nil
}

// Every collection has the required sub-buckets since it was created. The
// optional ones are created when first written. A plain value under any
// of these names would fail that write, and so every commit of the file.
var (
	requiredBuckets = [][]byte{format.CollMetaBucket, format.ObjectsBucket, format.IndexesBucket}
	optionalBuckets = [][]byte{format.VersionsBucket, format.JournalBucket, format.CheckpointsBucket, format.TombstonesBucket, format.CheckpointSeenBucket, format.RebuildBucket}
)

// checkStructure returns an error wrapping errCollectionDamaged if the
// collection b lacks a required sub-bucket, or holds a plain value where a
// sub-bucket belongs. Below checkpoints and tombstones, each entry must be
// a checkpoint's bucket, which commits write into. So must each entry of
// indexes be an index's bucket, since an index built under its name would
// fail. Meta and the checkpoints' stamps hold only values: a bucket there
// hides a value, and fails every commit that writes it.
func checkStructure(b *bolt.Bucket) error {
	for _, name := range slices.Concat(requiredBuckets, optionalBuckets) {
		if b.Get(name) != nil {
			return damagedError("a plain value stands where its %q bucket belongs", name)
		}
	}
	for _, name := range requiredBuckets {
		if b.Bucket(name) == nil {
			return damagedError("it has no %q bucket", name)
		}
	}
	err := b.Bucket(format.IndexesBucket).ForEach(func(k, v []byte) error {
		if v != nil {
			return damagedError("a plain value stands where index %q's bucket belongs", k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range [][]byte{format.CollMetaBucket, format.CheckpointSeenBucket} {
		pb := b.Bucket(name)
		if pb == nil {
			continue
		}
		err := pb.ForEach(func(k, v []byte) error {
			if v == nil {
				return damagedError("a bucket stands where the value %q belongs in %q", k, name)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, name := range [][]byte{format.CheckpointsBucket, format.TombstonesBucket} {
		pb := b.Bucket(name)
		if pb == nil {
			continue
		}
		err := pb.ForEach(func(k, v []byte) error {
			if v != nil {
				return damagedError("a plain value stands where checkpoint %q's bucket belongs in %q", k, name)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkIndexBuckets returns an error wrapping errCollectionDamaged if an
// index the collection b records (indexes) lacks its bucket or the
// byValue and byKey buckets in it.
func checkIndexBuckets(b *bolt.Bucket, indexes map[string]string) error {
	idx := b.Bucket(format.IndexesBucket)
	for _, name := range sortedKeys(indexes) {
		ib := idx.Bucket([]byte(name))
		switch {
		case ib == nil:
			return damagedError("index %q (version %q) has no bucket", name, indexes[name])
		case ib.Bucket(format.ByValueBucket) == nil || ib.Bucket(format.ByKeyBucket) == nil:
			return damagedError("index %q lacks its %q or %q bucket", name, format.ByValueBucket, format.ByKeyBucket)
		}
	}
	return nil
}

// plausibleResourceVersion reports whether rv could be a resourceVersion a
// server gave. Kubernetes resourceVersions are opaque strings. Those an
// apiserver gives are decimal etcd revisions, and other servers give
// tokens of printable characters. So a value with bytes outside printable
// ASCII, or longer than any token, is damage.
func plausibleResourceVersion(rv []byte) bool {
	if len(rv) > maxResourceVersion {
		return false
	}
	for _, c := range rv {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// maxResourceVersion bounds a plausible resourceVersion. An etcd revision
// has at most 20 digits. The bound leaves room for other servers' tokens.
const maxResourceVersion = 1024

// setAsideDamagedTx deletes the collection, whose structure is damaged,
// with everything below it. DB.Collection then creates it afresh. Its
// checkpoints go with it, as whenever a collection starts cold.
func (c *Collection) setAsideDamagedTx(tx *bolt.Tx) error {
	root := tx.Bucket(format.CollectionsBucket)
	if root.Bucket(c.key) != nil {
		return root.DeleteBucket(c.key)
	}
	return root.Delete(c.key)
}

// DamageSetAside returns why DB.Collection found the collection's structure
// damaged, or nil. A bucket it needs was missing or held a plain value, a
// bucket stood where a value belongs, its metadata did not decode, or its
// resourceVersion was none a server gives. DB.Collection then emptied it: objects,
// indexes, checkpoints and resourceVersion. So the owner lists it, as on a
// cold start. A read-only open of a damaged collection fails instead, with
// ErrCorruptRecord.
func (c *Collection) DamageSetAside() error { return c.damageSetAside }

// unchanged loads the stored collection and reports whether create would
// write nothing. That is so when the collection exists with the provenance,
// description and index versions opts gives, and its index entries and
// versions are sound (checkDerived). Errors are those of a corrupt
// collection.
func (c *Collection) unchanged(tx *bolt.Tx, opts CollectionOptions) (bool, error) {
	b, err := c.collectionBucket(tx)
	if err != nil || b == nil {
		return false, err
	}
	if err := c.load(tx); err != nil {
		return false, err
	}
	if opts.Provenance != nil && diffProvenance(c.provenance, opts.Provenance) != nil {
		return false, nil
	}
	if abandoned, unstamped := c.abandonedCheckpoints(b); len(abandoned)+len(unstamped) > 0 {
		return false, nil
	}
	if damaged, versionsErr := c.checkDerived(b, c.indexes); len(damaged) > 0 || versionsErr != nil {
		return false, nil // rebuilt by create
	}
	if byValueOwed(b) {
		return false, nil // paid by create
	}
	if b.Bucket(format.VersionsBucket) == nil {
		return false, nil // built by create
	}
	if undecodableInfo(b.Bucket(format.CollMetaBucket)) {
		return false, nil // dropped by create
	}
	for name, v := range opts.Indexes {
		if c.indexes[name] != v {
			return false, nil
		}
	}
	if opts.Description != nil {
		raw := b.Bucket(format.CollMetaBucket).Get(format.DescriptionKey)
		var stored map[string]string
		if raw == nil || msgpack.Unmarshal(raw, &stored) != nil || !maps.Equal(stored, opts.Description) {
			return false, nil
		}
	}
	c.indexes, c.dormant = splitIndexes(c.indexes, opts.Indexes)
	return true, nil
}

// create makes the collection's buckets if needed, loads its metadata and
// brings its indexes to opts.Indexes.
func (c *Collection) create(tx *bolt.Tx, opts CollectionOptions) error {
	root := tx.Bucket(format.CollectionsBucket)
	b := root.Bucket(c.key)
	if b == nil {
		var err error
		if b, err = root.CreateBucket(c.key); err != nil {
			return err
		}
		for _, name := range [][]byte{format.CollMetaBucket, format.ObjectsBucket, format.IndexesBucket, format.VersionsBucket} {
			if _, err := b.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := writeJournalRecord(b, &journalState{}); err != nil {
			return err
		}
	}
	if err := c.load(tx); err != nil {
		return err
	}
	// What follows may write the trees in place, or check or rebuild what
	// is derived from them. A fold's copies are folded back first, and the
	// next fold starts afresh (fold.go).
	if _, err := c.abandonRebuildTx(b); err != nil {
		return err
	}
	if opts.Provenance != nil {
		// Reset before the indexes are brought up to date, because a reset
		// leaves nothing to index.
		var err error
		if c.resetAtOpen, err = c.checkProvenanceTx(tx, opts.Provenance, false); err != nil {
			return err
		}
		if c.resetAtOpen != nil {
			c.dropJournalLayers(0) // the journal was deleted with the rest
		}
	}
	var err error
	if c.droppedCheckpoints, err = c.dropAbandonedCheckpointsTx(b); err != nil {
		return err
	}
	if err := c.dropDamagedDerivedTx(b); err != nil {
		return err
	}
	// Before any index is built, and before a bounded cache reads byValue.
	if err := payByValueTx(b, sortedKeys(c.indexes)); err != nil {
		return err
	}
	if b.Bucket(format.VersionsBucket) == nil {
		if err := c.buildVersionsTx(b); err != nil {
			return fmt.Errorf("building the index of versions: %w", err)
		}
	}
	meta := b.Bucket(format.CollMetaBucket)
	if err := dropUndecodableInfo(meta); err != nil {
		return err
	}
	if opts.Description != nil {
		raw, err := msgpack.Marshal(opts.Description)
		if err != nil {
			return err
		}
		if err := meta.Put(format.DescriptionKey, raw); err != nil {
			return err
		}
	}
	c.indexes, c.dormant = splitIndexes(c.indexes, opts.Indexes)
	idx := b.Bucket(format.IndexesBucket)
	for name, v := range opts.Indexes {
		if stored, ok := c.dormant[name]; ok && stored != v {
			// Stored at another version, so it is rebuilt below.
			if err := idx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			delete(c.dormant, name)
		}
	}
	var build []string
	for name := range opts.Indexes {
		if _, ok := c.indexes[name]; !ok {
			build = append(build, name)
		}
	}
	if len(build) > 0 {
		if opts.IndexValues == nil {
			return fmt.Errorf("indexes %v must be built but no IndexValues function was given", build)
		}
		treeBytes, err := c.foldJournalForBuild(b)
		if err != nil {
			return err
		}
		c.dropJournalLayers(treeBytes)
		if err := c.buildIndexes(tx, &c.journal, build, opts.Indexes, opts.IndexValues, true); err != nil {
			return err
		}
	}
	return nil
}

// splitIndexes divides the stored indexes into those named at the same
// version, which are in use, and the dormant others. A name with another
// version is among the dormant until create rebuilds it.
func splitIndexes(stored, named map[string]string) (use, dormant map[string]string) {
	use = map[string]string{}
	for name, v := range stored {
		if named[name] == v {
			use[name] = v
		} else {
			if dormant == nil {
				dormant = map[string]string{}
			}
			dormant[name] = v
		}
	}
	return use, dormant
}

// buildIndexes creates the named indexes from the stored objects and records
// their versions. An error from fn aborts the caller's transaction, so no
// partial index survives. A record that does not decode cannot be indexed.
// With setAside, as at open, it is set aside with the must-list mark
// (setAsideUnreadableTx), because an index build that failed on it would
// fail at every open. Without, the build fails with an
// *UnreadableRecordsError naming every such record. j is where the journal
// stands, folded before any build.
func (c *Collection) buildIndexes(tx *bolt.Tx, j *journalState, names []string, versions map[string]string, fn IndexValuesFunc, setAside bool) error {
	sort.Strings(names)
	for _, name := range names {
		if err := checkBucketName("index", name); err != nil {
			return err
		}
	}
	b := c.bucket(tx)
	idx := b.Bucket(format.IndexesBucket)
	type target struct{ byValue, byKey *bolt.Bucket }
	targets := make([]target, len(names))
	for i, name := range names {
		if err := idx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		ib, err := idx.CreateBucket([]byte(name))
		if err != nil {
			return err
		}
		t := target{}
		if t.byValue, err = ib.CreateBucket(format.ByValueBucket); err != nil {
			return err
		}
		if t.byKey, err = ib.CreateBucket(format.ByKeyBucket); err != nil {
			return err
		}
		targets[i] = t
	}
	var unreadable []string
	var why []error
	err := objectsTree(b).ForEach(func(k, rec []byte) error {
		key := string(k)
		obj, ok := c.cache.get(key)
		if !ok {
			var err error
			if obj, err = c.db.codec.Decode(rec); err != nil {
				unreadable = append(unreadable, key)
				why = append(why, fmt.Errorf("key %q: %w", key, err))
				return nil
			}
		}
		for i, name := range names {
			values, err := fn(name, obj)
			if err != nil {
				return fmt.Errorf("index %q of %q: %w", name, key, err)
			}
			if err := writeIndexValues(targets[i].byValue, targets[i].byKey, key, nil, values); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(unreadable) > 0 && !setAside {
		return &UnreadableRecordsError{Keys: unreadable, Err: errors.Join(why...)}
	}
	for _, name := range names {
		c.indexes[name] = versions[name]
	}
	if len(unreadable) > 0 {
		if err := c.setAsideUnreadableTx(b, j, unreadable, errors.Join(why...)); err != nil {
			return err
		}
	}
	return c.writeIndexVersions(b)
}

// setAsideUnreadableTx deletes the records of keys, which do not decode,
// with their versions and index entries, and sets the must-list mark. The
// checkpoints' acknowledgements of them become tombstones. why says what
// could not be read, and RecordsSetAside reports it. The dormant indexes
// are dropped, since they index the records deleted.
func (c *Collection) setAsideUnreadableTx(b *bolt.Bucket, j *journalState, keys []string, why error) error {
	objects := objectsTree(b)
	records := make(map[string][]byte, len(keys))
	for _, key := range keys {
		records[key] = bytes.Clone(objects.Get([]byte(key)))
	}
	c.dormant = nil
	deleted := &change{deleted: true}
	if err := c.writeTrees(b, j, keys, func(string) *change { return deleted }); err != nil {
		return err
	}
	if err := c.tombstoneUnstoredAcksTx(b, func() map[string][]byte { return records }); err != nil {
		return err
	}
	if err := writeMustList(b.Bucket(format.CollMetaBucket), true); err != nil {
		return err
	}
	c.mustList = true
	c.recordsSetAside = errors.Join(c.recordsSetAside, why)
	return nil
}

// RecordsSetAside returns why an index build at open set aside stored
// records that do not decode, or nil. DB.Collection builds an index whose
// version changed from the records. A record that does not decode cannot be
// indexed. It was deleted, in the transaction that built the index, which
// also set the must-list mark (see MustList). AddIndexes sets nothing
// aside: it fails with an *UnreadableRecordsError instead.
func (c *Collection) RecordsSetAside() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.recordsSetAside
}

// dropUnusedIndexes deletes the stored indexes not in use, and records the
// versions left. Dormant indexes are not in use after a change, which they
// do not reflect. It is called in every transaction that changes the stored
// objects, so a stored index is never behind its objects. It is called only
// then. A tool may open a collection without naming its indexes, to clear a
// checkpoint, and must not lose them.
func (c *Collection) dropUnusedIndexes(b *bolt.Bucket) error {
	idx := b.Bucket(format.IndexesBucket)
	var unused [][]byte
	err := idx.ForEachBucket(func(name []byte) error {
		if _, ok := c.indexes[string(name)]; !ok {
			unused = append(unused, bytes.Clone(name))
		}
		return nil
	})
	if err != nil || len(unused) == 0 {
		return err
	}
	for _, name := range unused {
		if err := idx.DeleteBucket(name); err != nil {
			return err
		}
	}
	return c.writeIndexVersions(b)
}

// writeIndexVersions records the versions of the indexes in use and of the
// dormant ones, whose buckets are still in the file.
func (c *Collection) writeIndexVersions(b *bolt.Bucket) error {
	all := maps.Clone(c.indexes)
	maps.Copy(all, c.dormant)
	raw, err := msgpack.Marshal(all)
	if err != nil {
		return err
	}
	return b.Bucket(format.CollMetaBucket).Put(format.IndexVersionsKey, raw)
}

// writeIndexValues moves key from the old values to the new ones. An old
// value's entry is deleted in every form a build may have written. A nil
// byValue is owed (byvalueowed.go), and only byKey is written.
func writeIndexValues(byValue, byKey *bolt.Bucket, key string, old, values []string) error {
	if slices.Equal(old, values) {
		return nil
	}
	if byValue == nil {
		return writeByKey(byKey, key, values)
	}
	for _, v := range old {
		for _, k := range format.IndexEntryKeys(v, key) {
			if err := byValue.Delete(k); err != nil {
				return err
			}
		}
	}
	for _, v := range values {
		k, val := format.IndexEntry(v, key)
		if err := byValue.Put(k, val); err != nil {
			return err
		}
	}
	return writeByKey(byKey, key, values)
}

// writeByKey records key's values in byKey, deleting its entry if it has
// none.
func writeByKey(byKey *bolt.Bucket, key string, values []string) error {
	if len(values) == 0 {
		return byKey.Delete([]byte(key))
	}
	raw, err := msgpack.Marshal(values)
	if err != nil {
		return err
	}
	return byKey.Put([]byte(key), raw)
}

// JournalSetAside returns why DB.Collection found the collection's journal
// unreadable, or nil. The journal was deleted and the must-list mark set in
// one transaction. So the collection holds the state its trees hold, which
// is every object as it was at some point. It lacks the changes the journal
// held, and must be listed before it is complete (see MustList). An object
// that a checkpoint acknowledged and only the journal held left a
// tombstone.
func (c *Collection) JournalSetAside() error { return c.journalSetAside }

// DroppedCheckpoints returns the checkpoints DB.Collection dropped because
// none had been opened for Options.CheckpointRetention of the collection's
// in-use time, with their acknowledgements and tombstones.
func (c *Collection) DroppedCheckpoints() []string { return slices.Clone(c.droppedCheckpoints) }

// DB returns the file the collection lives in.
func (c *Collection) DB() *DB { return c.db }

// Name returns the collection's name.
func (c *Collection) Name() string { return c.name }

// Indexes returns the names and versions of the collection's indexes.
func (c *Collection) Indexes() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]string, len(c.indexes))
	for k, v := range c.indexes {
		out[k] = v
	}
	return out
}

// Apply applies ops and sets the collection's resource version to rv. All ops
// are encoded first. If one cannot be, Apply returns the error and nothing
// is applied. So does a key the file cannot store (see Op.Key). Applied ops are visible to reads when Apply returns, and reach the
// file, together with rv, in the next group commit.
func (c *Collection) Apply(ops []Op, rv string) error {
	return c.apply(ops, rv, true, nil, nil)
}

// apply applies ops. In the same layer, it sets the resource version to rv
// if setRV, and the must-list mark to *mustList if mustList is not nil.
// With only set, it applies just the ops whose key only accepts, asked
// under the lock that orders applies. Its error fails the apply, and no op
// applied means no layer change, mark included.
func (c *Collection) apply(ops []Op, rv string, setRV bool, mustList *bool, only func(key string) (bool, error)) error {
	if c.db.opts.ReadOnly {
		return ErrReadOnly
	}
	// One allocation for the batch, and the layers point into it. A bounded
	// cache's layers keep records, not objects, and reads decode them as
	// for the journal's. So a large Apply, such as a list, holds no more
	// decoded objects than the cache's bound until it is committed.
	keepObjects := !c.cache.bounded()
	changes := make([]change, len(ops))
	for i, op := range ops {
		if op.Delete {
			changes[i] = change{deleted: true, deletedAt: op.DeletedAt}
			continue
		}
		if op.Object == nil {
			return fmt.Errorf("%w: key %q: nil object", ErrUnencodable, op.Key)
		}
		if err := checkKey(op.Key); err != nil {
			return err
		}
		rec, err := c.db.codec.encode(op.Object, op.Payload, recycledRecord())
		if err != nil {
			return fmt.Errorf("key %q: %w", op.Key, err)
		}
		changes[i] = change{record: rec, indexes: op.Indexes}
		if keepObjects {
			changes[i].obj = op.Object
		}
		if m, err := meta.Accessor(op.Object); err == nil {
			changes[i].uid, changes[i].rv = string(m.GetUID()), m.GetResourceVersion()
		}
	}

	c.db.applyMu.RLock()
	c.mu.Lock()
	if c.db.closedFlag.Load() || c.closed.Load() {
		c.mu.Unlock()
		c.db.applyMu.RUnlock()
		return ErrClosed
	}
	if only != nil {
		n := 0
		for i, op := range ops {
			ok, err := only(op.Key)
			if err != nil {
				c.mu.Unlock()
				c.db.applyMu.RUnlock()
				return err
			}
			if ok {
				ops[n], changes[n] = op, changes[i]
				n++
			}
		}
		ops, changes = ops[:n], changes[:n]
		if n == 0 {
			c.mu.Unlock()
			c.db.applyMu.RUnlock()
			return nil
		}
	}
	if c.dormant != nil {
		// The dormant indexes would not reflect this change. The commit
		// that writes it drops them (dropUnusedIndexes).
		c.dormant = nil
	}
	mem := c.memory()
	for i, op := range ops {
		ch := &changes[i]
		if ch.deleted && len(c.checkpoints) > 0 {
			// Look up before the deletion is in the layer, so the lookup
			// finds the object's last state.
			c.tombstoneAcksLocked(op.Key, op.DeletedAt, func() (runtime.Object, bool) {
				obj, exists, err := c.getLocked(op.Key)
				return obj, exists || err != nil // unreadable: stored
			})
		}
		c.pending.put(op.Key, ch)
		if ch.deleted {
			c.cache.remove(op.Key)
		} else {
			c.cache.put(op.Key, op.Object, len(ch.record))
		}
		if mem != nil {
			mem.set(op.Key, ch.indexes)
		}
	}
	if setRV {
		c.pending.rv, c.pending.rvSet = rv, true
		c.rv = rv
	}
	if mustList != nil {
		c.pending.mustList, c.pending.mustListSet = *mustList, true
		c.mustList = *mustList
	}
	c.db.applySeq.Add(1)
	c.mu.Unlock()
	c.db.applyMu.RUnlock()
	c.db.noteApplied(max(len(ops), 1))
	return nil
}

// checkKey returns an error for an object key the file cannot store.
// bbolt refuses an empty key. A longer key than format.MaxObjectKey would
// leave no room for an index value in its byValue entries. A commit that
// failed on one key would fail every later commit of the file.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the object's key is empty, and the cache file cannot store an empty key. Give the object a name, or use a key function that never returns an empty key", ErrUnencodable)
	case len(key) > format.MaxObjectKey:
		return fmt.Errorf("%w: key %q... is %d bytes, and the cache file stores keys of at most %d bytes. Kubernetes' namespace/name keys are at most 317 bytes: use a key function that returns shorter keys", ErrUnencodable, key[:64], len(key), format.MaxObjectKey)
	}
	return nil
}

// checkBucketName returns an error for a name, given by the caller, that
// cannot name a bbolt bucket.
func checkBucketName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name must not be empty", what)
	case len(name) > bolt.MaxKeySize:
		return fmt.Errorf("%s name %q... is %d bytes, and the cache file stores names of at most %d bytes: choose a shorter name", what, name[:64], len(name), bolt.MaxKeySize)
	}
	return nil
}

// ResourceVersion returns the resource version of the latest Apply, or the
// stored one if nothing was applied since the collection was opened.
func (c *Collection) ResourceVersion() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

// CommittedResourceVersion returns the resource version on disk.
func (c *Collection) CommittedResourceVersion() (string, error) {
	var rv string
	err := c.fileView(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		rv = string(b.Bucket(format.CollMetaBucket).Get(format.RVKey))
		return nil
	})
	return rv, err
}

// AddIndexes builds new indexes over the stored objects and adds them to the
// collection. It first flushes pending changes, then builds every index in
// one transaction. If fn fails for any object, no index is added and the
// error names the object. If stored records do not decode, no index is
// added, nothing changes, and the error is an *UnreadableRecordsError
// naming them. The caller decides what becomes of them: an owner that can
// list sets them aside (SetAside) and adds the indexes again. The caller
// must not Apply concurrently (Apply would compute values without the new
// indexes).
func (c *Collection) AddIndexes(ctx context.Context, versions map[string]string, fn IndexValuesFunc) error {
	if c.db.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := c.Flush(ctx); err != nil {
		return fmt.Errorf("adding indexes to %q: %w", c.name, err)
	}
	c.db.commitMu.Lock()
	defer c.db.commitMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.closedErr(); err != nil { // closed during the flush
		return err
	}
	names := make([]string, 0, len(versions))
	for name := range versions {
		if _, ok := c.indexes[name]; ok {
			return fmt.Errorf("indexer conflict: %q already exists", name)
		}
		names = append(names, name)
	}
	before, dormantBefore := c.indexes, c.dormant
	c.indexes, c.dormant = maps.Clone(before), maps.Clone(dormantBefore)
	// Adopt a dormant index at the same version. Nothing was applied since
	// the collection opened, so it is what building it would write.
	var build []string
	for _, name := range names {
		if v, ok := c.dormant[name]; ok && v == versions[name] {
			c.indexes[name] = v
			delete(c.dormant, name)
			continue
		}
		build = append(build, name)
	}
	if len(build) > 0 {
		for _, name := range build {
			delete(c.dormant, name) // rebuilt at this version
		}
		// The build folds the journal into the trees. A fold in progress
		// is finished first, a chunk per transaction (fold.go).
		_ = c.finishFold(true)
		var j journalState
		err := c.db.bolt.Update(func(tx *bolt.Tx) error {
			treeBytes, err := c.foldJournalForBuild(c.bucket(tx))
			if err != nil {
				return err
			}
			j = journalState{treeBytes: treeBytes}
			return c.buildIndexes(tx, &j, build, versions, fn, false)
		})
		if err = c.db.closedErr(err); err != nil {
			c.indexes, c.dormant = before, dormantBefore
			return fmt.Errorf("adding indexes to %q: %w", c.name, err)
		}
		c.dropJournalLayers(j.treeBytes)
	}
	if c.memory() != nil {
		// Every object is still cached, so load the new indexes beside the
		// old.
		m, err := c.loadMemIndexLocked()
		if err != nil {
			c.mem.Store(nil) // reads fall back to the file, which is correct
			return nil
		}
		c.mem.Store(m)
	}
	return nil
}

// Flush commits every change applied to the file before the call, this
// collection's and the others' (see DB.Flush). It fails with ErrClosed
// once Close has begun. Close flushes the collection's changes itself.
func (c *Collection) Flush(ctx context.Context) error {
	if err := c.closedErr(); err != nil {
		return err
	}
	return c.db.Flush(ctx)
}

// closedErr returns the error of a write after the collection's Close
// began, or its DB's, or nil.
func (c *Collection) closedErr() error {
	switch {
	case c.closed.Load():
		return fmt.Errorf("%w: collection %q was closed; a closed collection refuses writes: open it again with DB.Collection", ErrClosed, c.name)
	case c.db.closedFlag.Load():
		return fmt.Errorf("%w: %s", ErrClosed, c.db.path)
	}
	return nil
}

// Close flushes the collection's changes and releases its name. The
// collection can then be opened again on the same DB, for example by a
// restarted informer. From the start of Close, every method that writes
// fails with ErrClosed: Apply and its kin, Reset, CheckProvenance,
// AddIndexes, Flush and Checkpoint. Once Close returns, so do reads that
// need the file, because a reopened instance may have changed it under
// this one's view. Reads that an unbounded cache holding every object
// answers from memory still work. So do the accessors of the collection's
// own state, such as ResourceVersion and Indexes. If the flush fails, the
// name stays taken and the changes stay pending. The commit loop retries
// them. A second Close returns nil.
func (c *Collection) Close(ctx context.Context) error {
	c.db.applyMu.Lock()
	c.closed.Store(true)
	c.db.applyMu.Unlock()
	if err := c.db.Flush(ctx); err != nil {
		// Stay registered. The commit loop keeps retrying what is pending.
		return fmt.Errorf("closing collection %q: %w", c.name, err)
	}
	c.mu.Lock()
	c.released.Store(true)
	c.mu.Unlock()
	c.db.mu.Lock()
	if c.db.collections[c.name] == c {
		delete(c.db.collections, c.name)
	}
	c.db.mu.Unlock()
	return nil
}
