package format

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// A fold (schema 4) writes the collection's object tree and versions
// afresh: it merges each with the journal's oldest generation, in key
// order, into a copy below RebuildBucket, a chunk of keys per commit.
// Below a collection's bucket:
//
//	rebuild/  objects/  -> the copy of ObjectsBucket
//	          versions/ -> the copy of VersionsBucket, if the collection has it
//	meta/rebuild        -> the generation being folded (JournalSeq)
//
// RebuildKey, in CollMetaBucket, is written with the copies and deleted
// with them, so that copies lost with their keys show. Each transaction
// that writes a chunk into a copy deletes the same keys from the tree it
// copies. So the copy holds the tree's first keys, and the tree the rest:
// every key of a copy sorts before every key left in its tree. A reader
// sees the two as one tree (Tree). Both copies stand at the same key after
// every transaction. The entries of keys the generation changes hold the
// generation's state, which the journal gives them anyway. The index trees
// are not copied. They hold the state before the generation until the
// transaction that deletes the emptied trees, updates the index trees in
// place, moves the copies in their place and deletes the generation,
// RebuildBucket and RebuildKey.
var (
	RebuildBucket = []byte("rebuild")
	RebuildKey    = []byte("rebuild")
)

// Tree is a collection's object tree or versions as a reader sees it.
// While a fold rebuilds them, it is the copy's keys followed by the keys
// left in the tree (see RebuildBucket). Otherwise it is the tree alone.
// Slices it returns alias the transaction's memory.
type Tree struct {
	// parts holds the rebuilt copy (or nil) and the tree (or nil), in key
	// order: every key of the first sorts before every key of the second.
	parts [2]*bolt.Bucket
}

// CollectionTree returns the tree name of the collection bucket coll,
// ObjectsBucket or VersionsBucket. A tree the collection lacks has no
// parts (Exists).
func CollectionTree(coll *bolt.Bucket, name []byte) Tree {
	var t Tree
	t.parts[1] = coll.Bucket(name)
	if rb := coll.Bucket(RebuildBucket); rb != nil {
		t.parts[0] = rb.Bucket(name)
	}
	return t
}

// Exists reports whether the collection has the tree.
func (t Tree) Exists() bool { return t.parts[0] != nil || t.parts[1] != nil }

// Rebuilt and Live return the tree's two parts: the copy a fold is
// writing (nil if none) and the tree itself (nil if absent).
func (t Tree) Rebuilt() *bolt.Bucket { return t.parts[0] }
func (t Tree) Live() *bolt.Bucket    { return t.parts[1] }

// Get returns the value of k, or nil.
func (t Tree) Get(k []byte) []byte {
	for _, b := range t.parts {
		if b == nil {
			continue
		}
		if v := b.Get(k); v != nil {
			return v
		}
	}
	return nil
}

// ForEach calls fn for every entry in key order, until fn returns an
// error, which it returns. A nested bucket has a nil value, as in bbolt.
func (t Tree) ForEach(fn func(k, v []byte) error) error {
	for _, b := range t.parts {
		if b == nil {
			continue
		}
		if err := b.ForEach(fn); err != nil {
			return err
		}
	}
	return nil
}

// KeyN returns the number of keys, counted by bbolt's statistics, which
// read every page of the tree.
func (t Tree) KeyN() int {
	n := 0
	for _, b := range t.parts {
		if b != nil {
			n += b.Stats().KeyN
		}
	}
	return n
}

// Cursor returns a cursor over the tree's keys, valid for the
// transaction.
func (t Tree) Cursor() *TreeCursor {
	var c TreeCursor
	for i, b := range t.parts {
		if b != nil {
			c.cs[i] = b.Cursor()
		}
	}
	return &c
}

// TreeCursor moves over a Tree's keys as bolt.Cursor moves over a
// bucket's.
type TreeCursor struct {
	cs [2]*bolt.Cursor
	at int // the part the last key returned came from
}

// First moves to the first key.
func (c *TreeCursor) First() (k, v []byte) {
	for i := range c.cs {
		if k, v = c.first(i); k != nil {
			return k, v
		}
	}
	return nil, nil
}

// Last moves to the last key.
func (c *TreeCursor) Last() (k, v []byte) {
	for i := len(c.cs) - 1; i >= 0; i-- {
		if k, v = c.last(i); k != nil {
			return k, v
		}
	}
	return nil, nil
}

// Next moves to the next key, and returns nil past the last.
func (c *TreeCursor) Next() (k, v []byte) {
	if c.cs[c.at] != nil {
		if k, v = c.cs[c.at].Next(); k != nil {
			return k, v
		}
	}
	for i := c.at + 1; i < len(c.cs); i++ {
		if k, v = c.first(i); k != nil {
			return k, v
		}
	}
	return nil, nil
}

// Prev moves to the previous key, and returns nil before the first.
func (c *TreeCursor) Prev() (k, v []byte) {
	if c.cs[c.at] != nil {
		if k, v = c.cs[c.at].Prev(); k != nil {
			return k, v
		}
	}
	for i := c.at - 1; i >= 0; i-- {
		if k, v = c.last(i); k != nil {
			return k, v
		}
	}
	return nil, nil
}

// Seek moves to the first key at or after seek.
func (c *TreeCursor) Seek(seek []byte) (k, v []byte) {
	for i := range c.cs {
		if c.cs[i] == nil {
			continue
		}
		if k, v = c.cs[i].Seek(seek); k != nil {
			c.at = i
			return k, v
		}
	}
	return nil, nil
}

func (c *TreeCursor) first(i int) (k, v []byte) {
	if c.cs[i] == nil {
		return nil, nil
	}
	k, v = c.cs[i].First()
	if k != nil {
		c.at = i
	}
	return k, v
}

func (c *TreeCursor) last(i int) (k, v []byte) {
	if c.cs[i] == nil {
		return nil, nil
	}
	k, v = c.cs[i].Last()
	if k != nil {
		c.at = i
	}
	return k, v
}

// sortsBefore reports whether every key of a sorts before every key of b,
// as a Tree's parts must.
func sortsBefore(a, b *bolt.Bucket) bool {
	if a == nil || b == nil {
		return true
	}
	last, _ := a.Cursor().Last()
	first, _ := b.Cursor().First()
	return last == nil || first == nil || bytes.Compare(last, first) < 0
}

// CheckOrder reports whether the tree's parts are in key order, as a fold
// leaves them. A reader cannot rely on a tree whose parts overlap.
func (t Tree) CheckOrder() bool { return sortsBefore(t.parts[0], t.parts[1]) }
