package inspectfile

import (
	"bytes"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// journalView is a collection's journal reduced to the state it gives each
// key it holds: the key's newest entry. Reads merge it over the object and
// index trees, so that they see what the collection holds once its journal
// is applied (see format.JournalBucket). A file without a journal (schema
// 1) has an empty view, and reads see the trees alone.
type journalView struct {
	info format.Journal
	// newest maps each key the journal holds to its newest entry; keys
	// lists those keys sorted (byte order, bbolt's key order).
	newest map[string]format.JournalEntry
	keys   []string
}

// readJournal walks the journal of the collection bucket coll once. The
// entries' records alias the transaction's memory.
func readJournal(coll *bolt.Bucket, name string) (*journalView, error) {
	j := &journalView{}
	info, err := format.WalkJournal(coll, func(_ uint64, e format.JournalEntry) error {
		if j.newest == nil {
			j.newest = map[string]format.JournalEntry{}
		}
		if _, seen := j.newest[e.Key]; !seen {
			j.keys = append(j.keys, e.Key)
		}
		j.newest[e.Key] = e
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("collection %q journal: %w", name, err)
	}
	if info.Folded == nil && len(info.Generations) > 0 {
		// A fold afresh stands at its copies' last key (format.Tree), as
		// a schema-3 fold stood at FoldedKey. Both say how far it got.
		if copied := format.CollectionTree(coll, format.ObjectsBucket).Rebuilt(); copied != nil {
			if last, _ := copied.Cursor().Last(); last != nil {
				info.Folded = bytes.Clone(last)
			}
		}
	}
	j.info = info
	sort.Strings(j.keys)
	return j, nil
}

// tree is what merge walks: a bucket, or a format.Tree.
type tree interface {
	ForEach(fn func(k, v []byte) error) error
}

// merge walks tree (which may be nil) and the journal's keys together in key
// order: fromTree for each tree key the journal does not hold, fromJournal
// for each newest journal entry, deletions included, until either returns
// an error, which it returns.
func (j *journalView) merge(tree tree, fromTree func(k, v []byte) error, fromJournal func(format.JournalEntry) error) error {
	i := 0
	// upTo passes the journal's keys before key, and key itself if the
	// journal holds it; it reports whether it did.
	upTo := func(key string) (bool, error) {
		for ; i < len(j.keys) && j.keys[i] < key; i++ {
			if err := fromJournal(j.newest[j.keys[i]]); err != nil {
				return false, err
			}
		}
		if i < len(j.keys) && j.keys[i] == key {
			i++
			return true, fromJournal(j.newest[key])
		}
		return false, nil
	}
	if tree != nil {
		err := tree.ForEach(func(k, v []byte) error {
			if len(j.keys) == 0 {
				return fromTree(k, v)
			}
			held, err := upTo(string(k))
			if held || err != nil {
				return err
			}
			return fromTree(k, v)
		})
		if err != nil {
			return err
		}
	}
	for ; i < len(j.keys); i++ {
		if err := fromJournal(j.newest[j.keys[i]]); err != nil {
			return err
		}
	}
	return nil
}

// forEachRecord calls fn for every record of the merged state in key order.
func (j *journalView) forEachRecord(objects format.Tree, fn func(key string, record []byte) error) error {
	return j.merge(objects,
		func(k, v []byte) error { return fn(string(k), v) },
		func(e format.JournalEntry) error {
			if e.Deleted {
				return nil
			}
			return fn(e.Key, e.Record)
		})
}

// indexValues returns the values of index the journal gives key, and
// whether the journal holds key at all (if it does, the trees' values for
// key are replaced).
func (j *journalView) indexValues(index, key string) ([]string, bool) {
	e, ok := j.newest[key]
	if !ok {
		return nil, false
	}
	if e.Deleted {
		return nil, true
	}
	return e.Indexes[index], true
}

// journalIndexEntry is a byValue entry the journal gives an index.
type journalIndexEntry struct {
	raw        []byte
	value, key string
}

// indexEntries returns the byValue entries the journal gives index, in
// byValue order, without duplicates.
func (j *journalView) indexEntries(index string) []journalIndexEntry {
	var out []journalIndexEntry
	for _, key := range j.keys {
		values, _ := j.indexValues(index, key)
		for _, v := range values {
			raw, _ := format.IndexEntry(v, key)
			out = append(out, journalIndexEntry{raw, v, key})
		}
	}
	sort.Slice(out, func(a, b int) bool { return bytes.Compare(out[a].raw, out[b].raw) < 0 })
	dedup := out[:0]
	for _, e := range out {
		if n := len(dedup); n == 0 || !bytes.Equal(dedup[n-1].raw, e.raw) {
			dedup = append(dedup, e)
		}
	}
	return dedup
}
