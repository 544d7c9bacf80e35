package persist

import (
	"errors"
	"fmt"
	"maps"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A collection holds two kinds of state. Records and the resourceVersion
// are what the server gave, so a damaged one is set aside and listed again.
// Index entries and versions are derived from the records. A damaged one
// is built again from the records, and nothing needs listing.
//
// A writable open checks every entry of the derived buckets: each index's
// byValue and byKey, and versions with a fold's copy of them. Damage may come from a bit flipped on
// the disk, or a file copied while open, which no transaction made. So
// every writable open checks, whoever wrote the file last.
// No read can get past a damaged entry.
// A byValue entry that names no object fails every read of its index, and
// no set-aside of an object removes it. A byKey value that does not decode
// fails every commit that changes its key. The check reads keys and small
// values, never a record. It parses them in place and allocates nothing,
// so it costs a walk of the derived buckets' pages.

// checkDerived returns why each index of indexes has damaged entries, and
// why the versions bucket has, if it does. The collection b has the
// structure checkStructure and checkIndexBuckets require.
func (c *Collection) checkDerived(b *bolt.Bucket, indexes map[string]string) (map[string]error, error) {
	c.db.derivedChecks.Add(1)
	var damaged map[string]error
	idx := b.Bucket(format.IndexesBucket)
	for _, name := range sortedKeys(indexes) {
		if err := checkIndexEntries(idx.Bucket([]byte(name))); err != nil {
			if damaged == nil {
				damaged = map[string]error{}
			}
			damaged[name] = err
		}
	}
	var versionsErr error
	// A fold in progress holds the first part of the versions in its copy
	// (format.Tree), and reads take it as they take the rest.
	if vt := versionsTree(b); vt.Exists() {
		versionsErr = vt.ForEach(func(k, v []byte) error {
			if v == nil {
				return fmt.Errorf("%w: a bucket stands where the version of %q belongs", ErrCorruptRecord, k)
			}
			uid, rv, err := format.SplitVersion(v)
			if err == nil && (!plausibleResourceVersion(uid) || !plausibleResourceVersion(rv)) {
				err = fmt.Errorf("%w: version %q/%q is none a server gives", ErrCorruptRecord, uid, rv)
			}
			if err != nil {
				return fmt.Errorf("the version of %q: %w", k, err)
			}
			return nil
		})
	}
	return damaged, versionsErr
}

// checkIndexEntries returns an error wrapping ErrCorruptRecord for the
// first damaged entry of the index bucket ib.
func checkIndexEntries(ib *bolt.Bucket) error {
	err := ib.Bucket(format.ByValueBucket).ForEach(func(k, v []byte) error {
		if v == nil && ib.Bucket(format.ByValueBucket).Bucket(k) != nil {
			return fmt.Errorf("%w: a bucket stands where the byValue entry %q belongs", ErrCorruptRecord, k)
		}
		return format.CheckIndexEntry(k, v)
	})
	if err != nil {
		return err
	}
	return ib.Bucket(format.ByKeyBucket).ForEach(func(k, v []byte) error {
		if v == nil {
			return fmt.Errorf("%w: a bucket stands where the byKey values of %q belong", ErrCorruptRecord, k)
		}
		if err := format.CheckIndexValues(v); err != nil {
			return fmt.Errorf("the byKey values of %q: %w", k, err)
		}
		return nil
	})
}

// dropDamagedDerivedTx deletes the indexes and the versions bucket
// checkDerived finds damaged, and forgets those indexes. create then
// builds them again from the records, as it builds an index whose version
// changed. rebuiltAtOpen says what was dropped and why. Called by create,
// before the indexes are split into those in use and the dormant.
func (c *Collection) dropDamagedDerivedTx(b *bolt.Bucket) error {
	damaged, versionsErr := c.checkDerived(b, c.indexes)
	var why []error
	if len(damaged) > 0 {
		idx := b.Bucket(format.IndexesBucket)
		for _, name := range sortedKeys(damaged) {
			if err := idx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			why = append(why, fmt.Errorf("index %q (version %q): %w", name, c.indexes[name], damaged[name]))
		}
		c.indexes = maps.Clone(c.indexes)
		maps.DeleteFunc(c.indexes, func(name, _ string) bool { return damaged[name] != nil })
		if err := c.writeIndexVersions(b); err != nil {
			return err
		}
	}
	if versionsErr != nil {
		if err := b.DeleteBucket(format.VersionsBucket); err != nil {
			return err
		}
		why = append(why, fmt.Errorf("versions: %w", versionsErr))
	}
	c.rebuiltAtOpen = errors.Join(c.rebuiltAtOpen, errors.Join(why...))
	return nil
}

// RebuiltAtOpen returns why DB.Collection rebuilt index entries or
// versions it found damaged, or nil. They are derived from the records,
// so they were built again from them, and nothing was lost.
func (c *Collection) RebuiltAtOpen() error { return c.rebuiltAtOpen }

// putValue is b.Put, replacing a bucket that stands where the value
// belongs. No open checks every record's place, which would read every
// record. bbolt refuses to put or delete a value where a bucket stands,
// and the commit, which writes every collection of the file, would fail
// for ever. Reads take such a bucket for a record that does not decode, so
// its owner sets it aside.
func putValue(b *bolt.Bucket, k, v []byte) error {
	err := b.Put(k, v)
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		if err = b.DeleteBucket(k); err == nil {
			err = b.Put(k, v)
		}
	}
	return err
}

// entry returns k's value in b, and whether b holds k, as a value or as a
// bucket standing where the value belongs (see putValue). A bucket's value
// is nil, which reads as a value that does not decode.
func entry(b *bolt.Bucket, k []byte) ([]byte, bool) {
	if v := b.Get(k); v != nil {
		return v, true
	}
	return nil, b.Bucket(k) != nil
}

// deleteValue is b.Delete, deleting a bucket that stands where the value
// belongs (see putValue).
func deleteValue(b *bolt.Bucket, k []byte) error {
	err := b.Delete(k)
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		err = b.DeleteBucket(k)
	}
	return err
}
