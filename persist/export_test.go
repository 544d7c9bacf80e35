package persist

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// WithMinJournalBytes returns opts with the journal a collection gathers
// before a fold whatever its size, so that tests see folds on a few
// objects.
func WithMinJournalBytes(opts Options, n int64) Options {
	opts.minJournalBytes = n
	return opts
}

// WithFoldChunk returns opts with every fold moving n keys per commit (0:
// computed).
func WithFoldChunk(opts Options, n int) Options {
	opts.foldChunk = n
	return opts
}

// JournalState reports the collection's journal as loaded or last
// committed: the generations in the file and whether one is being folded.
func JournalState(c *Collection) (generations int, folding bool) {
	c.db.commitMu.Lock()
	defer c.db.commitMu.Unlock()
	return len(c.journal.gens), c.journal.foldKeys != nil
}

// TreeBytes returns the record bytes the collection counts in its object
// tree (-1 if not counted) and the bytes the tree holds.
func TreeBytes(c *Collection) (counted, actual int64, err error) {
	c.db.commitMu.Lock()
	counted = c.journal.treeBytes
	c.db.commitMu.Unlock()
	err = c.db.bolt.View(func(tx *bolt.Tx) error {
		return c.bucket(tx).Bucket(format.ObjectsBucket).ForEach(func(_, v []byte) error {
			actual += int64(len(v))
			return nil
		})
	})
	return counted, actual, err
}

// JournalHeldBytes returns the record bytes the journal's layers hold in
// memory (they should hold none: the file has them).
func JournalHeldBytes(c *Collection) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := 0
	for _, l := range []*layer{c.journaled, c.folding} {
		if l == nil {
			continue
		}
		for _, ch := range l.changes {
			n += len(ch.record) + len(ch.replaced)
		}
	}
	return n
}

// LayerObjects returns how many decoded objects the layers not yet in the
// journal hold (pending and committing), and how many changes they hold.
func LayerObjects(c *Collection) (objects, changes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, l := range []*layer{c.pending, c.committing} {
		if l == nil {
			continue
		}
		for _, ch := range l.changes {
			changes++
			if ch.obj != nil {
				objects++
			}
		}
	}
	return objects, changes
}

// HoldForCommit moves the collection's pending layer to committing, as a
// commit's first step does, without writing it. Reads find its changes
// there until the next commit writes them, with what was applied since.
func HoldForCommit(c *Collection) {
	c.db.commitMu.Lock()
	defer c.db.commitMu.Unlock()
	c.db.applyMu.Lock()
	defer c.db.applyMu.Unlock()
	c.swapForCommit()
}

// WithWriteAhead returns opts with commits writing ahead chunk keys per
// transaction and calling hook, if not nil, after each such transaction
// with the chunk's last key (see writeahead.go).
func WithWriteAhead(opts Options, chunk int, hook func(last string)) Options {
	opts.writeAheadChunk, opts.writtenAhead = chunk, hook
	return opts
}

// CommittedState reads, in a transaction of its own, the collection's
// stored resourceVersion and how many records its object tree holds.
func CommittedState(c *Collection) (rv string, objects int, err error) {
	err = c.db.bolt.View(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		rv = string(b.Bucket(format.CollMetaBucket).Get(format.RVKey))
		objects = b.Bucket(format.ObjectsBucket).Stats().KeyN
		return nil
	})
	return rv, objects, err
}

// PlausibleResourceVersion reports whether the open takes rv for a
// resourceVersion a server gave.
func PlausibleResourceVersion(rv string) bool { return plausibleResourceVersion([]byte(rv)) }

// WithClock returns opts with the clock checkpoint retention reads.
func WithClock(opts Options, now func() time.Time) Options {
	opts.now = now
	return opts
}

// DerivedChecksForTest returns how many checks of a collection's index
// entries and versions for damage db ran.
func DerivedChecksForTest(db *DB) int64 { return db.derivedChecks.Load() }
