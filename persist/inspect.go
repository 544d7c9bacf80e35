package persist

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// This file gives tools (cmd/inspect) read-only access to the file as
// stored: raw records, raw index entries and bucket statistics. Unlike the
// Collection reads, these never consult the in-memory layers, so on a DB
// open for writing they see only what has been committed.

// RawCollection reads one collection's buckets exactly as stored. It is
// valid only inside the DB.RawView call that made it, and so is every byte
// slice it passes out.
type RawCollection struct {
	name string
	b    *bolt.Bucket
	// indexes caches each index's buckets, looked up once per view.
	indexes map[string]rawIndex
}

type rawIndex struct{ byValue, byKey *bolt.Bucket }

// RawView runs fn in one bbolt read transaction over the named collection.
// It fails with ErrNoCollection if the file has no such collection.
func (db *DB) RawView(collection string, fn func(*RawCollection) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketCollections)
		if root == nil {
			return fmt.Errorf("%w: %s has no %q bucket", ErrNotCacheFile, db.path, bucketCollections)
		}
		b := root.Bucket([]byte(collection))
		if b == nil {
			return fmt.Errorf("%w: %q in %s", ErrNoCollection, collection, db.path)
		}
		return fn(&RawCollection{name: collection, b: b, indexes: map[string]rawIndex{}})
	})
}

// Name returns the collection's name.
func (r *RawCollection) Name() string { return r.name }

func (r *RawCollection) sub(name []byte) (*bolt.Bucket, error) {
	b := r.b.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("%w: collection %q has no %q bucket", ErrCorruptRecord, r.name, name)
	}
	return b, nil
}

// Record returns the record stored under key, or nil. The slice aliases the
// transaction's memory.
func (r *RawCollection) Record(key string) ([]byte, error) {
	objects, err := r.sub(bucketObjects)
	if err != nil {
		return nil, err
	}
	return objects.Get([]byte(key)), nil
}

// ForEachRecord calls fn for every stored record in key order until fn
// returns an error, which it returns. record aliases the transaction's
// memory: decode or copy it before fn returns.
func (r *RawCollection) ForEachRecord(fn func(key string, record []byte) error) error {
	objects, err := r.sub(bucketObjects)
	if err != nil {
		return err
	}
	return objects.ForEach(func(k, v []byte) error { return fn(string(k), v) })
}

// IndexNames returns the names of the index buckets on disk, sorted. They
// should be exactly the indexes of CollectionInfo.Indexes.
func (r *RawCollection) IndexNames() ([]string, error) {
	idx, err := r.sub(bucketIndexes)
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

func (r *RawCollection) indexBuckets(index string) (byValue, byKey *bolt.Bucket, err error) {
	if ri, ok := r.indexes[index]; ok {
		return ri.byValue, ri.byKey, nil
	}
	idx, err := r.sub(bucketIndexes)
	if err != nil {
		return nil, nil, err
	}
	ib := idx.Bucket([]byte(index))
	if ib == nil {
		return nil, nil, fmt.Errorf("%w: collection %q has no bucket for index %q", ErrCorruptRecord, r.name, index)
	}
	byValue, byKey = ib.Bucket(bucketByValue), ib.Bucket(bucketByKey)
	if byValue == nil || byKey == nil {
		return nil, nil, fmt.Errorf("%w: collection %q index %q lacks its %q or %q bucket", ErrCorruptRecord, r.name, index, bucketByValue, bucketByKey)
	}
	r.indexes[index] = rawIndex{byValue, byKey}
	return byValue, byKey, nil
}

// ForEachIndexEntry calls fn for every value→key entry of the named index,
// in value order. An entry that does not parse is passed with its raw bytes
// and a non-nil err wrapping ErrCorruptRecord, and empty value and key; fn
// decides whether to go on.
func (r *RawCollection) ForEachIndexEntry(index string, fn func(value, key string, raw []byte, err error) error) error {
	byValue, _, err := r.indexBuckets(index)
	if err != nil {
		return err
	}
	return byValue.ForEach(func(k, _ []byte) error {
		value, key, _, err := splitIndexEntry(k)
		return fn(value, key, k, err)
	})
}

// HasIndexEntry reports whether the named index maps value to key.
func (r *RawCollection) HasIndexEntry(index, value, key string) (bool, error) {
	byValue, _, err := r.indexBuckets(index)
	if err != nil {
		return false, err
	}
	k, _ := byValue.Cursor().Seek(indexEntry(value, key))
	return k != nil && bytes.Equal(k, indexEntry(value, key)), nil
}

// ForEachIndexedKey calls fn for every key→values entry of the named index
// (the values last written for key), in key order. Values that do not decode
// are passed as nil with a non-nil err wrapping ErrCorruptRecord.
func (r *RawCollection) ForEachIndexedKey(index string, fn func(key string, values []string, err error) error) error {
	_, byKey, err := r.indexBuckets(index)
	if err != nil {
		return err
	}
	return byKey.ForEach(func(k, v []byte) error {
		values, err := decodeIndexValues(v)
		return fn(string(k), values, err)
	})
}

// IndexedValues returns the values the named index holds for key, and
// whether it holds any.
func (r *RawCollection) IndexedValues(index, key string) ([]string, bool, error) {
	_, byKey, err := r.indexBuckets(index)
	if err != nil {
		return nil, false, err
	}
	v := byKey.Get([]byte(key))
	if v == nil {
		return nil, false, nil
	}
	values, err := decodeIndexValues(v)
	return values, true, err
}

func decodeIndexValues(raw []byte) ([]string, error) {
	var values []string
	if err := msgpack.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("%w: index values %q: %v", ErrCorruptRecord, raw, err)
	}
	return values, nil
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
func (r *RawCollection) Stats() ([]BucketStats, error) {
	out := []BucketStats{{Bucket: "", BucketStats: r.b.Stats()}}
	for _, name := range [][]byte{bucketCollMeta, bucketObjects} {
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
			BucketStats{Bucket: "indexes/" + name + "/" + string(bucketByValue), BucketStats: byValue.Stats()},
			BucketStats{Bucket: "indexes/" + name + "/" + string(bucketByKey), BucketStats: byKey.Stats()})
	}
	return out, nil
}

// FileStats describes a cache file as a whole.
type FileStats struct {
	// Schema is the file's layout version; Created is when it was made.
	Schema  int
	Created time.Time
	// FileSize is the size on disk; DataSize the bytes below bbolt's
	// high-water mark (the rest is preallocated growth).
	FileSize int64
	DataSize int64
	PageSize int
	// Pages is the number of pages below the high-water mark; FreePages of
	// them are on the freelist (reusable), PendingPages freed by a
	// transaction some reader may still see.
	Pages        int
	FreePages    int
	PendingPages int
	// TxID is the ID of the last committed write transaction.
	TxID int
}

// FileStats returns statistics of the whole file. On a read-only DB, bbolt
// does not load the freelist, so the free-page counts come from a second
// read-only handle that does; it shares the file's lock with this one.
func (db *DB) FileStats() (FileStats, error) {
	var fs FileStats
	st, err := os.Stat(db.path)
	if err != nil {
		return fs, err
	}
	fs.FileSize = st.Size()
	fs.PageSize = db.bolt.Info().PageSize
	err = db.bolt.View(func(tx *bolt.Tx) error {
		fs.DataSize = tx.Size()
		fs.TxID = tx.ID()
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: %s has no %q bucket", ErrNotCacheFile, db.path, bucketMeta)
		}
		fs.Schema, _ = strconv.Atoi(string(meta.Get(keySchema)))
		if raw := meta.Get(keyCreated); raw != nil {
			fs.Created, _ = time.Parse(time.RFC3339Nano, string(raw))
		}
		return nil
	})
	if err != nil {
		return fs, err
	}
	if fs.PageSize > 0 {
		fs.Pages = int(fs.DataSize / int64(fs.PageSize))
	}
	bs := db.bolt.Stats()
	if db.opts.ReadOnly {
		second, err := bolt.Open(db.path, 0o600, &bolt.Options{
			ReadOnly: true, PreLoadFreelist: true, Timeout: db.opts.LockTimeout,
			FreelistType: bolt.FreelistMapType,
		})
		if err != nil {
			return fs, openError(db.path, db.opts, err)
		}
		bs = second.Stats()
		if err := second.Close(); err != nil {
			return fs, err
		}
	}
	fs.FreePages, fs.PendingPages = bs.FreePageN, bs.PendingPageN
	return fs, nil
}
