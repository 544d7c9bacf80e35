package persist

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

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
//	tombstones/<name>/   key -> the record of the deleted object
//
// A deleted object whose key was acknowledged leaves a tombstone: its last
// stored state, kept until the consumer acknowledges the deletion (or a
// later state of the key). A consumer that registers after the deletion was
// applied (a late handler, or after a restart) is given the tombstone as a
// deletion; one that was registered got the deletion as an event, and gets
// it again after a restart until it acknowledges it (at least once, as for
// every other change).
//
// The invariants that make skipping safe:
//   - An acknowledgement is never on disk without the object state it names:
//     the state was applied before the consumer saw it, so it is committed
//     in the same transaction as the acknowledgement or an earlier one.
//   - An acknowledgement names one exact state: resourceVersions are unique
//     per change in a cluster, and a collection stored under another
//     provenance (another cluster, list or transform) drops every checkpoint
//     with its objects.
//   - A deleted key's acknowledgements become tombstones in the commit that
//     deletes it; an acknowledgement of a key not stored when its commit
//     runs is not written.
//
// Losing an acknowledgement is always safe (the consumer processes the
// object again); the rules above only ever drop them.
var (
	bucketCheckpoints = format.CheckpointsBucket
	bucketTombstones  = format.TombstonesBucket
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
	// answers from; deleted the tombstones, committed or not (the deleted
	// objects whose deletion is not acknowledged). Guarded by c.mu.
	acked   map[string]string
	deleted map[string]runtime.Object
	closed  bool // guarded by c.mu
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
	acked, deleted := map[string]string{}, map[string]runtime.Object{}
	err := c.db.bolt.View(func(tx *bolt.Tx) error {
		if err := c.checkpointEntries(tx, bucketCheckpoints, name, func(k, v []byte) error {
			acked[string(k)] = string(v)
			return nil
		}); err != nil {
			return err
		}
		return c.checkpointEntries(tx, bucketTombstones, name, func(k, rec []byte) error {
			obj, err := c.db.codec.Decode(rec)
			if err != nil {
				return fmt.Errorf("tombstone of %q: %w (clear the checkpoint: 'inspect checkpoints --clear')", k, err)
			}
			deleted[string(k)] = obj
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %q of collection %q: %w", name, c.name, err)
	}
	// Fold in the layers not committed yet (committing, then pending): a
	// checkpoint closed and opened again finds its acknowledgements there,
	// and a deletion applied but not committed turns the acknowledgement of
	// its key into a tombstone here as the commit will on disk.
	var earlier *layer
	for _, l := range []*layer{c.committing, c.pending} {
		if l == nil {
			continue
		}
		if l.clearedAcks[name] {
			clear(acked)
			clear(deleted)
		}
		for key, ch := range l.changes {
			if !ch.deleted {
				continue
			}
			_, wasAcked := acked[key]
			if l.acks[name][key] != "" {
				wasAcked = true // acknowledged in this layer, before the deletion
			}
			delete(acked, key)
			if !wasAcked || l.ackedDeletions[name][key] {
				continue
			}
			obj, err := c.stateBefore(earlier, key)
			if err != nil {
				return nil, fmt.Errorf("checkpoint %q: the last state of deleted %q: %w", name, key, err)
			}
			if obj != nil {
				deleted[key] = obj
			}
		}
		for key, rv := range l.acks[name] {
			if ch := l.changes[key]; ch != nil && ch.deleted {
				continue // settled above
			}
			delete(deleted, key)
			if rv != "" {
				acked[key] = rv
			}
		}
		earlier = l
	}
	cp := &Checkpoint{c: c, name: name, acked: acked, deleted: deleted}
	if c.checkpoints == nil {
		c.checkpoints = map[string]*Checkpoint{}
	}
	c.checkpoints[name] = cp
	return cp, nil
}

// Name returns the checkpoint's name.
func (cp *Checkpoint) Name() string { return cp.name }

// Ack records that the consumer has finished processing key at resourceVersion
// rv (which also settles an earlier deletion of the key: see AckDeleted). It
// is visible to Acked at once and reaches the file with the next group
// commit; a crash before then loses it, and the object is processed again.
func (cp *Checkpoint) Ack(key, rv string) error {
	if rv == "" {
		return fmt.Errorf("checkpoint %q: acknowledging %q without a resourceVersion", cp.name, key)
	}
	return cp.ack(key, rv)
}

// AckDeleted records that the consumer has finished processing the deletion
// of key: its tombstone is dropped.
func (cp *Checkpoint) AckDeleted(key string) error { return cp.ack(key, "") }

// ack records an acknowledgement of key at rv, or of its deletion ("").
func (cp *Checkpoint) ack(key, rv string) error {
	return cp.write(func(l *layer) bool {
		_, tombstone := cp.deleted[key]
		if !tombstone && (rv == "" || cp.acked[key] == rv) {
			// Already acknowledged (a resync, a repeated reconcile), or a
			// deletion without a tombstone: nothing to write.
			return false
		}
		delete(cp.deleted, key)
		if rv != "" {
			cp.acked[key] = rv
		}
		l.ack(cp.name, key, rv)
		return true
	})
}

// write runs change on the pending layer, under the locks an Apply takes,
// and has the group commit write it if change reports it changed anything.
func (cp *Checkpoint) write(change func(*layer) bool) error {
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
	changed := change(c.pending)
	if changed {
		c.db.applySeq.Add(1)
	}
	c.mu.Unlock()
	c.db.applyMu.RUnlock()
	if changed {
		c.db.noteApplied(1)
	}
	return nil
}

// Acked returns the resourceVersion at which key was last acknowledged.
func (cp *Checkpoint) Acked(key string) (rv string, ok bool) {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	rv, ok = cp.acked[key]
	return rv, ok
}

// Unacknowledged returns every stored object that is not acknowledged at its
// stored resourceVersion (what the consumer still has to process), and how
// many stored objects are. An acknowledged object is not decoded: its
// resourceVersion is read from its record's header, so a consumer that joins
// a large collection pays for what changed, not for what it has seen.
func (cp *Checkpoint) Unacknowledged() (objs []runtime.Object, acknowledged int, err error) {
	c := cp.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	isAcked := func(key, rv string) bool {
		a, ok := cp.acked[key]
		return ok && a == rv
	}
	if c.memory() != nil {
		// Every object is decoded and cached: read versions from them.
		err = c.cache.forEach(func(key string, obj runtime.Object) error {
			rv, err := resourceVersionOf(obj)
			if err != nil {
				return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
			}
			if isAcked(key, rv) {
				acknowledged++
			} else {
				objs = append(objs, obj)
			}
			return nil
		})
		return objs, acknowledged, err
	}
	err = c.forEachUnwrittenLocked(func(key string, ch *change) error {
		rv, err := ReadResourceVersion(ch.record)
		if err != nil {
			return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
		}
		if isAcked(key, rv) {
			acknowledged++
			return nil
		}
		obj, err := c.changeObjectLocked(key, ch)
		if err != nil {
			return err
		}
		objs = append(objs, obj)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	err = c.db.bolt.View(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		var found []keyed
		var records [][]byte
		err := b.Bucket(bucketObjects).ForEach(func(k, rec []byte) error {
			key := string(k)
			if c.inLayersLocked(key) {
				return nil
			}
			rv, err := ReadResourceVersion(rec)
			if err != nil {
				return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
			}
			if isAcked(key, rv) {
				acknowledged++
				return nil
			}
			found, records = append(found, keyed{key: key}), append(records, rec)
			return nil
		})
		if err != nil {
			return err
		}
		// The records are valid until the transaction ends.
		if err := c.decodeAllLocked(found, records); err != nil {
			return err
		}
		objs = append(objs, objectsOf(found)...)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return objs, acknowledged, nil
}

// resourceVersionOf returns a stored object's resourceVersion.
func resourceVersionOf(obj runtime.Object) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetResourceVersion(), nil
}

// Deleted returns the checkpoint's tombstones: key -> the deleted object's
// last stored state, for each deletion of an acknowledged object that is not
// acknowledged itself. The objects are shared: read-only.
func (cp *Checkpoint) Deleted() map[string]runtime.Object {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	return maps.Clone(cp.deleted)
}

// Tombstones returns the number of tombstones (see Deleted).
func (cp *Checkpoint) Tombstones() int {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	return len(cp.deleted)
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
	return cp.write(func(l *layer) bool {
		clear(cp.acked)
		clear(cp.deleted)
		l.clearAcks(cp.name)
		return true
	})
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

// stateBefore returns key's state before the layer after earlier: earlier's
// change to it, else the committed state (nil if none). Called with c.mu
// held.
func (c *Collection) stateBefore(earlier *layer, key string) (runtime.Object, error) {
	if earlier != nil {
		if ch := earlier.changes[key]; ch != nil {
			return ch.obj, nil // nil if deleted there
		}
	}
	if ch := c.journalChangeLocked(key); ch != nil {
		if ch.deleted {
			return nil, nil
		}
		if ch.obj != nil {
			return ch.obj, nil
		}
		// Not decodeLocked, as below.
		return c.db.codec.Decode(ch.record)
	}
	var obj runtime.Object
	err := c.viewRecord(key, func(rec []byte) error {
		var err error
		// Not decodeLocked: the object is being deleted, and must not
		// enter the cache.
		obj, err = c.db.codec.Decode(rec)
		return err
	})
	return obj, err
}

// tombstoneAcksLocked turns key's acknowledgements in the open checkpoints
// into tombstones carrying obj, its last state (the key is being deleted).
// Called with c.mu held.
func (c *Collection) tombstoneAcksLocked(key string, obj func() runtime.Object) {
	for _, cp := range c.checkpoints {
		if _, ok := cp.acked[key]; ok {
			delete(cp.acked, key)
			if o := obj(); o != nil {
				cp.deleted[key] = o
			}
		}
	}
}

// checkpointEntries calls fn for each entry of the named checkpoint's bucket
// below parent (bucketCheckpoints or bucketTombstones), if there is one.
func (c *Collection) checkpointEntries(tx *bolt.Tx, parent []byte, name string, fn func(k, v []byte) error) error {
	b := c.bucket(tx)
	if b == nil {
		return ErrNoCollection
	}
	pb := b.Bucket(parent)
	if pb == nil {
		return nil
	}
	nb := pb.Bucket([]byte(name))
	if nb == nil {
		return nil
	}
	return nb.ForEach(fn)
}

// CheckpointTombstones returns the keys of the named checkpoint's committed
// tombstones, for tools.
func (c *Collection) CheckpointTombstones(name string) ([]string, error) {
	var keys []string
	err := c.db.bolt.View(func(tx *bolt.Tx) error {
		return c.checkpointEntries(tx, bucketTombstones, name, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	return keys, err
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
		return c.checkpointEntries(tx, bucketCheckpoints, name, func(k, v []byte) error {
			acked[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %q of collection %q: %w", name, c.name, err)
	}
	return acked, nil
}

// ack records an acknowledgement in the layer; rv "" acknowledges the key's
// deletion (drops its tombstone).
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
	if ch := l.changes[key]; rv == "" && ch != nil && ch.deleted {
		// This acknowledges the deletion this layer holds: its tombstone
		// need not be written. A later change to the key undoes this
		// (forgetCovered).
		if l.ackedDeletions == nil {
			l.ackedDeletions = map[string]map[string]bool{}
		}
		if l.ackedDeletions[name] == nil {
			l.ackedDeletions[name] = map[string]bool{}
		}
		l.ackedDeletions[name][key] = true
	}
}

// forgetAckedDeletions is called when the layer gets a new change to key: an
// acknowledgement of an earlier deletion does not cover what follows.
func (l *layer) forgetAckedDeletions(key string) {
	for _, m := range l.ackedDeletions {
		delete(m, key)
	}
}

// clearAcks records that the named checkpoint is cleared before the layer's
// later acknowledgements.
func (l *layer) clearAcks(name string) {
	if l.clearedAcks == nil {
		l.clearedAcks = map[string]bool{}
	}
	l.clearedAcks[name] = true
	delete(l.acks, name)
	delete(l.ackedDeletions, name)
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
	for name, m := range newer.ackedDeletions {
		for key := range m {
			if l.ackedDeletions == nil {
				l.ackedDeletions = map[string]map[string]bool{}
			}
			if l.ackedDeletions[name] == nil {
				l.ackedDeletions[name] = map[string]bool{}
			}
			l.ackedDeletions[name][key] = true
		}
	}
}

// writeAcks writes the layer's acknowledgements after its object changes;
// deleted holds the last stored record of each key the layer deleted. Called
// from writeCommitting.
//
// A deleted key acknowledged in a checkpoint (on disk or in this layer)
// becomes a tombstone, unless the layer also holds the acknowledgement of
// that deletion (ackedDeletions); then the layer's acknowledgements are
// written (a key not stored is not acknowledged) and drop the tombstones of
// their keys, except of those this layer deleted (those were settled
// above).
func (c *Collection) writeAcks(b *bolt.Bucket, l *layer, deleted map[string][]byte) error {
	cb := b.Bucket(bucketCheckpoints)
	if cb == nil && len(l.acks) == 0 && len(l.clearedAcks) == 0 {
		return nil // no checkpoint was ever written: nothing to move either
	}
	var err error
	if cb == nil {
		if cb, err = b.CreateBucket(bucketCheckpoints); err != nil {
			return err
		}
	}
	tb, err := b.CreateBucketIfNotExists(bucketTombstones)
	if err != nil {
		return err
	}
	for name := range l.clearedAcks {
		for _, parent := range []*bolt.Bucket{cb, tb} {
			if err := parent.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
		}
	}
	names := map[string]bool{}
	err = cb.ForEachBucket(func(name []byte) error {
		names[string(name)] = true
		return nil
	})
	if err != nil {
		return err
	}
	for name := range l.acks {
		names[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		nb, err := cb.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		nt, err := tb.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		layerAcks := l.acks[name]
		for _, key := range sortedKeys(deleted) {
			kb := []byte(key)
			if nb.Get(kb) == nil && layerAcks[key] == "" {
				continue
			}
			if err := nb.Delete(kb); err != nil {
				return err
			}
			if l.ackedDeletions[name][key] {
				if err := nt.Delete(kb); err != nil {
					return err
				}
				continue
			}
			if rec := deleted[key]; rec != nil {
				if err := nt.Put(kb, rec); err != nil {
					return err
				}
			}
		}
		objects := b.Bucket(bucketObjects)
		for _, key := range sortedKeys(layerAcks) {
			if _, ok := deleted[key]; ok {
				continue
			}
			kb := []byte(key)
			if err := nt.Delete(kb); err != nil {
				return err
			}
			rv := layerAcks[key]
			if rv == "" {
				continue
			}
			if !c.storedTx(objects, l, key) {
				// Not stored (deleted in an earlier commit, or never):
				// nothing to skip.
				continue
			}
			if err := nb.Put(kb, []byte(rv)); err != nil {
				return fmt.Errorf("checkpoint %q, key %q: %w", name, key, err)
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
		clear(cp.deleted)
	}
	for _, name := range [][]byte{bucketCheckpoints, bucketTombstones} {
		if err := b.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}

// sortedKeys returns m's keys in order (bbolt writes sorted keys fastest).
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
