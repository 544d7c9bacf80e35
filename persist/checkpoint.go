package persist

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A checkpoint serves one consumer of a collection, such as a handler or a
// reconciler. It records the resourceVersion at which the consumer last
// finished processing each key. A consumer that restarts on the same file
// can then skip the stored objects it has already processed at exactly
// their stored version.
//
// Acknowledgements are written with the group commit, in the same
// transaction as the collection's changes. They live below the collection:
//
//	checkpoints/<name>/  key -> resourceVersion
//	tombstones/<name>/   key -> the deleted object's last record, and the
//	                     version its deletion was delivered at (format.Tombstone)
//
// A deleted object whose key was acknowledged leaves a tombstone, its last
// stored state. The tombstone is kept until the consumer acknowledges the
// deletion itself, with AckDeleted or with Ack at the version the deletion
// was delivered at. An acknowledgement of a state of the key stored after
// it also settles it. An acknowledgement of any other version settles
// nothing. Such a version is of an earlier state, and arrives after the
// deletion was applied, from a reconcile that began before it. An
// acknowledgement never settles a state newer than the one it names.
//
// A consumer that registers after the deletion was applied is given the
// tombstone as a deletion. That is a late handler, or one after a restart.
// A consumer that was registered got the deletion as an event. It gets the
// deletion again after a restart until it acknowledges it. This is at least
// once delivery, as for every other change.
//
// The invariants that make skipping safe:
//   - An acknowledgement is never on disk without the object state it
//     names. The state was applied before the consumer saw it. So it is
//     committed in the same transaction as the acknowledgement, or in an
//     earlier one.
//   - An acknowledgement names one exact state. resourceVersions are unique
//     per change in a cluster. A collection stored under another
//     provenance (another cluster, list or transform) drops every
//     checkpoint with its objects.
//   - A deleted key's acknowledgements become tombstones in the commit that
//     deletes it. They also do in the set-aside of a damaged journal that
//     held the key's only state. An acknowledgement of a key not stored
//     when its commit runs is not written.
//
// Losing an acknowledgement is always safe, because the consumer processes
// the object again. The rules above only ever drop acknowledgements.
//
// Damage may drop them too: a checkpoint's buckets missing, or its
// collection emptied at open (Collection.DamageSetAside). Nothing in the
// file then says what the consumer processed. It is as after a cold start.
// It is given every stored object again. An object it processed that is
// gone before it is given again is told to it by nothing, as a deletion
// while a cold-started consumer was down is not. A lost tombstone is such
// a deletion too.

// ErrCheckpointOpen is returned by Collection.Checkpoint for a name that is
// already open. Two consumers sharing one checkpoint would skip each
// other's work.
var ErrCheckpointOpen = errors.New("checkpoint is already open")

// Checkpoint is one consumer's acknowledgements in a collection (see the
// description above). Methods are safe for concurrent use.
type Checkpoint struct {
	c    *Collection
	name string
	// acked holds every acknowledgement, committed or not, and Acked
	// answers from it. deleted holds the tombstones, committed or not. They
	// are the deleted objects whose deletion is not acknowledged. Guarded by
	// c.mu.
	acked   map[string]string
	deleted map[string]*tombstone
	closed  bool // guarded by c.mu
	// seenAt is when the checkpoint was last stamped as open, by the
	// collection's in-use clock. overflows counts the times MaxTombstones
	// cleared it. Guarded by c.mu.
	seenAt    time.Time
	overflows int
}

// tombstone is a deletion the consumer has not acknowledged.
type tombstone struct {
	// obj is the deleted object's last stored state, for a deletion
	// applied in this process and not committed yet. It is nil if it could
	// not be read. It is nil once the tombstone is in the file, which
	// Deleted decodes when asked. So an open checkpoint keeps a key per
	// tombstone in memory, not an object.
	obj runtime.Object
	// deletedAt is the version the deletion was delivered at (Op.DeletedAt).
	// It is empty if unknown.
	deletedAt string
}

// Checkpoint opens the named checkpoint of the collection, loading its
// acknowledgements (about 100 bytes of memory each) and the keys of its
// tombstones. A name is open at most once at a time, and Close releases it.
// Opening stamps the checkpoint as in use (see Options.CheckpointRetention).
// It fails with ErrClosed once the collection's Close has begun.
func (c *Collection) Checkpoint(name string) (*Checkpoint, error) {
	cp, err := c.openCheckpoint(name)
	if err != nil {
		return nil, err
	}
	if !c.db.opts.ReadOnly {
		_ = cp.write(func(l *layer) bool { return cp.seeLocked(l) })
	}
	return cp, nil
}

// seeOpenCheckpointsLocked stamps, in the pending layer, the open
// checkpoints whose stamp is due for renewal. A checkpoint open while its
// collection is in use must never look abandoned. Every commit also
// advances the in-use clock. So an open checkpoint's stamp is never more
// than seenRefresh behind it. Called with c.mu held for writing, before a
// commit.
func (c *Collection) seeOpenCheckpointsLocked() {
	for _, cp := range c.checkpoints {
		cp.seeLocked(c.pending)
	}
}

// seeLocked stamps cp in l as open now, by the in-use clock, unless its
// last stamp is younger than seenRefresh, and reports whether it did.
// Called with c.mu held for writing.
func (cp *Checkpoint) seeLocked(l *layer) bool {
	now := cp.c.inUseNow()
	if !cp.seenAt.IsZero() && now.Sub(cp.seenAt) < cp.c.db.opts.seenRefresh() {
		return false
	}
	l.see(cp.name, now)
	cp.seenAt = now
	return true
}

// seenRefresh is how often an open checkpoint's stamp is renewed. That is
// hourly, or four times per retention if that is shorter.
func (o *Options) seenRefresh() time.Duration {
	if r := o.CheckpointRetention / 4; r > 0 && r < time.Hour {
		return r
	}
	return time.Hour
}

// inUseNow returns the collection's in-use clock now (format.ClockKey). That
// is its value at open plus the time elapsed since. Options.now is read for
// elapsed time only. time.Now's monotonic reading ignores wall clock steps.
func (c *Collection) inUseNow() time.Time {
	return c.clockBase.Add(max(0, c.db.opts.now().Sub(c.clockStart)))
}

// loadClock reads the in-use clock of the collection b at open. A
// collection written before the clock was kept starts it at its newest
// checkpoint stamp, and a new one at the current time.
func (c *Collection) loadClock(b *bolt.Bucket) {
	c.clockStart = c.db.opts.now()
	c.clockBase = time.Unix(c.clockStart.Unix(), 0)
	if secs, err := strconv.ParseInt(string(b.Bucket(format.CollMetaBucket).Get(format.ClockKey)), 10, 64); err == nil {
		c.clockBase = time.Unix(secs, 0)
		return
	}
	sb := b.Bucket(format.CheckpointSeenBucket)
	if sb == nil {
		return
	}
	newest, found := int64(0), false
	_ = sb.ForEach(func(_, raw []byte) error {
		if secs, err := strconv.ParseInt(string(raw), 10, 64); err == nil && (!found || secs > newest) {
			newest, found = secs, true
		}
		return nil
	})
	if found {
		c.clockBase = time.Unix(newest, 0)
	}
}

// openCheckpoint is Checkpoint without the stamp.
func (c *Collection) openCheckpoint(name string) (*Checkpoint, error) {
	if err := checkBucketName("checkpoint", name); err != nil {
		return nil, err
	}
	// Under mu, so that no commit drops a layer between the read and the
	// layers folded in below. A commit writes the file before it drops the
	// layer. Folding a written layer in again changes nothing.
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.closedErr(); err != nil {
		// Its layers are stale against the file another instance may
		// have written since.
		return nil, err
	}
	if _, ok := c.checkpoints[name]; ok {
		return nil, fmt.Errorf("%w: %q in collection %q", ErrCheckpointOpen, name, c.name)
	}
	acked, deleted := map[string]string{}, map[string]*tombstone{}
	err := c.db.view(func(tx *bolt.Tx) error {
		if err := c.checkpointEntries(tx, format.CheckpointsBucket, name, func(k, v []byte) error {
			acked[string(k)] = string(v)
			return nil
		}); err != nil {
			return err
		}
		// Load keys only. Deleted decodes the objects when a consumer
		// joins. A tombstone that cannot be read is still a deletion to
		// deliver, with whatever of its state can be read. It never fails
		// the open.
		return c.checkpointEntries(tx, format.TombstonesBucket, name, func(k, raw []byte) error {
			t, _ := format.DecodeTombstone(raw)
			deleted[string(k)] = &tombstone{deletedAt: t.DeletedAt}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %q of collection %q: %w", name, c.name, err)
	}
	// Fold in the layers not committed yet, committing then pending. A
	// checkpoint closed and opened again finds its acknowledgements there.
	// A deletion applied but not committed turns the acknowledgement of its
	// key into a tombstone here, as the commit will on disk.
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
			// An unreadable last state still leaves the deletion to
			// deliver (see Deleted).
			obj, found, _ := c.stateBefore(earlier, key)
			if found {
				deleted[key] = &tombstone{obj: obj, deletedAt: ch.deletedAt}
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
// rv. It is visible to Acked at once, and reaches the file with the next
// group commit. A crash before then loses it, and the object is processed
// again.
//
// key may have a tombstone, because its deletion is not acknowledged. Ack
// then settles it only if rv is the version the deletion was delivered at
// (Op.DeletedAt). The version of the key's state stored now also settles
// it, when the key was created again after the deletion. Any other version
// is of a state before the deletion, and the acknowledgement is dropped.
func (cp *Checkpoint) Ack(key, rv string) error {
	if rv == "" {
		return fmt.Errorf("checkpoint %q: acknowledging %q without a resourceVersion", cp.name, key)
	}
	return cp.ack(key, rv)
}

// AckDeleted records that the consumer has finished processing the deletion
// of key. Its tombstone is dropped.
func (cp *Checkpoint) AckDeleted(key string) error { return cp.ack(key, "") }

// ack records an acknowledgement of key at rv, or of its deletion ("").
// Called by write, with c.mu held.
func (cp *Checkpoint) ack(key, rv string) error {
	c := cp.c
	return cp.write(func(l *layer) bool {
		t, tombstoned := cp.deleted[key]
		if !tombstoned {
			if rv == "" || cp.acked[key] == rv {
				// Nothing to write. The key is already acknowledged, after
				// a resync or a repeated reconcile, or it is a deletion
				// without a tombstone.
				return false
			}
			if ch := c.layerChangeLocked(key); ch != nil && ch.deleted {
				// Deleted since the consumer saw it, and never
				// acknowledged before. There is nothing to skip and no
				// deletion to settle.
				return false
			}
			cp.acked[key] = rv
			l.ack(cp.name, key, rv)
			return true
		}
		settlesDeletion := rv == "" || rv == t.deletedAt
		if !settlesDeletion {
			cur, stored, err := c.currentVersionLocked(key)
			if err != nil || !stored || cur != rv {
				// A state before the deletion, or one that cannot be told
				// apart from it. The tombstone stays.
				return false
			}
			cp.acked[key] = rv
		}
		delete(cp.deleted, key)
		l.ack(cp.name, key, rv)
		return true
	})
}

// currentVersionLocked returns the resourceVersion of key's newest state
// and whether it is stored. Called with c.mu held.
func (c *Collection) currentVersionLocked(key string) (string, bool, error) {
	if obj, ok := c.cache.get(key); ok {
		rv, err := resourceVersionOf(obj)
		return rv, true, err
	}
	if c.memory() != nil {
		return "", false, nil // every object is cached: absent
	}
	if ch := c.layerChangeLocked(key); ch != nil {
		if ch.deleted {
			return "", false, nil
		}
		if ch.obj != nil {
			rv, err := resourceVersionOf(ch.obj)
			return rv, true, err
		}
		rec, err := c.changeRecordLocked(key, ch)
		if err != nil {
			return "", false, err
		}
		rv, err := format.ReadResourceVersion(rec)
		return rv, err == nil, err
	}
	var rv string
	found := false
	err := c.viewRecord(key, func(rec []byte) error {
		var err error
		rv, err = format.ReadResourceVersion(rec)
		found = err == nil
		return err
	})
	return rv, found, err
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
		return cp.closedErr()
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

// closedErr returns the error of a use of the checkpoint after its Close,
// or after its collection's or its DB's. Called with c.mu held.
func (cp *Checkpoint) closedErr() error {
	if cp.closed {
		return fmt.Errorf("%w: checkpoint %q of collection %q was closed: open it again with Collection.Checkpoint", ErrClosed, cp.name, cp.c.name)
	}
	return fmt.Errorf("%w: the collection %q of checkpoint %q was closed", ErrClosed, cp.c.name, cp.name)
}

// Acked returns the resourceVersion at which key was last acknowledged.
func (cp *Checkpoint) Acked(key string) (rv string, ok bool) {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	rv, ok = cp.acked[key]
	return rv, ok
}

// Unacknowledged returns every stored object that is not acknowledged at its
// stored resourceVersion, which the consumer still has to process. It also
// returns how many stored objects there are. An acknowledged object is
// neither decoded nor read. Its resourceVersion comes from the versions
// bucket, or from its record's header in a file without one. So a consumer
// that joins a large collection pays for what changed, not for what it has
// seen.
func (cp *Checkpoint) Unacknowledged() (objs []runtime.Object, acknowledged int, err error) {
	c := cp.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cp.closed {
		return nil, 0, cp.closedErr()
	}
	isAcked := func(key, rv string) bool {
		a, ok := cp.acked[key]
		return ok && a == rv
	}
	if c.memory() != nil {
		// Every object is decoded and cached, so read versions from them.
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
	err = c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		var found []keyed
		var records [][]byte
		// note counts key as acknowledged at rv, or keeps its record
		// (read only then) to decode.
		note := func(key, rv string, rec func() []byte) {
			if isAcked(key, rv) {
				acknowledged++
			} else if r := rec(); r != nil {
				found, records = append(found, keyed{key: key}), append(records, r)
			}
		}
		err := c.forEachUnwrittenLocked(func(key string, ch *change) error {
			if ch.obj != nil {
				rv, err := resourceVersionOf(ch.obj)
				if err != nil {
					return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
				}
				if isAcked(key, rv) {
					acknowledged++
				} else {
					objs = append(objs, ch.obj)
				}
				return nil
			}
			rec, err := c.changeRecordTx(b, key, ch)
			if err != nil {
				return err
			}
			rv, err := format.ReadResourceVersion(rec)
			if err != nil {
				return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
			}
			note(key, rv, func() []byte { return rec })
			return nil
		})
		if err != nil {
			return err
		}
		objects := objectsTree(b)
		if vb := versionsTree(b); vb.Exists() {
			// The versions say what is acknowledged. Only the records of
			// the rest are read.
			err = vb.ForEach(func(k, raw []byte) error {
				key := string(k)
				if c.inLayersLocked(key) {
					return nil
				}
				_, rv, err := format.DecodeVersion(raw)
				if err != nil {
					return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
				}
				note(key, rv, func() []byte { return objects.Get(k) })
				return nil
			})
		} else {
			err = objects.ForEach(func(k, rec []byte) error {
				key := string(k)
				if c.inLayersLocked(key) {
					return nil
				}
				rv, err := format.ReadResourceVersion(rec)
				if err != nil {
					return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
				}
				note(key, rv, func() []byte { return rec })
				return nil
			})
		}
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

// Deleted returns the checkpoint's tombstones, mapping key to the deleted
// object's last stored state. There is one for each deletion of an
// acknowledged object that is not acknowledged itself. The objects are
// shared, so treat them as read-only. Where the last state cannot be read
// back, the object is an empty one of its type. It carries only its
// namespace, name and resourceVersion. It is nil if not even its type can
// be read. The deletion is delivered all the same. Deleted returns nil once
// the checkpoint, its collection or its DB is closed.
func (cp *Checkpoint) Deleted() map[string]runtime.Object {
	c := cp.c
	c.mu.RLock()
	defer c.mu.RUnlock()
	if cp.closed || c.released.Load() || c.db.closedFlag.Load() {
		return nil
	}
	out := make(map[string]runtime.Object, len(cp.deleted))
	var onFile []string
	for key, t := range cp.deleted {
		if t.obj != nil {
			out[key] = t.obj
		} else {
			out[key] = nil
			onFile = append(onFile, key)
		}
	}
	if len(onFile) == 0 {
		return out
	}
	// The file's tombstones are read once per join. They are not cached.
	_ = c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return nil
		}
		tb := b.Bucket(format.TombstonesBucket)
		if tb != nil {
			tb = tb.Bucket([]byte(cp.name))
		}
		if tb == nil {
			return nil
		}
		for _, key := range onFile {
			raw := tb.Get([]byte(key))
			if raw == nil {
				continue // not committed yet, and its state unreadable
			}
			t, err := format.DecodeTombstone(raw)
			if err != nil || len(t.Record) == 0 {
				continue
			}
			obj, err := c.db.codec.Decode(t.Record)
			if err != nil {
				obj = c.db.codec.placeholder(key, t.Record)
			}
			out[key] = obj
		}
		return nil
	})
	return out
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
// group commit. Its consumer processes every object again on its next start.
func (cp *Checkpoint) Clear() error {
	return cp.write(func(l *layer) bool {
		clear(cp.acked)
		clear(cp.deleted)
		l.clearAcks(cp.name)
		return true
	})
}

// Close releases the name. Acknowledgements made before it still reach the
// file. Ack, AckDeleted, Clear and Unacknowledged then return ErrClosed,
// and Deleted returns nil. Another consumer may have opened the name since.
// Acked, Len, Tombstones and Overflows answer from what the checkpoint held
// when it closed. Closing stamps the checkpoint as in use until now (see
// Options.CheckpointRetention). A second Close does nothing.
func (cp *Checkpoint) Close() {
	if !cp.c.db.opts.ReadOnly {
		// A quiet spell may have left no commit to renew its stamp.
		_ = cp.write(func(l *layer) bool { return cp.seeLocked(l) })
	}
	cp.c.mu.Lock()
	defer cp.c.mu.Unlock()
	if !cp.closed {
		cp.closed = true
		delete(cp.c.checkpoints, cp.name)
	}
}

// stateBefore returns key's state before the layer after earlier, and
// whether there is one. That is earlier's change to key, else the committed
// state. An
// unreadable state is found, with a nil object and the error. Called with
// c.mu held.
func (c *Collection) stateBefore(earlier *layer, key string) (runtime.Object, bool, error) {
	if earlier != nil {
		if ch := earlier.changes[key]; ch != nil {
			if ch.obj != nil || ch.deleted {
				return ch.obj, !ch.deleted, nil
			}
			// A bounded cache's layer holds the record only.
			obj, err := c.db.codec.Decode(ch.record)
			return obj, true, err
		}
	}
	if ch := c.journalChangeLocked(key); ch != nil {
		if ch.deleted {
			return nil, false, nil
		}
		if ch.obj != nil {
			return ch.obj, true, nil
		}
		rec, err := c.changeRecordLocked(key, ch)
		if err != nil {
			return nil, true, err
		}
		// Not decodeLocked, as below.
		obj, err := c.db.codec.Decode(rec)
		return obj, true, err
	}
	var obj runtime.Object
	found := false
	err := c.viewRecord(key, func(rec []byte) error {
		found = true
		var err error
		// Not decodeLocked. The object is being deleted, and must not
		// enter the cache.
		obj, err = c.db.codec.Decode(rec)
		return err
	})
	return obj, found, err
}

// tombstoneAcksLocked turns key's acknowledgements in the open checkpoints
// into tombstones carrying its last state. The key is being deleted, at
// deletedAt if known. last returns that state and whether the key is
// stored. An unreadable state is stored with a nil object, and the
// deletion is delivered all the same (see Deleted). A checkpoint this
// would take past Options.MaxTombstones is cleared instead, in the pending
// layer. Called with c.mu held for writing.
func (c *Collection) tombstoneAcksLocked(key, deletedAt string, last func() (runtime.Object, bool)) {
	for _, cp := range c.checkpoints {
		if _, ok := cp.acked[key]; !ok {
			continue
		}
		delete(cp.acked, key)
		o, stored := last()
		if !stored {
			continue
		}
		if limit := c.db.opts.MaxTombstones; limit > 0 && len(cp.deleted) >= limit {
			utilruntime.HandleError(fmt.Errorf("boltinformer: checkpoint %q of collection %q holds %d deletions its consumer has not acknowledged (persist.Options.MaxTombstones): it is cleared, and its consumer will process every stored object again on its next start, without being told of those deletions. Acknowledge deletions (AckDeleted, or Ack with what OnDelete was given)", cp.name, c.name, len(cp.deleted)))
			clear(cp.acked)
			clear(cp.deleted)
			c.pending.clearAcks(cp.name)
			cp.overflows++
			continue
		}
		cp.deleted[key] = &tombstone{obj: o, deletedAt: deletedAt}
	}
}

// Overflows returns how many times Options.MaxTombstones cleared the
// checkpoint since it was opened.
func (cp *Checkpoint) Overflows() int {
	cp.c.mu.RLock()
	defer cp.c.mu.RUnlock()
	return cp.overflows
}

// checkpointEntries calls fn for each entry of the named checkpoint's bucket
// below parent (format.CheckpointsBucket or format.TombstonesBucket), if
// there is one.
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

// checkpointTombstones returns the keys of the named checkpoint's committed
// tombstones, for tests (export_checkpoint_test.go).
func (c *Collection) checkpointTombstones(name string) ([]string, error) {
	var keys []string
	err := c.db.view(func(tx *bolt.Tx) error {
		return c.checkpointEntries(tx, format.TombstonesBucket, name, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	return keys, err
}

// Checkpoints returns the names of the collection's stored checkpoints.
func (c *Collection) Checkpoints() ([]string, error) {
	var names []string
	err := c.fileView(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		cb := b.Bucket(format.CheckpointsBucket)
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

// CheckpointAcks returns the named checkpoint's committed acknowledgements,
// mapping key to resourceVersion. It is empty if there is no such
// checkpoint.
func (c *Collection) CheckpointAcks(name string) (map[string]string, error) {
	acked := map[string]string{}
	err := c.fileView(func(tx *bolt.Tx) error {
		return c.checkpointEntries(tx, format.CheckpointsBucket, name, func(k, v []byte) error {
			acked[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %q of collection %q: %w", name, c.name, err)
	}
	return acked, nil
}

// dropCheckpointsTx deletes every checkpoint of the collection, on disk and
// in the open checkpoints. The stored objects they acknowledge were dropped.
func (c *Collection) dropCheckpointsTx(b *bolt.Bucket) error {
	for _, cp := range c.checkpoints {
		clear(cp.acked)
		clear(cp.deleted)
	}
	for _, name := range [][]byte{format.CheckpointsBucket, format.TombstonesBucket, format.CheckpointSeenBucket} {
		if err := b.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}

// writeSeen records when checkpoints were open.
func writeSeen(b *bolt.Bucket, seen map[string]time.Time) error {
	if len(seen) == 0 {
		return nil
	}
	sb, err := b.CreateBucketIfNotExists(format.CheckpointSeenBucket)
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(seen) {
		if err := sb.Put([]byte(name), strconv.AppendInt(nil, seen[name].Unix(), 10)); err != nil {
			return err
		}
	}
	return nil
}

// abandonedCheckpoints returns the stored checkpoints not open for
// Options.CheckpointRetention of the collection's in-use clock. A stored
// checkpoint has acknowledgements, tombstones, or only a stamp, if it never
// acknowledged or was cleared. It also returns those never stamped, which
// were written before stamps were kept. dropAbandonedCheckpointsTx stamps
// them now.
func (c *Collection) abandonedCheckpoints(b *bolt.Bucket) (abandoned, unstamped []string) {
	names := map[string]bool{}
	for _, parent := range [][]byte{format.CheckpointsBucket, format.TombstonesBucket} {
		if pb := b.Bucket(parent); pb != nil {
			_ = pb.ForEachBucket(func(name []byte) error {
				names[string(name)] = true
				return nil
			})
		}
	}
	sb := b.Bucket(format.CheckpointSeenBucket)
	if sb != nil {
		_ = sb.ForEach(func(name, _ []byte) error {
			names[string(name)] = true
			return nil
		})
	}
	if len(names) == 0 {
		return nil, nil
	}
	retention := c.db.opts.CheckpointRetention
	now := c.inUseNow()
	for _, name := range sortedKeys(names) {
		var raw []byte
		if sb != nil {
			raw = sb.Get([]byte(name))
		}
		secs, err := strconv.ParseInt(string(raw), 10, 64)
		switch {
		case raw == nil || err != nil:
			unstamped = append(unstamped, name)
		case retention > 0 && now.Sub(time.Unix(secs, 0)) > retention:
			abandoned = append(abandoned, name)
		}
	}
	return abandoned, unstamped
}

// dropAbandonedCheckpointsTx deletes the checkpoints abandonedCheckpoints
// finds abandoned and stamps the unstamped ones as seen now. It returns the
// names dropped.
func (c *Collection) dropAbandonedCheckpointsTx(b *bolt.Bucket) ([]string, error) {
	abandoned, unstamped := c.abandonedCheckpoints(b)
	for _, name := range abandoned {
		for _, parent := range [][]byte{format.CheckpointsBucket, format.TombstonesBucket} {
			if pb := b.Bucket(parent); pb != nil {
				if err := pb.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
					return nil, err
				}
			}
		}
		if sb := b.Bucket(format.CheckpointSeenBucket); sb != nil {
			if err := sb.Delete([]byte(name)); err != nil {
				return nil, err
			}
		}
	}
	stamps := map[string]time.Time{}
	for _, name := range unstamped {
		stamps[name] = c.inUseNow()
	}
	return abandoned, writeSeen(b, stamps)
}

// sortedKeys returns m's keys in order (bbolt writes sorted keys fastest).
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
