package persist

import (
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// Index entries and versions are derived from the records, and an open
// rebuilds a damaged one (rebuild.go). Finding damage reads every entry,
// so its cost grows with the collection, on the open path most starts take.
// This build's own transactions leave entries it reads back.
// So the check is needed only after another writer wrote the file: a tool
// using bbolt directly, an older build, a buggy program.
//
// Every write transaction of this package records its bbolt transaction id
// in the file's meta bucket (DB.update). bbolt increments the id in every
// write transaction. A writable Open that finds another id knows another
// writer committed since. It then marks every collection unchecked
// (format.DerivedUncheckedKey), in one transaction that also records the
// id. Each collection keeps its mark until an open of it checks its entries.
// So a collection opened only by a later process is still checked.
//
// Damage that no transaction made, such as bytes changed on the disk, goes
// unseen at open. Reads that meet it fail and report it, as they do for a
// record.

// update runs fn in a write transaction, and records the transaction as
// this build's own. Every write transaction of the package goes through
// it. One that did not would only make the next open check every
// collection.
func (db *DB) update(fn func(*bolt.Tx) error) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		meta := tx.Bucket(format.MetaBucket)
		if meta == nil {
			return nil // not a cache file: Open refuses it
		}
		return meta.Put(format.OwnTxKey, strconv.AppendInt(nil, int64(tx.ID()), 10))
	})
}

// lastWriteOwn reports whether this build committed the last transaction
// the file holds. tx is a read transaction, whose id is the last one
// committed.
func lastWriteOwn(tx *bolt.Tx) bool {
	meta := tx.Bucket(format.MetaBucket)
	if meta == nil {
		return false
	}
	n, err := strconv.ParseInt(string(meta.Get(format.OwnTxKey)), 10, 64)
	return err == nil && n == int64(tx.ID())
}

// markDerivedUncheckedTx marks every collection's index entries and
// versions unchecked. A collection whose meta bucket is missing is left as
// it is: its open finds its structure damaged and empties it.
func markDerivedUncheckedTx(tx *bolt.Tx) error {
	root := tx.Bucket(format.CollectionsBucket)
	if root == nil {
		return nil
	}
	return root.ForEachBucket(func(name []byte) error {
		meta := root.Bucket(name).Bucket(format.CollMetaBucket)
		if meta == nil {
			return nil
		}
		return putValue(meta, format.DerivedUncheckedKey, []byte{1})
	})
}

// derivedUnchecked reports whether the collection b carries the mark
// markDerivedUncheckedTx writes.
func derivedUnchecked(b *bolt.Bucket) bool {
	return b.Bucket(format.CollMetaBucket).Get(format.DerivedUncheckedKey) != nil
}
