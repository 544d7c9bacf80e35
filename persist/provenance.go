package persist

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// A collection's provenance is a set of name/value pairs its owner records
// with it. The pairs say where the objects came from, and in which shape.
// The owner compares them on every open. So stored objects, index entries
// and resourceVersion are only ever handed out under the provenance they
// were written under. This package gives the pairs no meaning (see
// CollectionOptions.Provenance).

var keyProvenance = []byte("provenance")

// ProvenanceMismatch says why a collection was reset. Its recorded
// provenance differs from the one its owner gave.
type ProvenanceMismatch struct {
	// Keys are the names whose values differ (or are present on one side
	// only), sorted.
	Keys []string
	// Stored is the provenance the collection had recorded. It is empty for
	// a collection written before provenance was recorded.
	Stored map[string]string
	// Want is the provenance given now, recorded instead.
	Want map[string]string
}

func (m *ProvenanceMismatch) Error() string {
	parts := make([]string, 0, len(m.Keys))
	for _, k := range m.Keys {
		parts = append(parts, fmt.Sprintf("%s: stored %q, now %q", k, m.Stored[k], m.Want[k]))
	}
	return "provenance differs (" + strings.Join(parts, "; ") + ")"
}

// diffProvenance returns the mismatch between stored and want, or nil.
func diffProvenance(stored, want map[string]string) *ProvenanceMismatch {
	var keys []string
	for k, v := range want {
		if sv, ok := stored[k]; !ok || sv != v {
			keys = append(keys, k)
		}
	}
	for k := range stored {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	return &ProvenanceMismatch{Keys: keys, Stored: maps.Clone(stored), Want: maps.Clone(want)}
}

func diffKeys(stored, want map[string]string) []string {
	if m := diffProvenance(stored, want); m != nil {
		return m.Keys
	}
	return nil
}

// loadProvenance reads the recorded provenance from meta.
func loadProvenance(meta *bolt.Bucket) (map[string]string, error) {
	out := map[string]string{}
	if raw := meta.Get(keyProvenance); raw != nil {
		if err := msgpack.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("%w: provenance: %v", ErrCorruptRecord, err)
		}
	}
	return out, nil
}

func writeProvenance(meta *bolt.Bucket, p map[string]string) error {
	raw, err := msgpack.Marshal(p)
	if err != nil {
		return err
	}
	return meta.Put(keyProvenance, raw)
}

// hasContentTx reports whether the collection holds a resourceVersion or
// any object on disk.
func (c *Collection) hasContentTx(b *bolt.Bucket) bool {
	if len(b.Bucket(format.CollMetaBucket).Get(format.RVKey)) > 0 {
		return true
	}
	return holdsObjects(b) || b.Bucket(format.JournalBucket) != nil
}

// checkProvenanceTx compares want with the recorded provenance and, on a
// mismatch, empties the collection on disk (objects, index entries,
// resourceVersion) before recording want. It reports the mismatch only if
// something was dropped. The caller resets the in-memory state.
func (c *Collection) checkProvenanceTx(tx *bolt.Tx, want map[string]string, force bool) (*ProvenanceMismatch, error) {
	b := c.bucket(tx)
	meta := b.Bucket(format.CollMetaBucket)
	mismatch := diffProvenance(c.provenance, want)
	if mismatch == nil {
		if !force {
			return nil, nil
		}
		mismatch = &ProvenanceMismatch{Stored: maps.Clone(c.provenance), Want: maps.Clone(want)}
	}
	// The checkpoints acknowledge states of the objects dropped below, or
	// of objects stored under another provenance.
	if err := c.dropCheckpointsTx(b); err != nil {
		return nil, err
	}
	dropped := c.hasContentTx(b)
	if dropped {
		if err := c.emptyTx(b); err != nil {
			return nil, err
		}
	}
	// Nothing is left to be incomplete, and the caller drops what was not
	// on disk. An empty collection without a resourceVersion is listed
	// anyway.
	if err := writeMustList(meta, false); err != nil {
		return nil, err
	}
	c.mustList = false
	if err := writeProvenance(meta, want); err != nil {
		return nil, err
	}
	c.provenance = maps.Clone(want)
	if !dropped {
		return nil, nil
	}
	return mismatch, nil
}

// emptyTx drops every object, every index entry (the indexes stay defined,
// empty) and the resourceVersion.
func (c *Collection) emptyTx(b *bolt.Bucket) error {
	if err := b.DeleteBucket(format.ObjectsBucket); err != nil {
		return err
	}
	if err := deleteRebuildTx(b); err != nil {
		return err
	}
	if b.Bucket(format.JournalBucket) != nil {
		if err := b.DeleteBucket(format.JournalBucket); err != nil {
			return err
		}
	}
	if err := writeJournalRecord(b, &journalState{}); err != nil {
		return err
	}
	if err := writeTreeBytes(b, 0); err != nil {
		return err
	}

	if _, err := b.CreateBucket(format.ObjectsBucket); err != nil {
		return err
	}
	if err := b.DeleteBucket(format.VersionsBucket); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	if _, err := b.CreateBucket(format.VersionsBucket); err != nil {
		return err
	}
	if err := b.Bucket(format.CollMetaBucket).Delete(format.RVKey); err != nil {
		return err
	}
	c.rv = ""
	// Dormant indexes index the dropped objects.
	c.dormant = nil
	if err := c.dropUnusedIndexes(b); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(c.indexes))
	if len(names) == 0 {
		return nil
	}
	// There are no objects, so the index function is never called.
	none := func(string, runtime.Object) ([]string, error) {
		return nil, errors.New("no objects to index")
	}
	return c.buildIndexes(b.Tx(), &journalState{}, names, maps.Clone(c.indexes), none, false)
}

// Provenance returns the provenance the collection records.
func (c *Collection) Provenance() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.provenance)
}

// ResetAtOpen reports why DB.Collection emptied the collection (its recorded
// provenance differed from CollectionOptions.Provenance), or nil if it did
// not.
func (c *Collection) ResetAtOpen() *ProvenanceMismatch { return c.resetAtOpen }

// CheckProvenance compares want with the recorded provenance. If they
// differ, it drops every object, index entry and the resourceVersion of the
// collection, on disk and not yet committed. It then records want and
// returns the mismatch. The collection is then empty, as if new. A
// collection that held nothing records want and returns nil. An error
// leaves the collection as it was.
//
// The caller must not Apply concurrently. A change applied during the reset
// would be dropped with the rest.
func (c *Collection) CheckProvenance(ctx context.Context, want map[string]string) (*ProvenanceMismatch, error) {
	return c.reset(ctx, want, false, false)
}

// Reset empties the collection as CheckProvenance does on a mismatch, and
// records provenance. It serves an owner that finds the stored state
// unusable, for example because it cannot be read back. The same caveat on concurrent Apply holds.
func (c *Collection) Reset(ctx context.Context, provenance map[string]string) error {
	_, err := c.reset(ctx, provenance, true, false)
	return err
}

// reset empties the collection if want differs from the recorded
// provenance, or always if force. With mustList, it also sets the must-list
// mark in the same transaction.
func (c *Collection) reset(ctx context.Context, want map[string]string, force, mustList bool) (*ProvenanceMismatch, error) {
	if c.db.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if want == nil {
		want = map[string]string{}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// commitMu keeps a commit from writing this collection's layers while
	// they are dropped. mu keeps Applies and reads out.
	c.db.commitMu.Lock()
	defer c.db.commitMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.closedErr(); err != nil {
		// Another instance may own the collection's buckets now.
		return nil, err
	}
	if !force && diffProvenance(c.provenance, want) == nil {
		return nil, nil
	}
	before, rv, marked := c.provenance, c.rv, c.mustList
	var mismatch *ProvenanceMismatch
	err := c.db.bolt.Update(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		var err error
		if mismatch, err = c.checkProvenanceTx(tx, want, force); err != nil || !mustList {
			return err
		}
		c.mustList = true
		return writeMustList(b.Bucket(format.CollMetaBucket), true)
	})
	if err = c.db.closedErr(err); err != nil {
		c.provenance, c.rv, c.mustList = before, rv, marked
		return nil, fmt.Errorf("resetting collection %q in %s: %w", c.name, c.db.path, err)
	}
	unwritten := !c.pending.empty() || c.committing != nil || c.hasJournal()
	if mismatch == nil && !unwritten && !force {
		return nil, nil // nothing stored: only the provenance was recorded
	}
	c.pending, c.committing = newLayer(), nil
	c.dropJournalLayers(0) // emptied, or empty already
	c.cache.clear()
	c.mem.Store(nil)
	// An unbounded cache over what is now empty is complete: Apply keeps
	// its view current from here, as after completeIfEmpty at open. Without
	// it the view is built at the first read, which a closed collection
	// refuses. A failure publishes nothing, and the next read builds it.
	_ = c.completeIfEmptyLocked()
	c.rv = ""
	if mismatch == nil {
		// Nothing was on disk, but applied changes were dropped.
		mismatch = &ProvenanceMismatch{Keys: diffKeys(before, want), Stored: maps.Clone(before), Want: maps.Clone(want)}
	}
	return mismatch, nil
}
