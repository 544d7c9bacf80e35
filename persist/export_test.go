package persist

import (
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// WithJournalBytes returns opts with the journal a collection gathers
// before a fold whatever its size and Options.JournalShare, so that tests
// see folds on a few objects.
func WithJournalBytes(opts Options, n int64) Options {
	opts.journalBytes = n
	return opts
}

// WithFoldChunk returns opts with every fold merging n entries per commit
// into the trees' copies (0: computed), so that folds of a few objects
// span several commits.
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
		return objectsTree(c.bucket(tx)).ForEach(func(_, v []byte) error {
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
		objects = objectsTree(b).KeyN()
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

// FoldedBackForTest returns how many transactions folded a fold's copies
// back into the trees at once (abandonRebuildTx).
func FoldedBackForTest(db *DB) int64 { return db.foldedBack.Load() }

// FileHighWater returns the bytes of db's file below bbolt's high-water
// mark: the pages it holds, without the growth bbolt preallocates.
func FileHighWater(db *DB) int64 {
	var n int64
	_ = db.bolt.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// FoldCopies reports, in a transaction of its own, how many records the
// copies of a fold in progress hold, or -1 if no fold writes copies.
func FoldCopies(c *Collection) (int, error) {
	n := -1
	err := c.db.bolt.View(func(tx *bolt.Tx) error {
		if rb := c.bucket(tx).Bucket(format.RebuildBucket); rb != nil {
			n = rb.Bucket(format.ObjectsBucket).Stats().KeyN
		}
		return nil
	})
	return n, err
}

// CheckTrees checks, in a transaction of its own, what every commit must
// leave of the collection's trees: each copy a fold writes sorts before
// what is left of its tree, the object tree and the versions hold the same
// keys, and the record bytes counted are the tree's.
func CheckTrees(c *Collection) error {
	c.db.commitMu.Lock()
	counted := c.journal.treeBytes
	c.db.commitMu.Unlock()
	return c.db.bolt.View(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if err := checkRebuild(b); err != nil {
			return err
		}
		var objects, versions []string
		var actual int64
		if err := objectsTree(b).ForEach(func(k, v []byte) error {
			objects = append(objects, string(k))
			actual += int64(len(v))
			return nil
		}); err != nil {
			return err
		}
		if err := versionsTree(b).ForEach(func(k, _ []byte) error {
			versions = append(versions, string(k))
			return nil
		}); err != nil {
			return err
		}
		if !slices.Equal(objects, versions) {
			return fmt.Errorf("the object tree holds %v, the versions %v", objects, versions)
		}
		if counted >= 0 && counted != actual {
			return fmt.Errorf("the tree's record bytes counted %d, the tree holds %d", counted, actual)
		}
		return nil
	})
}

// PagesWritten returns the bytes of the pages the file's write
// transactions have written so far, meta pages aside. bbolt writes every
// page a transaction allocates, once, so the count is exact and
// deterministic for a given sequence of commits.
func PagesWritten(db *DB) int64 {
	s := db.bolt.Stats()
	return s.TxStats.GetPageAlloc()
}

// ByValueOwed reports, in a transaction of its own, whether the file
// marks the collection's byValue buckets owed (byvalueowed.go).
func ByValueOwed(c *Collection) (owed bool, err error) {
	err = c.db.bolt.View(func(tx *bolt.Tx) error {
		owed = byValueOwed(c.bucket(tx))
		return nil
	})
	return owed, err
}
