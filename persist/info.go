package persist

import (
	"fmt"
	"sort"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// CollectionInfo describes a stored collection, as of the last commit.
type CollectionInfo struct {
	Name            string
	Description     map[string]string
	ResourceVersion string
	Objects         int
	// Bytes is the size of the stored records (not counting bbolt overhead).
	Bytes int64
	// Indexes maps index names to their versions.
	Indexes map[string]string
	// Committed is the time of the collection's last commit, or zero.
	Committed time.Time
	// MustList says part of the stored state was set aside, and no list has
	// been applied since. The collection is then not resumed from
	// ResourceVersion (see Collection.MustList).
	MustList bool
}

// Collections describes every collection in the file, sorted by name. It
// reads the file only, so it does not see changes not yet committed.
func (db *DB) Collections() ([]CollectionInfo, error) {
	var out []CollectionInfo
	err := db.view(func(tx *bolt.Tx) error {
		root := tx.Bucket(format.CollectionsBucket)
		return root.ForEachBucket(func(name []byte) error {
			info, err := readInfo(root.Bucket(name), string(name))
			if err != nil {
				return fmt.Errorf("collection %q: %w", name, err)
			}
			out = append(out, info)
			return nil
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func readInfo(b *bolt.Bucket, name string) (CollectionInfo, error) {
	info := CollectionInfo{Name: name}
	meta := b.Bucket(format.CollMetaBucket)
	objects := b.Bucket(format.ObjectsBucket)
	if meta == nil || objects == nil {
		return info, fmt.Errorf("%w: missing meta or objects bucket", ErrCorruptRecord)
	}
	info.ResourceVersion = string(meta.Get(format.RVKey))
	info.MustList = meta.Get(format.MustListKey) != nil
	var err error
	if info.Description, err = decodeDescription(meta); err != nil {
		return info, err
	}
	if raw := meta.Get(format.IndexVersionsKey); raw != nil {
		if err := msgpack.Unmarshal(raw, &info.Indexes); err != nil {
			return info, fmt.Errorf("%w: index versions: %v", ErrCorruptRecord, err)
		}
	}
	if info.Committed, err = decodeCommitted(meta); err != nil {
		return info, err
	}
	// The journal's newest entry for a key replaces the tree's record.
	newest := map[string]int{} // key -> record bytes, -1 if deleted
	if _, err := format.WalkJournal(b, func(_ uint64, e format.JournalEntry) error {
		if e.Deleted {
			newest[e.Key] = -1
		} else {
			newest[e.Key] = len(e.Record)
		}
		return nil
	}); err != nil {
		return info, err
	}
	err = objects.ForEach(func(k, v []byte) error {
		if _, ok := newest[string(k)]; ok {
			return nil
		}
		info.Objects++
		info.Bytes += int64(len(v))
		return nil
	})
	for _, n := range newest {
		if n >= 0 {
			info.Objects++
			info.Bytes += int64(n)
		}
	}
	return info, err
}

// The description and the commit time are read by Collections alone, so
// no open fails on them. A writable open drops either where it does not
// decode (dropUndecodableInfo), because an owner with nothing to commit
// would otherwise leave it for every later Collections to fail on.

// decodeDescription returns the collection's description in meta, nil if
// it has none, or an error wrapping ErrCorruptRecord.
func decodeDescription(meta *bolt.Bucket) (map[string]string, error) {
	raw := meta.Get(format.DescriptionKey)
	if raw == nil {
		return nil, nil
	}
	var d map[string]string
	if err := msgpack.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%w: description: %v", ErrCorruptRecord, err)
	}
	return d, nil
}

// decodeCommitted returns the time of the collection's last commit in
// meta, zero if it has none, or an error wrapping ErrCorruptRecord.
func decodeCommitted(meta *bolt.Bucket) (time.Time, error) {
	raw := meta.Get(format.CommittedKey)
	if raw == nil {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, string(raw))
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: commit time %q", ErrCorruptRecord, raw)
	}
	return t, nil
}

// undecodableInfo reports whether meta holds a description or a commit
// time that does not decode.
func undecodableInfo(meta *bolt.Bucket) bool {
	_, errD := decodeDescription(meta)
	_, errC := decodeCommitted(meta)
	return errD != nil || errC != nil
}

// dropUndecodableInfo deletes from meta a description or a commit time
// that does not decode. Committed is then zero until the next commit, and
// the description empty until an open gives one.
func dropUndecodableInfo(meta *bolt.Bucket) error {
	if _, err := decodeDescription(meta); err != nil {
		if err := meta.Delete(format.DescriptionKey); err != nil {
			return err
		}
	}
	if _, err := decodeCommitted(meta); err != nil {
		return meta.Delete(format.CommittedKey)
	}
	return nil
}
