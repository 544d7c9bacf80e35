package inspectfile

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// Collection reads one collection's state: its records and index entries
// are those of the object and index trees with the journal applied (a key
// the journal holds has the state of its newest entry there), as the live
// collection serves them. It is valid only inside the File.View call that
// made it, and so is every byte slice it passes out.
type Collection struct {
	name string
	b    *bolt.Bucket
	// indexes caches each index's buckets, looked up once per view.
	indexes map[string]rawIndex
	// journal is read on first use, once per view; journalErr is why it
	// could not be, returned by every merged read.
	journal    *journalView
	journalErr error
}

type rawIndex struct{ byValue, byKey *bolt.Bucket }

// View runs fn in one bbolt read transaction over the named collection.
// It fails with persist.ErrNoCollection if the file has no such collection.
func (f *File) View(collection string, fn func(*Collection) error) error {
	return f.bolt.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(format.CollectionsBucket)
		if root == nil {
			return fmt.Errorf("%w: %s has no %q bucket", persist.ErrNotCacheFile, f.path, format.CollectionsBucket)
		}
		b := root.Bucket([]byte(collection))
		if b == nil {
			return fmt.Errorf("%w: %q in %s", persist.ErrNoCollection, collection, f.path)
		}
		return fn(&Collection{name: collection, b: b, indexes: map[string]rawIndex{}})
	})
}

// Name returns the collection's name.
func (r *Collection) Name() string { return r.name }

func (r *Collection) readJournal() (*journalView, error) {
	if r.journal == nil && r.journalErr == nil {
		r.journal, r.journalErr = readJournal(r.b, r.name)
	}
	return r.journal, r.journalErr
}

// Journal describes the collection's journal: its generations, their
// entries and bytes, and how far the oldest has been folded. Folded is the
// last key folded: a schema-3 fold's FoldedKey, or the last key of the
// object tree's copy that a fold afresh writes (format.RebuildBucket). A collection
// without a journal (schema 1) has an empty one. An entry that does not
// decode is an error wrapping persist.ErrCorruptRecord, and so fails every
// read of records and index entries in this view.
func (r *Collection) Journal() (format.Journal, error) {
	j, err := r.readJournal()
	if err != nil {
		return format.Journal{}, err
	}
	return j.info, nil
}

func (r *Collection) sub(name []byte) (*bolt.Bucket, error) {
	b := r.b.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("%w: collection %q has no %q bucket", persist.ErrCorruptRecord, r.name, name)
	}
	return b, nil
}

// objects returns the object tree, with the part a fold in progress
// copied (format.RebuildBucket).
func (r *Collection) objects() (format.Tree, error) {
	if _, err := r.sub(format.ObjectsBucket); err != nil {
		return format.Tree{}, err
	}
	return format.CollectionTree(r.b, format.ObjectsBucket), nil
}

// Record returns the record of key, or nil. The slice aliases the
// transaction's memory.
func (r *Collection) Record(key string) ([]byte, error) {
	objects, err := r.objects()
	if err != nil {
		return nil, err
	}
	j, err := r.readJournal()
	if err != nil {
		return nil, err
	}
	if e, ok := j.newest[key]; ok {
		return e.Record, nil // nil for a deletion
	}
	return objects.Get([]byte(key)), nil
}

// ForEachRecord calls fn for every record in key order until fn returns an
// error, which it returns. record aliases the transaction's memory: decode
// or copy it before fn returns.
func (r *Collection) ForEachRecord(fn func(key string, record []byte) error) error {
	objects, err := r.objects()
	if err != nil {
		return err
	}
	j, err := r.readJournal()
	if err != nil {
		return err
	}
	return j.forEachRecord(objects, fn)
}

// IndexNames returns the names of the index buckets on disk, sorted. They
// should be exactly the indexes of persist.CollectionInfo.Indexes.
func (r *Collection) IndexNames() ([]string, error) {
	idx, err := r.sub(format.IndexesBucket)
	if err != nil {
		return nil, err
	}
	var names []string
	err = idx.ForEachBucket(func(k []byte) error {
		names = append(names, string(k))
		return nil
	})
	sort.Strings(names)
	return names, err
}

func (r *Collection) indexBuckets(index string) (byValue, byKey *bolt.Bucket, err error) {
	if ri, ok := r.indexes[index]; ok {
		return ri.byValue, ri.byKey, nil
	}
	idx, err := r.sub(format.IndexesBucket)
	if err != nil {
		return nil, nil, err
	}
	ib := idx.Bucket([]byte(index))
	if ib == nil {
		return nil, nil, fmt.Errorf("%w: collection %q has no bucket for index %q", persist.ErrCorruptRecord, r.name, index)
	}
	byValue, byKey = ib.Bucket(format.ByValueBucket), ib.Bucket(format.ByKeyBucket)
	if byValue == nil || byKey == nil {
		return nil, nil, fmt.Errorf("%w: collection %q index %q lacks its %q or %q bucket", persist.ErrCorruptRecord, r.name, index, format.ByValueBucket, format.ByKeyBucket)
	}
	r.indexes[index] = rawIndex{byValue, byKey}
	return byValue, byKey, nil
}

// ForEachIndexEntry calls fn for every value→key entry of the named index,
// in value order (byValue's key order). An entry of the index tree that does
// not parse is passed with its raw bytes and a non-nil err wrapping
// persist.ErrCorruptRecord, and empty value and key; fn decides whether to
// go on. A key the journal holds has the entries of its newest journal
// entry's values, and none of the tree's.
func (r *Collection) ForEachIndexEntry(index string, fn func(value, key string, raw []byte, err error) error) error {
	forEach, err := r.byValueEntries(index)
	if err != nil {
		return err
	}
	j, err := r.readJournal()
	if err != nil {
		return err
	}
	if len(j.keys) == 0 {
		return forEach(func(k, v []byte) error {
			value, key, _, err := format.DecodeIndexEntry(k, v)
			return fn(value, key, k, err)
		})
	}
	fromJournal := j.indexEntries(index)
	err = forEach(func(k, v []byte) error {
		for ; len(fromJournal) > 0 && bytes.Compare(fromJournal[0].raw, k) < 0; fromJournal = fromJournal[1:] {
			if err := fn(fromJournal[0].value, fromJournal[0].key, fromJournal[0].raw, nil); err != nil {
				return err
			}
		}
		value, key, _, err := format.DecodeIndexEntry(k, v)
		if err == nil {
			if _, held := j.newest[key]; held {
				return nil
			}
		}
		return fn(value, key, k, err)
	})
	if err != nil {
		return err
	}
	for _, e := range fromJournal {
		if err := fn(e.value, e.key, e.raw, nil); err != nil {
			return err
		}
	}
	return nil
}

// byValueEntries returns a walk of the named index's byValue entries in
// their order. While the file owes them (format.ByValueOwedKey), a live
// collection is being filled, and byValue may lack entries and hold stale
// ones. The walk then derives them from byKey, as the live collection does.
func (r *Collection) byValueEntries(index string) (func(fn func(k, v []byte) error) error, error) {
	byValue, byKey, err := r.indexBuckets(index)
	if err != nil {
		return nil, err
	}
	if !r.ByValueOwed() {
		return byValue.ForEach, nil
	}
	// A byKey value that does not decode gives no entries here. The
	// walk of byKey (ForEachIndexedKey) reports it.
	entries := format.IndexEntriesOf(byKey)
	return func(fn func(k, v []byte) error) error {
		for _, e := range entries {
			if err := fn(e.K, e.V); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// ByValueOwed reports whether the collection is being filled and its
// byValue buckets may lack entries. The reads of Collection then derive
// them from byKey, and the byValue buckets' statistics do not count them.
func (r *Collection) ByValueOwed() bool {
	meta := r.b.Bucket(format.CollMetaBucket)
	return meta != nil && meta.Get(format.ByValueOwedKey) != nil
}

// HasIndexEntry reports whether the named index maps value to key.
func (r *Collection) HasIndexEntry(index, value, key string) (bool, error) {
	byValue, _, err := r.indexBuckets(index)
	if err != nil {
		return false, err
	}
	j, err := r.readJournal()
	if err != nil {
		return false, err
	}
	if values, held := j.indexValues(index, key); held {
		return slices.Contains(values, value), nil
	}
	if r.ByValueOwed() {
		values, _, err := r.IndexedValues(index, key)
		return slices.Contains(values, value), err
	}
	return format.HasIndexEntry(byValue, value, key), nil
}

// ForEachIndexedKey calls fn for every key→values entry of the named index
// (the values last written for key), in key order. Values that do not decode
// are passed as nil with a non-nil err wrapping persist.ErrCorruptRecord. A
// key the journal holds has its newest journal entry's values, and no entry
// if they are none.
func (r *Collection) ForEachIndexedKey(index string, fn func(key string, values []string, err error) error) error {
	_, byKey, err := r.indexBuckets(index)
	if err != nil {
		return err
	}
	j, err := r.readJournal()
	if err != nil {
		return err
	}
	return j.merge(byKey,
		func(k, v []byte) error {
			values, err := format.DecodeIndexValues(v)
			return fn(string(k), values, err)
		},
		func(e format.JournalEntry) error {
			if values, _ := j.indexValues(index, e.Key); len(values) > 0 {
				return fn(e.Key, values, nil)
			}
			return nil
		})
}

// IndexedValues returns the values the named index holds for key, and
// whether it holds any.
func (r *Collection) IndexedValues(index, key string) ([]string, bool, error) {
	_, byKey, err := r.indexBuckets(index)
	if err != nil {
		return nil, false, err
	}
	j, err := r.readJournal()
	if err != nil {
		return nil, false, err
	}
	if values, held := j.indexValues(index, key); held {
		if len(values) == 0 {
			return nil, false, nil
		}
		return values, true, nil
	}
	v := byKey.Get([]byte(key))
	if v == nil {
		return nil, false, nil
	}
	values, err := format.DecodeIndexValues(v)
	return values, true, err
}

// BucketStats is bbolt's statistics of one bucket of a collection.
type BucketStats struct {
	// Bucket is the bucket's path below the collection: "" for the whole
	// collection (all its buckets), "meta", "objects",
	// "indexes/<name>/byValue" and "indexes/<name>/byKey", the copies a
	// fold in progress writes, "rebuild/objects" and "rebuild/versions",
	// or "journal/<generation>".
	Bucket string
	bolt.BucketStats
}

// Stats returns the statistics of the whole collection followed by those of
// its meta and objects buckets, of each index's two buckets, of a fold's
// copies (while one runs) and of each journal generation's bucket (none in
// a file without a journal).
func (r *Collection) Stats() ([]BucketStats, error) {
	out := []BucketStats{{Bucket: "", BucketStats: r.b.Stats()}}
	for _, name := range [][]byte{format.CollMetaBucket, format.ObjectsBucket} {
		b, err := r.sub(name)
		if err != nil {
			return nil, err
		}
		out = append(out, BucketStats{Bucket: string(name), BucketStats: b.Stats()})
	}
	names, err := r.IndexNames()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		byValue, byKey, err := r.indexBuckets(name)
		if err != nil {
			return nil, err
		}
		out = append(out,
			BucketStats{Bucket: "indexes/" + name + "/" + string(format.ByValueBucket), BucketStats: byValue.Stats()},
			BucketStats{Bucket: "indexes/" + name + "/" + string(format.ByKeyBucket), BucketStats: byKey.Stats()})
	}
	if rb := r.b.Bucket(format.RebuildBucket); rb != nil {
		for _, name := range [][]byte{format.ObjectsBucket, format.VersionsBucket} {
			if b := rb.Bucket(name); b != nil {
				out = append(out, BucketStats{Bucket: string(format.RebuildBucket) + "/" + string(name), BucketStats: b.Stats()})
			}
		}
	}
	jb := r.b.Bucket(format.JournalBucket)
	if jb == nil {
		return out, nil
	}
	err = jb.ForEachBucket(func(k []byte) error {
		gen, err := format.ParseJournalSeq(k)
		if err != nil {
			return fmt.Errorf("collection %q journal: %w", r.name, err)
		}
		out = append(out, BucketStats{Bucket: fmt.Sprintf("%s/%d", format.JournalBucket, gen), BucketStats: jb.Bucket(k).Stats()})
		return nil
	})
	return out, err
}
