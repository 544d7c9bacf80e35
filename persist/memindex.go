package persist

import (
	"fmt"
	"slices"
	"sort"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// memIndex is every secondary index of a collection held in memory. A
// collection has one exactly while its cache is unbounded and complete,
// holding every object. Reads are then served from memory alone, as
// client-go's threadSafeMap serves them, and never touch the file.
//
// Invariants, for a collection c with c.mem set:
//   - c.cache holds exactly the collection's objects, at their newest state
//     with layers and file merged.
//   - byValue and values hold exactly the index values of those objects.
//   - Both change only under c.mu held for writing (Apply, AddIndexes).
//     They are read under c.mu held for reading.
type memIndex struct {
	// names are the collection's index names, sorted. values' slices follow
	// their order.
	names []string
	// byValue maps index name to value to keys.
	byValue map[string]map[string]map[string]struct{}
	// values maps key to its values of each index, in names' order, as
	// given to Apply in Op.Indexes. The value slices are retained rather
	// than copied. So a change can unindex the old values without decoding
	// or re-running an index function. One slice per key, not a map, because
	// a map per key cost more than the object's own index entries.
	values map[string][][]string
}

func newMemIndex(indexes map[string]string) *memIndex {
	m := &memIndex{
		byValue: make(map[string]map[string]map[string]struct{}, len(indexes)),
		values:  map[string][][]string{},
	}
	for name := range indexes {
		m.names = append(m.names, name)
		m.byValue[name] = map[string]map[string]struct{}{}
	}
	sort.Strings(m.names)
	return m
}

// set replaces key's index values. Nil means the key is gone. Values that
// did not change stay where they are. Most updates change no index value,
// and moving the key out of and back into the same sets is most of the
// cost. Indexes not among m.names are ignored, as on disk.
func (m *memIndex) set(key string, indexes map[string][]string) {
	old := m.values[key]
	var now [][]string
	for _, name := range m.names {
		if len(indexes[name]) > 0 {
			now = make([][]string, len(m.names))
			break
		}
	}
	for i, name := range m.names {
		var was []string
		if old != nil {
			was = old[i]
		}
		values := indexes[name]
		if now != nil {
			now[i] = values
		}
		if slices.Equal(was, values) {
			continue // indexed under these values already
		}
		byValue := m.byValue[name]
		for _, v := range was {
			if keys := byValue[v]; keys != nil {
				delete(keys, key)
				if len(keys) == 0 {
					delete(byValue, v)
				}
			}
		}
		for _, v := range values {
			keys := byValue[v]
			if keys == nil {
				keys = map[string]struct{}{}
				byValue[v] = keys
			}
			keys[key] = struct{}{}
		}
	}
	if now == nil {
		delete(m.values, key)
		return
	}
	m.values[key] = now
}

// memory returns the in-memory view, or nil while reads must consult the
// file (bounded cache, or not every object decoded yet).
func (c *Collection) memory() *memIndex { return c.mem.Load() }

// memoryLocked returns the in-memory view. It first builds the view if the
// cache is unbounded and the view is not built yet. The first read that can
// be served from memory pays for that, once. It decodes what is missing and
// loads the indexes. A warm start's delivery, or decodeAhead before the
// caller took the lock, has usually decoded everything already. Later
// reads never touch the file. Building the view here, rather than at the
// end of the warm start, keeps it off the path to HasSynced. A failure
// leaves the caller on the file, which reports the error. It is called with
// mu held for reading.
func (c *Collection) memoryLocked() *memIndex {
	if m := c.memory(); m != nil || c.cache.bounded() {
		return m
	}
	if c.completeLocked() != nil {
		return nil
	}
	return c.memory()
}

// decodeAhead decodes the objects an unbounded cache does not hold yet, a
// stretch at a time. completeLocked runs under mu held for reading without
// a break. Thanks to decodeAhead, it finds the objects cached and has only
// the index entries left to load. decodeAhead holds mu for reading only for
// a few records at a time (readChunk). So a write, such as a watch event or
// an acknowledgement, waits for those records, not for the whole
// collection. So do readers that queue behind that write, a warm start's
// delivery among them. The stretches go from the last key backwards. The
// delivery walks forwards, and the two meet in the middle. The reads that
// use memoryLocked call it, with mu not held. Errors are left to them, and
// they read again and report.
func (c *Collection) decodeAhead() {
	if c.cache.bounded() || c.memory() != nil {
		return
	}
	c.aheadMu.Lock()
	defer c.aheadMu.Unlock()
	if c.memory() != nil {
		return
	}
	var keys []string
	c.mu.RLock()
	err := c.walkFileLocked(func(key string, _ []byte) error {
		if !c.cache.has(key) {
			keys = append(keys, key)
		}
		return nil
	})
	c.mu.RUnlock()
	if err != nil {
		return
	}
	for end := len(keys); end > 0; end -= decodeStretch {
		_, err := c.readChunk(keys[max(0, end-decodeStretch):end])
		if err != nil || c.memory() != nil {
			return
		}
	}
}

// decodeStretch is how many records decodeAhead decodes between checks that
// the cache has become complete.
const decodeStretch = 1024

// completeLocked makes an unbounded cache complete. It decodes every object
// not cached yet, on every core. It loads every index from the file into a
// memIndex, then publishes it. It is called with mu held for reading, so no
// Apply runs meanwhile. Concurrent callers build identical views, and the
// first publishes. A no-op for a bounded cache or one already complete.
func (c *Collection) completeLocked() error {
	if c.cache.bounded() || c.memory() != nil {
		return nil
	}
	c.memMu.Lock()
	defer c.memMu.Unlock()
	if c.memory() != nil {
		return nil
	}
	var found []keyed
	var records [][]byte
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		err := objectsTree(b).ForEach(func(k, rec []byte) error {
			key := string(k)
			if !c.cache.has(key) && !c.inLayersLocked(key) {
				found = append(found, keyed{key: key})
				records = append(records, rec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Go from the last key backwards. A warm start's delivery walks
		// forwards, decoding as it goes. So the two meet in the middle
		// rather than race over the same records. decodeAllLocked skips
		// what the other has cached.
		slices.Reverse(found)
		slices.Reverse(records)
		// And the journal's objects not decoded yet.
		err = c.forEachUnwrittenLocked(func(key string, ch *change) error {
			if ch.obj == nil && !c.cache.has(key) {
				rec, err := c.changeRecordTx(b, key, ch)
				if err != nil {
					return err
				}
				found = append(found, keyed{key: key})
				records = append(records, rec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Records are bbolt memory, so decode within the transaction.
		return c.decodeAllLocked(found, records)
	})
	if err != nil {
		return err
	}
	m, err := c.loadMemIndexLocked()
	if err != nil {
		return err
	}
	c.mem.Store(m)
	return nil
}

// loadMemIndexLocked reads every index from the file and overlays the
// layers. Called with mu held (for reading or writing).
func (c *Collection) loadMemIndexLocked() (*memIndex, error) {
	m := newMemIndex(c.indexes)
	err := c.view(func(tx *bolt.Tx) error {
		for i, name := range m.names {
			si, err := c.storedIndex(tx, name)
			if err != nil {
				return err
			}
			add := func(key, value string) {
				if c.inLayersLocked(key) {
					return // overridden by an unwritten change
				}
				vals := m.values[key]
				if vals == nil {
					vals = make([][]string, len(m.names))
					m.values[key] = vals
				}
				vals[i] = append(vals[i], value)
				keys := m.byValue[name][value]
				if keys == nil {
					keys = map[string]struct{}{}
					m.byValue[name][value] = keys
				}
				keys[key] = struct{}{}
			}
			if si.owed {
				err = forEachIndexValues(si.byKey, func(key string, values []string) error {
					for _, v := range values {
						add(key, v)
					}
					return nil
				})
			} else {
				err = si.byValue.ForEach(func(k, v []byte) error {
					value, key, _, err := format.DecodeIndexEntry(k, v)
					if err == nil {
						add(key, value)
					}
					return err
				})
			}
			if err != nil {
				return fmt.Errorf("index %q: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	layers := c.overlaysLocked()
	for i := len(layers) - 1; i >= 0; i-- { // older first: newer override
		l := layers[i]
		if l == nil {
			continue
		}
		for key, ch := range l.changes {
			if ch.deleted {
				m.set(key, nil)
			} else {
				m.set(key, ch.indexes)
			}
		}
	}
	return m, nil
}

// completeIfEmpty publishes an empty in-memory view for an unbounded cache
// over an empty collection. Every object it will hold then arrives through
// Apply, which keeps the view current. Called once the collection is open.
func (c *Collection) completeIfEmpty() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.completeIfEmptyLocked()
}

// completeIfEmptyLocked is completeIfEmpty with mu held.
func (c *Collection) completeIfEmptyLocked() error {
	if c.cache.bounded() {
		return nil
	}
	empty := false
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		empty = !holdsObjects(b)
		return nil
	})
	if err != nil || !empty {
		return err
	}
	return c.completeLocked()
}

// memList returns every object from memory. Called with mu held for
// reading and m == c.memory().
func (c *Collection) memList() []runtime.Object {
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	out := make([]runtime.Object, 0, len(c.cache.entries))
	for _, e := range c.cache.entries {
		out = append(out, e.obj)
	}
	return out
}

// memKeys returns every key from memory. Called with mu held for reading.
func (c *Collection) memKeys() []string {
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	out := make([]string, 0, len(c.cache.entries))
	for key := range c.cache.entries {
		out = append(out, key)
	}
	return out
}

// appendMemByIndex appends the objects under one index value, from memory,
// to dst. ByIndex and AppendByIndex differ only in dst's element type.
// Called with c.mu held for reading.
func appendMemByIndex[T any](c *Collection, m *memIndex, dst []T, index, value string) ([]T, error) {
	if _, ok := c.indexes[index]; !ok {
		return dst, noIndexError(index)
	}
	keys := m.byValue[index][value]
	dst = slices.Grow(dst, len(keys))
	c.cache.mu.RLock()
	defer c.cache.mu.RUnlock()
	for key := range keys {
		if e, ok := c.cache.entries[key]; ok {
			dst = append(dst, any(e.obj).(T))
		}
	}
	return dst, nil
}

// memIndexKeys returns, sorted, the keys under one index value from memory.
// Called with mu held for reading.
func (c *Collection) memIndexKeys(m *memIndex, index, value string) ([]string, error) {
	if _, ok := c.indexes[index]; !ok {
		return nil, noIndexError(index)
	}
	keys := m.byValue[index][value]
	out := make([]string, 0, len(keys))
	for key := range keys {
		out = append(out, key)
	}
	sort.Strings(out)
	return out, nil
}

// memIndexValues returns, sorted, the values of one index from memory.
// Called with mu held for reading.
func (c *Collection) memIndexValues(m *memIndex, index string) ([]string, error) {
	if _, ok := c.indexes[index]; !ok {
		return nil, noIndexError(index)
	}
	out := make([]string, 0, len(m.byValue[index]))
	for v := range m.byValue[index] {
		out = append(out, v)
	}
	sort.Strings(out)
	return out, nil
}

// AppendList appends every object to dst and returns it. It is List for
// callers that hold objects as interface{} values, as client-go's stores
// do. Served from memory, it allocates only what dst needs. A List plus a
// conversion would allocate twice. On a large heap, every allocation brings
// the next garbage collection closer.
func (c *Collection) AppendList(dst []interface{}) ([]interface{}, error) {
	c.decodeAhead()
	c.mu.RLock()
	if c.memoryLocked() != nil {
		c.cache.mu.RLock()
		dst = slices.Grow(dst, len(c.cache.entries))
		for _, e := range c.cache.entries {
			dst = append(dst, e.obj)
		}
		c.cache.mu.RUnlock()
		c.mu.RUnlock()
		return dst, nil
	}
	c.mu.RUnlock()
	objs, err := c.List()
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(objs))
	for _, o := range objs {
		dst = append(dst, o)
	}
	return dst, nil
}

// AppendByIndex is ByIndex appending to dst (see AppendList).
func (c *Collection) AppendByIndex(dst []interface{}, index, value string) ([]interface{}, error) {
	c.decodeAhead()
	c.mu.RLock()
	if m := c.memoryLocked(); m != nil {
		defer c.mu.RUnlock()
		return appendMemByIndex(c, m, dst, index, value)
	}
	c.mu.RUnlock()
	objs, err := c.ByIndex(index, value)
	if err != nil {
		return dst, err
	}
	dst = slices.Grow(dst, len(objs))
	for _, o := range objs {
		dst = append(dst, o)
	}
	return dst, nil
}
