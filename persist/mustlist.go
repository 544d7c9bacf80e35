package persist

import (
	"context"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A collection's resourceVersion says where a watch may resume. The stored
// objects are exactly the list at that version plus the events after it.
// An owner may have to drop part of the stored state, such as objects it
// could not read back. That breaks the rule, and the owner must list again.
// Until a list has been applied, the collection carries a must-list mark in
// the file.
//
//   - SetAside, SetAsideUnreadable and SetAsideAll set it in the same
//     commit (the same bbolt transaction) as the drop. So no crash can
//     leave the drop without it.
//   - Apply keeps it. A watch event or bookmark applied afterwards writes a
//     valid resourceVersion, but the objects set aside are still missing.
//   - Close keeps it, because it only flushes.
//   - ApplyList clears it, in the commit that writes the list.
//   - Emptying the collection (a provenance mismatch, Reset) clears it.
//     Nothing is left to be incomplete, and an empty collection without a
//     resourceVersion is listed anyway.
//
// An owner that opens a collection with MustList set must list, and must
// not present what is stored as complete, until ApplyList.

// MustList reports whether the collection carries the must-list mark. Part
// of its state was then set aside (SetAside, SetAsideAll), and no list has
// been applied since (ApplyList). The mark survives restarts (see
// mustlist.go).
func (c *Collection) MustList() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mustList
}

// SetAside applies ops, keeps the resourceVersion, and sets the must-list
// mark. The ops are typically deletions of state that could not be read
// back. The mark and the ops reach the file in the same commit.
func (c *Collection) SetAside(ops []Op) error {
	mark := true
	return c.apply(ops, "", false, &mark, nil)
}

// SetAsideUnreadable is SetAside for stored records that could not be read
// back, such as those an *UnreadableRecordsError names. It deletes each
// key whose newest state still does not decode, and keeps a key written or
// deleted since. The check and the deletions happen under one hold of the
// lock that orders applies, so no Apply comes between them. The must-list
// mark is set only if a key was deleted. It returns the keys it deleted.
func (c *Collection) SetAsideUnreadable(keys []string) ([]string, error) {
	ops := make([]Op, len(keys))
	for n, key := range keys {
		ops[n] = Op{Key: key, Delete: true}
	}
	var deleted []string
	unreadable := func(key string) (bool, error) {
		_, _, err := c.getLocked(key)
		switch {
		case err == nil:
			return false, nil // written or deleted since
		case errors.Is(err, ErrCorruptRecord):
			deleted = append(deleted, key)
			return true, nil
		}
		return false, fmt.Errorf("reading %q to tell whether it still cannot be read back: %w", key, err)
	}
	mark := true
	if err := c.apply(ops, "", false, &mark, unreadable); err != nil {
		return nil, err
	}
	return deleted, nil
}

// SetAsideAll empties the collection as Reset does, keeping its recorded
// provenance. It sets the must-list mark in the same transaction. It serves
// an owner that cannot even tell which keys it holds. The caveat on concurrent Apply
// of Reset holds.
func (c *Collection) SetAsideAll(ctx context.Context) error {
	_, err := c.reset(ctx, c.Provenance(), true, true)
	return err
}

// ApplyList is Apply for a list. Its ops turn the stored state into the
// listed one, at rv. It also clears the must-list mark, in the same commit.
func (c *Collection) ApplyList(ops []Op, rv string) error {
	mark := false
	return c.apply(ops, rv, true, &mark, nil)
}

// ApplyPart is Apply for part of a list received in pages. It applies ops,
// and leaves the resourceVersion and the must-list mark as they are. Group
// commits write the parts as they come. So the file holds the objects of a
// list whose resourceVersion it does not have yet. The owner sets that with
// ApplyList once the last page is applied. An ApplyList of no ops changes
// nothing else. Until then the collection must not be resumed. So the owner
// lists into a collection without a resourceVersion, and a crash leaves it
// without one.
func (c *Collection) ApplyPart(ops []Op) error {
	return c.apply(ops, "", false, nil, nil)
}

// writeMustList stores the mark in meta, or removes it.
func writeMustList(meta *bolt.Bucket, set bool) error {
	if !set {
		return meta.Delete(format.MustListKey)
	}
	return meta.Put(format.MustListKey, []byte{1})
}
