package persist

import (
	"errors"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A group commit writes a layer in one bbolt transaction. A transaction
// holds a buffer for every page it dirties until it commits. It then gives
// the single-page ones to bbolt's page pool, a sync.Pool. There they stay
// live until two garbage collections have passed. A process with a large
// live heap collects rarely. So the pages of one large commit are held for
// minutes. Loading a list of 100,000 6 KB Pods dirties 20,000 pages, 650
// MiB. That was most of what such a process held beyond client-go's
// informer for the first minutes after its cold start.
//
// So a collection that is being filled is written ahead. Such a collection
// has no stored resourceVersion and no journal. Every change in its
// committing layer is an object whose key sorts after the stored ones, as
// when a list loads into an empty collection. The layer is written into the
// trees a chunk of keys (defaultWriteAheadChunk) per transaction. This
// happens before the commit's own transaction. That transaction writes the
// rest with the resourceVersion, the must-list mark and the
// acknowledgements, as always. A transaction then dirties a chunk's pages,
// which the next chunk takes back from the pool.
//
// The file never holds a state that could be resumed from. Until the
// commit's transaction, it has no resourceVersion, and a start without one
// lists. Readers see the layer over the trees, as for every commit. The
// layer stays whole in memory until the commit's transaction is done.

// defaultWriteAheadChunk is how many keys each write-ahead transaction
// writes. That is about 24 MB of records for 6 KB Pods. Tests set fewer,
// through Options.writeAheadChunk.
const defaultWriteAheadChunk = 4096

// errNoWriteAhead ends a write-ahead that finds, in the file, that the
// layer must be written in one transaction after all.
var errNoWriteAhead = errors.New("the layer is written in one transaction")

// writeAhead writes all but the last chunk of a large committing layer
// into the trees, a chunk per transaction. The layer is of a collection
// being filled (see above). writeAhead records how far it got in the layer
// (writtenAhead), and writeObjects then leaves that part out. A failed
// transaction ends it, and the commit's transaction writes what is left.
// commit calls it with commitMu held, before the commit's transaction.
func (c *Collection) writeAhead() error {
	l := c.committing
	chunkKeys := c.db.opts.writeAheadChunk
	if len(l.changes) < 2*chunkKeys || c.hasJournal() || len(l.acks) > 0 || len(l.clearedAcks) > 0 {
		return nil
	}
	keys := sortedKeys(l.changes)
	for _, key := range keys {
		if l.changes[key].deleted {
			return nil
		}
	}
	start := 0
	if l.writtenAhead != "" {
		start = sort.SearchStrings(keys, l.writtenAhead+"\x00")
	}
	changeOf := func(key string) *change { return l.changes[key] }
	for ; start+chunkKeys < len(keys); start += chunkKeys {
		chunk := keys[start : start+chunkKeys]
		j := c.journal
		err := c.db.bolt.Update(func(tx *bolt.Tx) error {
			b := c.bucket(tx)
			if b == nil {
				return ErrNoCollection
			}
			if len(b.Bucket(format.CollMetaBucket).Get(format.RVKey)) > 0 || !appending(b.Bucket(format.ObjectsBucket), chunk) {
				return errNoWriteAhead
			}
			return c.writeTrees(b, &j, chunk, changeOf)
		})
		if errors.Is(err, errNoWriteAhead) {
			return nil
		}
		if err != nil {
			return err
		}
		c.journal.treeBytes = j.treeBytes
		l.writtenAhead = chunk[len(chunk)-1]
		if hook := c.db.opts.writtenAhead; hook != nil {
			hook(l.writtenAhead)
		}
	}
	return nil
}

// aheadOf reports whether key was written ahead (see writeAhead).
func (l *layer) aheadOf(key string) bool {
	return l.writtenAhead != "" && key <= l.writtenAhead
}
