package simulation

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// The damage a closed file can hold beyond a journal entry and a record's
// payload (damage_test.go): a collection missing one of its sub-buckets, a
// record whose header does not decode, an index entry that does not
// decode, and a meta value that does not. Each leaves a sound bbolt file.
// The informer must start on it, cold if need be, and settle on the
// server's objects, without a panic.

// subBuckets are the collection's sub-buckets a damage-bucket step may
// remove, by its N.
var subBuckets = [][]byte{
	format.CollMetaBucket, format.ObjectsBucket, format.IndexesBucket, format.JournalBucket,
	format.CheckpointsBucket, format.TombstonesBucket, format.VersionsBucket,
}

// damageBucket deletes the collection's n-th sub-bucket (modulo their
// number), if it has it.
func damageBucket(path string, n int) (string, error) {
	return damage(path, func(b *bolt.Bucket) (string, error) {
		name := subBuckets[n%len(subBuckets)]
		if b.Bucket(name) == nil {
			return "", nil
		}
		return fmt.Sprintf("sub-bucket %s removed", name), b.DeleteBucket(name)
	})
}

// damageHeader overwrites the first bytes of the n-th stored record (modulo
// their number), the envelope that says what the payload is.
func damageHeader(path string, n int) (string, error) {
	return damage(path, func(b *bolt.Bucket) (string, error) {
		ob := b.Bucket(format.ObjectsBucket)
		if ob == nil {
			return "", nil
		}
		var keys [][]byte
		_ = ob.ForEach(func(k, v []byte) error {
			if v != nil {
				keys = append(keys, bytes.Clone(k))
			}
			return nil
		})
		if len(keys) == 0 {
			return "", nil
		}
		k := keys[n%len(keys)]
		rec := bytes.Clone(ob.Get(k))
		for i := 0; i < min(len(rec), 6); i++ {
			rec[i] = 0xc1 // never used in msgpack
		}
		return fmt.Sprintf("record header %s damaged", k), ob.Put(k, rec)
	})
}

// damageIndex damages an entry of the n-th index (modulo their number):
// an even n adds a byValue entry whose length prefix overruns it, an odd n
// overwrites a byKey value with bytes that are no list of values.
func damageIndex(path string, n int) (string, error) {
	return damage(path, func(b *bolt.Bucket) (string, error) {
		ib := b.Bucket(format.IndexesBucket)
		if ib == nil {
			return "", nil
		}
		var names [][]byte
		_ = ib.ForEachBucket(func(name []byte) error {
			names = append(names, bytes.Clone(name))
			return nil
		})
		if len(names) == 0 {
			return "", nil
		}
		slices.SortFunc(names, bytes.Compare)
		name := names[(n/2)%len(names)]
		x := ib.Bucket(name)
		if n%2 == 0 {
			bv := x.Bucket(format.ByValueBucket)
			if bv == nil {
				return "", nil
			}
			return fmt.Sprintf("index %s: a malformed byValue entry", name), bv.Put([]byte{0xff, 0xff, 0x03, 'a'}, nil)
		}
		bk := x.Bucket(format.ByKeyBucket)
		if bk == nil {
			return "", nil
		}
		k, _ := bk.Cursor().First()
		if k == nil {
			return "", nil
		}
		k = bytes.Clone(k)
		return fmt.Sprintf("index %s: byKey %s damaged", name, k), bk.Put(k, []byte{0xc1, 0xc1})
	})
}

// metaKeys are the meta values a damage-meta step may damage, by its N.
var metaKeys = [][]byte{
	format.RVKey, format.IndexVersionsKey, []byte("provenance"), format.ClockKey,
	format.TreeBytesKey, format.DescriptionKey, format.CommittedKey,
}

// damageMeta overwrites the n-th meta value (modulo their number), if the
// collection has it, with bytes that are no value of it.
func damageMeta(path string, n int) (string, error) {
	return damage(path, func(b *bolt.Bucket) (string, error) {
		mb := b.Bucket(format.CollMetaBucket)
		if mb == nil {
			return "", nil
		}
		k := metaKeys[n%len(metaKeys)]
		if mb.Get(k) == nil {
			return "", nil
		}
		return fmt.Sprintf("meta %s damaged", k), mb.Put(k, []byte{0xc1, 0xff, 'x'})
	})
}

// damageKind runs a damage step of the kinds above on the closed file.
func (d *driver) damageKind(st Step) error {
	var what string
	var err error
	switch st.Op {
	case OpDamageBucket:
		what, err = damageBucket(d.path, st.N)
	case OpDamageHeader:
		what, err = damageHeader(d.path, st.N)
	case OpDamageIndex:
		what, err = damageIndex(d.path, st.N)
	case OpDamageMeta:
		what, err = damageMeta(d.path, st.N)
	}
	if err != nil || what == "" {
		return err
	}
	d.logf("    %s", what)
	d.damaged, d.settled = true, false
	// Any of these may start the collection cold, which drops the
	// checkpoint; or set records aside, which makes tombstones.
	// A checkpoint's buckets removed, or the collection emptied at open,
	// loses its acknowledgements and tombstones: damaged's "none" makes
	// such a key one whose deletion may go untold (ckModel.start).
	d.model.damaged(true)
	return nil
}
