package persist

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A checkpoint records, for one consumer of a collection (a handler, a
// reconciler), the resourceVersion at which it last finished processing each
// key. A consumer that restarts on the same file can then skip the stored
// objects it has already processed at exactly their stored version.
//
// Acknowledgements are written with the group commit, in the same
// transaction as the collection's changes, below the collection:
//
//	checkpoints/<name>/  key -> resourceVersion
//
// The invariants that make skipping safe:
//   - An acknowledgement is never on disk without the object state it names:
//     the state was applied before the consumer saw it, so it is committed
//     in the same transaction as the acknowledgement or an earlier one.
//   - An acknowledgement names one exact state: resourceVersions are unique
//     per change in a cluster, and a collection stored under another
//     provenance (another cluster, list or transform) drops every checkpoint
//     with its objects.
//   - A deleted key loses its acknowledgements in the commit that deletes
//     it; an acknowledgement of a key not stored when its commit runs is not
//     written.
//
// Losing an acknowledgement is always safe (the consumer processes the
// object again); the rules above only ever drop them.
var (
	bucketCheckpoints = format.CheckpointsBucket
)

// ErrCheckpointOpen is returned by Collection.Checkpoint for a name that is
// already open: two consumers sharing one checkpoint would skip each
// other's work.
var ErrCheckpointOpen = errors.New("checkpoint is already open")

// Checkpoint is one consumer's acknowledgements in a collection (see the
// description above). Methods are safe for concurrent use.
type Checkpoint struct {
	c    *Collection
	name string
	// acked holds every acknowledgement, committed or not: what Acked
	// answers from. Guarded by c.mu.
	acked  map[string]string
	closed bool // guarded by c.mu
}

// Checkpoint opens the named checkpoint of the collection, loading its
// acknowledgements (about 100 bytes of memory each). A name is open at most
// once at a time; Close releases it.
func (c *Collection) Checkpoint(name string) (*Checkpoint, error) {
	if name == "" {
		return nil, errors.New("checkpoint name must not be empty")
	}
	// Under mu, so that no commit drops a layer between the read and the
	// layers folded in below (a commit writes the file before it drops the
	// layer, and folding a written layer in again changes nothing).
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.checkpoints[name]; ok {
		return nil, fmt.Errorf("%w: %q in collection %q", ErrCheckpointOpen, name, c.name)
	}
	acked, err := c.CheckpointAcks(name)
	if err != nil {
		return nil, err
	}
	// A checkpoint closed and opened again before its acknowledgements
	// were committed finds them in the layers.
	for _, l := range []*layer{c.committing, c.pending} {
		if l == nil {
			continue
		}
		if l.clearedAcks[name] {
			clear(acked)
		}
		maps.Copy(acked, l.acks[name])
	}
	cp := &Checkpoint{c: c, name: name, acked: acked}
	if c.checkpoints == nil {
		c.checkpoints = map[string]*Checkpoint{}
	}
	c.checkpoints[name] = cp
	return cp, nil
}

// Name returns the checkpoint's name.
func (cp *Checkpoint) Name() string { return cp.name }

// Ack records that the consumer has finished processing key at resourceVersion
// rv. It is visible to Acked at once and reaches the file with the next group
// commit; a crash before then loses it, and the object is processed again.
func (cp *Checkpoint) Ack(key, rv string) error {
	c := cp.c
	if c.db.opts.ReadOnly {
		return ErrReadOnly
	}
	if rv == "" {
		return fmt.Errorf("checkpoint %q: acknowledging %q without a resourceVersion", cp.name, key)
	}
	c.db.applyMu.RLock()
	c.mu.Lock()
	if cp.closed || c.db.closedFlag.Load() || c.closed.Load() {
		c.mu.Unlock()
		c.db.applyMu.RUnlock()
		return ErrClosed
	}
	if cp.acked[key] == rv {
		// Already acknowledged (a resync, a repeated reconcile): nothing to
		// write.
		c.mu.Unlock()
		c.db.applyMu.RUnlock()
		return nil
	}
	cp.acked[key] = rv
	c.pending.ack(cp.name, key, rv)
	c.db.applySeq.Add(1)
	c.mu.Unlock()
	c.db.applyMu.RUnlock()
	c.db.noteApplied(1)
	return nil
}

// Acked returns the resourceVersion at which key was last acknowledged.
func (cp *Checkpoint) Acked(key string) (rv string, ok bool) {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	rv, ok = cp.acked[key]
	return rv, ok
}

// Len returns the number of acknowledged keys.
func (cp *Checkpoint) Len() int {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	return len(cp.acked)
}

// Clear drops every acknowledgement of the checkpoint, on disk with the next
// group commit: its consumer processes every object again on its next start.
func (cp *Checkpoint) Clear() error {
	c := cp.c
	if c.db.opts.ReadOnly {
		return ErrReadOnly
	}
	c.db.applyMu.RLock()
	c.mu.Lock()
	if cp.closed || c.db.closedFlag.Load() || c.closed.Load() {
		c.mu.Unlock()
		c.db.applyMu.RUnlock()
		return ErrClosed
	}
	clear(cp.acked)
	c.pending.clearAcks(cp.name)
	c.db.applySeq.Add(1)
	c.mu.Unlock()
	c.db.applyMu.RUnlock()
	c.db.noteApplied(1)
	return nil
}

// Close releases the name; acknowledgements made before it still reach the
// file. Ack and Clear then return ErrClosed.
func (cp *Checkpoint) Close() {
	cp.c.mu.Lock()
	defer cp.c.mu.Unlock()
	if !cp.closed {
		cp.closed = true
		delete(cp.c.checkpoints, cp.name)
	}
}

// forgetAcksLocked drops key's acknowledgements in every open checkpoint (the key
// was deleted). Called with c.mu held.
func (c *Collection) forgetAcksLocked(key string) {
	for _, cp := range c.checkpoints {
		delete(cp.acked, key)
	}
}

// Checkpoints returns the names of the collection's stored checkpoints.
func (c *Collection) Checkpoints() ([]string, error) {
	var names []string
	err := c.db.bolt.View(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		cb := b.Bucket(bucketCheckpoints)
		if cb == nil {
			return nil
		}
		return cb.ForEachBucket(func(name []byte) error {
			names = append(names, string(name))
			return nil
		})
	})
	return names, err
}

// CheckpointAcks returns the named checkpoint's committed acknowledgements
// (key -> resourceVersion); empty if there is no such checkpoint.
func (c *Collection) CheckpointAcks(name string) (map[string]string, error) {
	acked := map[string]string{}
	err := c.db.bolt.View(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		cb := b.Bucket(bucketCheckpoints)
		if cb == nil {
			return nil
		}
		if nb := cb.Bucket([]byte(name)); nb != nil {
			return nb.ForEach(func(k, v []byte) error {
				acked[string(k)] = string(v)
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %q of collection %q: %w", name, c.name, err)
	}
	return acked, nil
}

// ack records an acknowledgement in the layer.
func (l *layer) ack(name, key, rv string) {
	if l.acks == nil {
		l.acks = map[string]map[string]string{}
	}
	m := l.acks[name]
	if m == nil {
		m = map[string]string{}
		l.acks[name] = m
	}
	m[key] = rv
}

// clearAcks records that the named checkpoint is cleared before the layer's
// later acknowledgements.
func (l *layer) clearAcks(name string) {
	if l.clearedAcks == nil {
		l.clearedAcks = map[string]bool{}
	}
	l.clearedAcks[name] = true
	delete(l.acks, name)
}

// absorbAcks folds newer's acknowledgements on top of l's.
func (l *layer) absorbAcks(newer *layer) {
	for name := range newer.clearedAcks {
		l.clearAcks(name)
	}
	for name, m := range newer.acks {
		for key, rv := range m {
			l.ack(name, key, rv)
		}
	}
}

// writeAcks writes the layer's acknowledgements after its object changes,
// and drops those of the keys it deleted. Called from writeCommitting.
func (c *Collection) writeAcks(b *bolt.Bucket, l *layer, deleted []string) error {
	cb := b.Bucket(bucketCheckpoints)
	if cb == nil && len(l.acks) == 0 {
		return nil // no checkpoint was ever written: nothing to drop either
	}
	if cb == nil {
		var err error
		if cb, err = b.CreateBucket(bucketCheckpoints); err != nil {
			return err
		}
	}
	for name := range l.clearedAcks {
		if err := cb.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
	}
	objects := b.Bucket(bucketObjects)
	for _, name := range sortedKeys(l.acks) {
		nb, err := cb.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		m := l.acks[name]
		for _, key := range sortedKeys(m) {
			kb := []byte(key)
			if objects.Get(kb) == nil {
				// Deleted since (or never stored): nothing to skip.
				if err := nb.Delete(kb); err != nil {
					return err
				}
				continue
			}
			if err := nb.Put(kb, []byte(m[key])); err != nil {
				return fmt.Errorf("checkpoint %q, key %q: %w", name, key, err)
			}
		}
	}
	if len(deleted) == 0 {
		return nil
	}
	var names [][]byte
	err := cb.ForEachBucket(func(name []byte) error {
		names = append(names, bytes.Clone(name))
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range names {
		nb := cb.Bucket(name)
		for _, key := range deleted {
			if err := nb.Delete([]byte(key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropCheckpointsTx deletes every checkpoint of the collection, on disk and in
// the open checkpoints: the stored objects they acknowledge were dropped.
func (c *Collection) dropCheckpointsTx(b *bolt.Bucket) error {
	for _, cp := range c.checkpoints {
		clear(cp.acked)
	}
	if err := b.DeleteBucket(bucketCheckpoints); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	return nil
}

// sortedKeys returns m's keys in order (bbolt writes sorted keys fastest).
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
