package persist

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A list loaded into an empty collection comes in key order. Its records
// and byKey entries are appended to their trees. Its byValue entries sort
// by value, so one commit's entries land all over each index's tree. A
// commit would then rewrite most of that tree's leaves, and a list loaded
// page by page would write the tree once per commit.
//
// So a list loaded into an empty collection, which has no
// resourceVersion, leaves byValue out and sets format.ByValueOwedKey. Only
// an unbounded collection does. Its writes then leave byValue out until a
// commit stores a resourceVersion. That commit pays what is owed: it builds
// every byValue afresh from byKey, appending each entry once in value
// order. So does a writable open that finds the mark, as after a crash
// during a list.
//
// While the mark is set:
//   - byKey holds every key's values, as always, and is the index.
//   - byValue may lack entries and hold stale ones, and no read uses it.
//   - The file has no resourceVersion, so nothing resumes from it.
//
// In process, an unbounded collection serves index reads from memory
// (memindex.go), loaded from byKey while the mark is set. A read that goes
// to the file scans byKey instead, which costs a walk of it. Only an owed
// collection opened read-only, or whose objects do not all decode, does so.
// A bounded collection reads the file for every lookup, so it never owes.

// byValueOwed reports whether the collection b's byValue buckets are owed.
func byValueOwed(b *bolt.Bucket) bool {
	return b.Bucket(format.CollMetaBucket).Get(format.ByValueOwedKey) != nil
}

// oweByValueTx reports whether a write to the collection b leaves byValue
// out. It sets the mark if the write is the first to.
func (c *Collection) oweByValueTx(b *bolt.Bucket) (bool, error) {
	meta := b.Bucket(format.CollMetaBucket)
	switch {
	case meta.Get(format.ByValueOwedKey) != nil:
		return true, nil
	case c.cache.bounded() || len(meta.Get(format.RVKey)) > 0 || len(c.indexes) == 0:
		return false, nil
	case holdsObjects(b):
		// Not a list loaded into an empty collection. A stored
		// resourceVersion cleared by a change without one must not cost
		// a rebuild of every index at the next one.
		return false, nil
	}
	return true, meta.Put(format.ByValueOwedKey, []byte("1"))
}

// payByValueTx builds the byValue bucket of each named index of the
// collection b afresh from its byKey, if they are owed, and deletes the
// mark. Entries are appended in byValue's order, so pages are filled and
// written once. The names are the indexes the collection records. A bucket
// under another name is no index: no read uses it, and a write drops it.
func payByValueTx(b *bolt.Bucket, names []string) error {
	meta := b.Bucket(format.CollMetaBucket)
	if meta.Get(format.ByValueOwedKey) == nil {
		return nil
	}
	idx := b.Bucket(format.IndexesBucket)
	for _, name := range names {
		ib := idx.Bucket([]byte(name))
		if ib == nil {
			return fmt.Errorf("%w: index bucket %q missing", ErrCorruptRecord, name)
		}
		if err := buildByValueTx(ib); err != nil {
			return fmt.Errorf("building index %q from its entries by key: %w", name, err)
		}
	}
	return meta.Delete(format.ByValueOwedKey)
}

// buildByValueTx replaces the byValue bucket of the index bucket ib with
// the entries its byKey gives.
func buildByValueTx(ib *bolt.Bucket) error {
	byKey := ib.Bucket(format.ByKeyBucket)
	if byKey == nil {
		return fmt.Errorf("%w: no %q bucket", ErrCorruptRecord, format.ByKeyBucket)
	}
	// A byKey value that does not decode gives no entries. It fails the
	// next commit that changes its key, and the next open rebuilds the
	// index from the records (rebuild.go).
	entries := format.IndexEntriesOf(byKey)
	// A plain value where byValue belongs is damage, and goes too.
	if err := deleteValue(ib, format.ByValueBucket); err != nil {
		return err
	}
	byValue, err := ib.CreateBucket(format.ByValueBucket)
	if err != nil {
		return err
	}
	byValue.FillPercent = 1.0
	for _, e := range entries {
		if err := byValue.Put(e.K, e.V); err != nil {
			return err
		}
	}
	return nil
}

// forEachIndexValues calls fn with every key of byKey and its values.
func forEachIndexValues(byKey *bolt.Bucket, fn func(key string, values []string) error) error {
	return byKey.ForEach(func(k, raw []byte) error {
		values, err := format.DecodeIndexValues(raw)
		if err != nil {
			return fmt.Errorf("the values of %q: %w", k, err)
		}
		return fn(string(k), values)
	})
}

// owedIndexKeys returns the keys whose values in byKey include value: the
// lookup byValue would answer, were it not owed.
func owedIndexKeys(byKey *bolt.Bucket, value string) ([]string, error) {
	var keys []string
	err := forEachIndexValues(byKey, func(key string, values []string) error {
		if slices.Contains(values, value) {
			keys = append(keys, key)
		}
		return nil
	})
	return keys, err
}
