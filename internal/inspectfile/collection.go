package inspectfile

import (
	"bytes"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/persist"
)

// Collection reads one collection's buckets exactly as stored. It is
// valid only inside the File.View call that made it, and so is every byte
// slice it passes out.
type Collection struct {
	name string
	b    *bolt.Bucket
	// indexes caches each index's buckets, looked up once per view.
	indexes map[string]rawIndex
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

func (r *Collection) sub(name []byte) (*bolt.Bucket, error) {
	b := r.b.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("%w: collection %q has no %q bucket", persist.ErrCorruptRecord, r.name, name)
	}
	return b, nil
}

// Record returns the record stored under key, or nil. The slice aliases the
// transaction's memory.
func (r *Collection) Record(key string) ([]byte, error) {
	objects, err := r.sub(format.ObjectsBucket)
	if err != nil {
		return nil, err
	}
	return objects.Get([]byte(key)), nil
}

// ForEachRecord calls fn for every stored record in key order until fn
// returns an error, which it returns. record aliases the transaction's
// memory: decode or copy it before fn returns.
func (r *Collection) ForEachRecord(fn func(key string, record []byte) error) error {
	objects, err := r.sub(format.ObjectsBucket)
	if err != nil {
		return err
	}
	return objects.ForEach(func(k, v []byte) error { return fn(string(k), v) })
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
// in value order. An entry that does not parse is passed with its raw bytes
// and a non-nil err wrapping persist.ErrCorruptRecord, and empty value and key; fn
// decides whether to go on.
func (r *Collection) ForEachIndexEntry(index string, fn func(value, key string, raw []byte, err error) error) error {
	byValue, _, err := r.indexBuckets(index)
	if err != nil {
		return err
	}
	return byValue.ForEach(func(k, _ []byte) error {
		value, key, _, err := format.SplitIndexEntry(k)
		return fn(value, key, k, err)
	})
}

// HasIndexEntry reports whether the named index maps value to key.
func (r *Collection) HasIndexEntry(index, value, key string) (bool, error) {
	byValue, _, err := r.indexBuckets(index)
	if err != nil {
		return false, err
	}
	k, _ := byValue.Cursor().Seek(format.IndexEntry(value, key))
	return k != nil && bytes.Equal(k, format.IndexEntry(value, key)), nil
}

// ForEachIndexedKey calls fn for every key→values entry of the named index
// (the values last written for key), in key order. Values that do not decode
// are passed as nil with a non-nil err wrapping persist.ErrCorruptRecord.
func (r *Collection) ForEachIndexedKey(index string, fn func(key string, values []string, err error) error) error {
	_, byKey, err := r.indexBuckets(index)
	if err != nil {
		return err
	}
	return byKey.ForEach(func(k, v []byte) error {
		values, err := format.DecodeIndexValues(v)
		return fn(string(k), values, err)
	})
}

// IndexedValues returns the values the named index holds for key, and
// whether it holds any.
func (r *Collection) IndexedValues(index, key string) ([]string, bool, error) {
	_, byKey, err := r.indexBuckets(index)
	if err != nil {
		return nil, false, err
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
	// collection (all its buckets), "meta", "objects", or
	// "indexes/<name>/byValue" and "indexes/<name>/byKey".
	Bucket string
	bolt.BucketStats
}

// Stats returns the statistics of the whole collection followed by those of
// its meta and objects buckets and of each index's two buckets.
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
	return out, nil
}
