package persist

import (
	"bytes"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/format"
)

// This file holds the collection's reads. Each merges, newest first, the
// five states of commit.go's table (overlaysLocked, then the trees). The
// table's invariants say why that order always finds the newest state.

// view runs fn in a read transaction of the file, for a read that merges
// the file with the layers. It fails once Close has released the
// collection. Another instance may have opened it since and folded its
// journal into the trees. This instance's layers then no longer say what
// the trees lack, so the merge could return states that never were. It is
// called with mu held, and Close releases under mu.
func (c *Collection) view(fn func(*bolt.Tx) error) error {
	return c.fileView(fn)
}

// fileView runs fn in a read transaction of the file, for a read of the
// file alone, which may hold no lock of ours. It fails once Close has
// released the collection, because the file may be another instance's
// since.
func (c *Collection) fileView(fn func(*bolt.Tx) error) error {
	if err := c.releasedErr(); err != nil {
		return err
	}
	return c.db.view(fn)
}

// objectsTree returns the collection b's object tree as reads see it: with
// the part a fold in progress copied (format.Tree).
func objectsTree(b *bolt.Bucket) format.Tree { return format.CollectionTree(b, format.ObjectsBucket) }

// holdsObjects reports whether the collection b's object tree, a fold's
// copy included, holds any record.
func holdsObjects(b *bolt.Bucket) bool {
	k, _ := objectsTree(b).Cursor().First()
	return k != nil
}

// versionsTree returns the collection b's versions as reads see them. It
// does not exist in a file schema 2 wrote, opened read-only.
func versionsTree(b *bolt.Bucket) format.Tree {
	return format.CollectionTree(b, format.VersionsBucket)
}

// releasedErr returns the error of a read after Close, or nil.
func (c *Collection) releasedErr() error {
	if c.released.Load() {
		return fmt.Errorf("%w: collection %q was closed; reads of a closed collection are refused (objects it holds in memory are still served): open it again with DB.Collection", ErrClosed, c.name)
	}
	return nil
}

// Get returns the object stored under key.
func (c *Collection) Get(key string) (runtime.Object, bool, error) {
	if obj, ok := c.cache.get(key); ok {
		return obj, true, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.getLocked(key)
}

// getLocked is Get with mu held (for reading or writing).
func (c *Collection) getLocked(key string) (runtime.Object, bool, error) {
	if obj, ok := c.cache.get(key); ok {
		return obj, true, nil
	}
	if c.memory() != nil {
		// The cache holds every object, so a miss is an absent key.
		if obj, ok := c.cache.get(key); ok { // applied since the first look
			return obj, true, nil
		}
		return nil, false, nil
	}
	if ch := c.layerChangeLocked(key); ch != nil {
		if ch.deleted {
			return nil, false, nil
		}
		obj, err := c.changeObjectLocked(key, ch)
		return obj, err == nil, err
	}
	var obj runtime.Object
	err := c.viewRecord(key, func(rec []byte) error {
		var err error
		obj, err = c.decodeLocked(key, rec)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return obj, obj != nil, nil
}

// viewRecord calls fn with key's committed record, in a read transaction,
// if the file holds one. The record is valid only during fn.
func (c *Collection) viewRecord(key string, fn func(rec []byte) error) error {
	return c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		if rec := objectsTree(b).Get([]byte(key)); rec != nil {
			return fn(rec)
		}
		return nil
	})
}

// layerChangeLocked returns the newest change to key not in the trees, or
// nil.
func (c *Collection) layerChangeLocked(key string) *change {
	if ch := c.pending.changes[key]; ch != nil {
		return ch
	}
	if c.committing != nil {
		if ch := c.committing.changes[key]; ch != nil {
			return ch
		}
	}
	return c.journalChangeLocked(key)
}

// overlaysLocked returns the layers over the trees, newest first. Absent
// ones are nil.
func (c *Collection) overlaysLocked() [4]*layer {
	return [4]*layer{c.pending, c.committing, c.journaled, c.folding}
}

// shadowed reports whether a layer newer than layers[i] changes key.
func shadowed(layers [4]*layer, i int, key string) bool {
	for _, l := range layers[:i] {
		if l != nil && l.changes[key] != nil {
			return true
		}
	}
	return false
}

// changeObjectLocked returns the object of a change that is not a deletion.
// A change in the journal may hold only where its record is. The record is
// then read, decoded and cached.
func (c *Collection) changeObjectLocked(key string, ch *change) (runtime.Object, error) {
	if ch.obj != nil {
		return ch.obj, nil
	}
	if obj, ok := c.cache.peek(key); ok {
		return obj, nil
	}
	rec, err := c.changeRecordLocked(key, ch)
	if err != nil {
		return nil, err
	}
	return c.decodeLocked(key, rec)
}

// inLayersLocked reports whether key has a change not in the trees, which
// then overrides them.
func (c *Collection) inLayersLocked(key string) bool {
	return c.layerChangeLocked(key) != nil
}

// decodeLocked decodes a record read from the file and caches the object,
// or returns the object another reader cached meanwhile. Callers hold mu for
// reading, so no Apply can make the result stale before it is cached, and
// an object already cached is this record's (Apply caches what it writes).
func (c *Collection) decodeLocked(key string, rec []byte) (runtime.Object, error) {
	obj, err := c.db.codec.Decode(rec)
	if err != nil {
		return nil, fmt.Errorf("collection %q key %q: %w", c.name, key, err)
	}
	return c.cache.add(key, obj, len(rec)), nil
}

// decodeAllLocked decodes records[i] into found[i].obj, on every core when
// there are enough of them. Decoding is what a warm start and a cold List
// spend their time on. Another reader may have decoded and cached a record
// meanwhile, as when a warm start's delivery and a first List run at once.
// Such a record is not decoded again. The records are bbolt memory, valid for the calling
// transaction, which outlives this call; bbolt is not touched here.
func (c *Collection) decodeAllLocked(found []keyed, records [][]byte) error {
	workers := min(goruntime.GOMAXPROCS(0), len(found)/parallelDecodeMin)
	if workers <= 1 {
		for i := range found {
			obj, err := c.decodeCachedLocked(found[i].key, records[i])
			if err != nil {
				return err
			}
			found[i].obj = obj
		}
		return nil
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(found); i += workers {
				obj, err := c.decodeCachedLocked(found[i].key, records[i])
				if err != nil {
					errs[w] = err
					return
				}
				found[i].obj = obj
			}
		}(w)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// decodeCachedLocked is decodeLocked unless key is cached already. Called
// with mu held for reading, so a cached object is the record's.
func (c *Collection) decodeCachedLocked(key string, rec []byte) (runtime.Object, error) {
	if obj, ok := c.cache.peek(key); ok {
		return obj, nil
	}
	return c.decodeLocked(key, rec)
}

// parallelDecodeMin is how many records each decoding goroutine must have
// for the fan-out to pay for itself.
const parallelDecodeMin = 32

// ForEach calls fn for every object, in key order, until fn returns an
// error, which ForEach returns. It holds no lock while fn runs, so fn may
// use the collection. The walk is then not a snapshot. A key changed or
// deleted during it may be seen in its old or its new state. A key deleted
// before the walk reaches its chunk is skipped.
//
// A goroutine decodes the next chunks on every core while fn runs on the
// current one. With a bounded cache, memory stays bounded by the
// read-ahead. The walk holds the collection's read lock for a few records
// at a time (readChunk). So a write waits for a few decodes rather than a
// chunk's.
func (c *Collection) ForEach(fn func(key string, obj runtime.Object) error) error {
	keys, err := c.walkKeys()
	if err != nil {
		return err
	}
	type chunk struct {
		objs []keyed
		err  error
	}
	const chunkKeys, readAhead = 256, 2
	chunks := make(chan chunk, readAhead)
	stop := make(chan struct{})
	go func() {
		defer close(chunks)
		for start := 0; start < len(keys); start += chunkKeys {
			objs, err := c.readChunk(keys[start:min(start+chunkKeys, len(keys))])
			select {
			case chunks <- chunk{objs, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		close(stop)
		for range chunks { // wait for the decoder to end
		}
	}()
	for ch := range chunks {
		if ch.err != nil {
			return ch.err
		}
		for _, o := range ch.objs {
			if err := fn(o.key, o.obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkKeys returns every key, sorted, for ForEach. Keys would first decode
// every object an unbounded cache lacks. The walk should decode them
// instead, a chunk at a time. The file's keys are read outside the
// collection's lock. They come from a read transaction begun under the
// lock, together with a copy of the layers' keys. The layers and that
// transaction are then one state, because a commit drops its layer only
// under the lock, after the file has it. Reading 100,000 keys from the file
// touches every leaf page. That takes tenths of a second on a warm start's
// first pass over the mapped file. Under the lock, watch events,
// acknowledgements and the reads queued behind them would wait that long.
func (c *Collection) walkKeys() ([]string, error) {
	var keys []string
	c.mu.RLock()
	if c.memory() != nil {
		err := c.forEachLocked(false, func(key string, _ runtime.Object) error {
			keys = append(keys, key)
			return nil
		})
		c.mu.RUnlock()
		sort.Strings(keys)
		return keys, err
	}
	layered := map[string]struct{}{} // keys whose newest state is in a layer
	for _, l := range c.overlaysLocked() {
		if l == nil {
			continue
		}
		for key := range l.changes {
			layered[key] = struct{}{}
		}
	}
	err := c.forEachUnwrittenLocked(func(key string, _ *change) error {
		keys = append(keys, key)
		return nil
	})
	var tx *bolt.Tx
	if err == nil {
		if err = c.releasedErr(); err == nil {
			tx, err = c.db.bolt.Begin(false)
			err = c.db.closedErr(err)
		}
	}
	c.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	b := c.bucket(tx)
	if b == nil {
		return nil, ErrNoCollection
	}
	cur := objectsTree(b).Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		if _, ok := layered[string(k)]; !ok {
			keys = append(keys, string(k))
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// readChunk returns the newest state of keys, in their order, decoded on
// every core. Absent keys are left out. Each goroutine takes the read lock
// for lockedKeys keys at a time. A warm start's walk decodes the whole
// collection while watch events are applied, acknowledgements written and
// commits swap layers. Each of those needs the lock for writing. While one
// waits, Go's RWMutex holds back new readers too, such as a lister's Get. A
// long hold would stall them all for as long as a chunk takes to decode.
func (c *Collection) readChunk(keys []string) ([]keyed, error) {
	parts := (len(keys) + lockedKeys - 1) / lockedKeys
	results := make([][]keyed, parts)
	errs := make([]error, parts)
	read := func(i int) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		results[i], errs[i] = c.getManyLocked(keys[i*lockedKeys:min((i+1)*lockedKeys, len(keys))], true)
	}
	workers := min(goruntime.GOMAXPROCS(0), parts)
	if workers <= 1 {
		for i := range parts {
			if read(i); errs[i] != nil {
				return nil, errs[i]
			}
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < parts; i = int(next.Add(1) - 1) {
					if read(i); errs[i] != nil {
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return slices.Concat(results...), nil
}

// lockedKeys is how many keys readChunk reads and decodes per hold of the
// read lock. That is about half a millisecond of decoding for 6 KB Pods. It
// is few enough that getManyLocked decodes them on one goroutine. readChunk
// runs the holds in parallel instead.
const lockedKeys = 16

// forEachLocked walks the newest state of every key. With decode false, it
// passes nil objects for keys on disk that are not cached. fn runs under the
// collection's and possibly the cache's read locks. It must not call back
// into either, because a nested read lock deadlocks against a waiting
// writer.
func (c *Collection) forEachLocked(decode bool, fn func(key string, obj runtime.Object) error) error {
	if c.memory() != nil {
		return c.cache.forEach(fn)
	}
	err := c.forEachUnwrittenLocked(func(key string, ch *change) error {
		obj := ch.obj
		if obj == nil && decode {
			var err error
			if obj, err = c.changeObjectLocked(key, ch); err != nil {
				return err
			}
		}
		return fn(key, obj)
	})
	if err != nil {
		return err
	}
	err = c.walkFileLocked(func(key string, rec []byte) error {
		obj, ok := c.cache.get(key)
		if !ok && decode {
			var err error
			if obj, err = c.decodeLocked(key, rec); err != nil {
				return err
			}
		}
		return fn(key, obj)
	})
	if err == nil && decode && !c.cache.bounded() {
		// Every object on disk and in the layers is now cached, and Apply
		// keeps an unbounded cache current. So load the indexes too, and
		// later reads skip the file.
		err = c.completeLocked()
	}
	return err
}

// forEachUnwrittenLocked calls fn with the newest change not in the trees
// of each key whose newest state is an object (not a deletion). ch.obj is
// nil for a change read back from the journal and not decoded yet.
func (c *Collection) forEachUnwrittenLocked(fn func(key string, ch *change) error) error {
	layers := c.overlaysLocked()
	for i, l := range layers {
		if l == nil {
			continue
		}
		for key, ch := range l.changes {
			if ch.deleted || shadowed(layers, i, key) {
				continue
			}
			if err := fn(key, ch); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkFileLocked calls fn, in key order, for every record in the file whose
// key has no unwritten change in the layers (those override the file).
// rec is bbolt memory, valid only during fn.
func (c *Collection) walkFileLocked(fn func(key string, rec []byte) error) error {
	return c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		return objectsTree(b).ForEach(func(k, rec []byte) error {
			key := string(k)
			if c.inLayersLocked(key) {
				return nil
			}
			return fn(key, rec)
		})
	})
}

// List returns every object.
func (c *Collection) List() ([]runtime.Object, error) {
	c.decodeAhead()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.memoryLocked() != nil {
		return c.memList(), nil
	}
	var out []runtime.Object
	err := c.forEachLocked(true, func(_ string, obj runtime.Object) error {
		out = append(out, obj)
		return nil
	})
	return out, err
}

// Keys returns every key.
func (c *Collection) Keys() ([]string, error) {
	c.decodeAhead()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.memoryLocked() != nil {
		return c.memKeys(), nil
	}
	var out []string
	err := c.forEachLocked(false, func(key string, _ runtime.Object) error {
		out = append(out, key)
		return nil
	})
	return out, err
}

// Len returns the number of objects.
func (c *Collection) Len() (int, error) {
	n := 0
	c.mu.RLock()
	defer c.mu.RUnlock()
	// Counting needs no object. A metrics scrape must not make an
	// unbounded cache decode what it lacks.
	if c.memory() != nil {
		return c.cache.len(), nil
	}
	// The versions bucket has a key per object in the trees, and far
	// fewer pages than the records. So count it, and correct for the keys
	// the layers change.
	counted := false
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		vb := versionsTree(b)
		if !vb.Exists() {
			return nil
		}
		counted = true
		n = vb.KeyN()
		layers := c.overlaysLocked()
		for i, l := range layers {
			if l == nil {
				continue
			}
			for key, ch := range l.changes {
				if shadowed(layers, i, key) {
					continue
				}
				inTrees := vb.Get([]byte(key)) != nil
				switch {
				case ch.deleted && inTrees:
					n--
				case !ch.deleted && !inTrees:
					n++
				}
			}
		}
		return nil
	})
	if err != nil || counted {
		return n, err
	}
	err = c.forEachLocked(false, func(string, runtime.Object) error { n++; return nil })
	return n, err
}

// ResourceVersions returns the resource version of every stored object, read
// from record headers without decoding objects.
func (c *Collection) ResourceVersions() (map[string]string, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]string{}
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		err := c.forEachUnwrittenLocked(func(key string, ch *change) error {
			rec, err := c.changeRecordTx(b, key, ch)
			if err != nil {
				return err
			}
			rv, err := format.ReadResourceVersion(rec)
			if err != nil {
				return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
			}
			out[key] = rv
			return nil
		})
		if err != nil {
			return err
		}
		return objectsTree(b).ForEach(func(k, rec []byte) error {
			key := string(k)
			if c.inLayersLocked(key) {
				return nil
			}
			rv, err := format.ReadResourceVersion(rec)
			if err != nil {
				return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
			}
			out[key] = rv
			return nil
		})
	})
	return out, err
}

// IndexKeys returns, sorted, the keys whose values for the named index include
// value. It reads only the index, never an object.
func (c *Collection) IndexKeys(index, value string) ([]string, error) {
	c.decodeAhead()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m := c.memoryLocked(); m != nil {
		return c.memIndexKeys(m, index, value)
	}
	keys, err := c.indexKeysLocked(index, value)
	if err != nil {
		return nil, err
	}
	sort.Strings(keys)
	return keys, nil
}

func (c *Collection) indexKeysLocked(index, value string) ([]string, error) {
	if _, ok := c.indexes[index]; !ok {
		return nil, noIndexError(index)
	}
	var keys []string
	layers := c.overlaysLocked()
	for i, l := range layers {
		if l == nil {
			continue
		}
		for key := range l.byValue[index][value] {
			if !shadowed(layers, i, key) {
				keys = append(keys, key)
			}
		}
	}
	err := c.view(func(tx *bolt.Tx) error {
		si, err := c.storedIndex(tx, index)
		if err != nil {
			return err
		}
		if si.owed {
			owed, err := owedIndexKeys(si.byKey, value)
			for _, key := range owed {
				if !c.inLayersLocked(key) {
					keys = append(keys, key)
				}
			}
			return err
		}
		return format.ForEachIndexKey(si.byValue, value, func(k []byte) error {
			if key := string(k); !c.inLayersLocked(key) {
				keys = append(keys, key)
			}
			return nil
		})
	})
	return keys, err
}

// storedIndex is an index's buckets in a transaction. While byValue is
// owed (byvalueowed.go), reads use byKey.
type storedIndex struct {
	byValue, byKey *bolt.Bucket
	owed           bool
}

func (c *Collection) storedIndex(tx *bolt.Tx, index string) (storedIndex, error) {
	b := c.bucket(tx)
	if b == nil {
		return storedIndex{}, ErrNoCollection
	}
	ib := b.Bucket(format.IndexesBucket).Bucket([]byte(index))
	if ib == nil {
		return storedIndex{}, fmt.Errorf("%w: index bucket %q missing", ErrCorruptRecord, index)
	}
	return storedIndex{ib.Bucket(format.ByValueBucket), ib.Bucket(format.ByKeyBucket), byValueOwed(b)}, nil
}

// ByIndex returns the objects whose values for the named index include value.
// It decodes only those objects, and only if they are not cached.
func (c *Collection) ByIndex(index, value string) ([]runtime.Object, error) {
	c.decodeAhead()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m := c.memoryLocked(); m != nil {
		return appendMemByIndex[runtime.Object](c, m, nil, index, value)
	}
	keys, err := c.indexKeysLocked(index, value)
	if err != nil {
		return nil, err
	}
	found, err := c.getManyLocked(keys, false)
	return objectsOf(found), err
}

// GetMany returns the objects stored under keys, in the order of keys,
// skipping missing keys. Many keys are decoded on every core (readChunk), a
// few under each hold of the read lock. So the result is not one snapshot
// of the collection. Each object is its key's newest state when read.
func (c *Collection) GetMany(keys []string) ([]runtime.Object, error) {
	found, err := c.readChunk(keys)
	return objectsOf(found), err
}

type keyed struct {
	key string
	obj runtime.Object
}

func objectsOf(found []keyed) []runtime.Object {
	out := make([]runtime.Object, len(found))
	for i, f := range found {
		out[i] = f.obj
	}
	return out
}

// getManyLocked returns the objects stored under keys, skipping missing keys.
// With ordered, the result follows the order of keys; otherwise objects read
// from the file come last.
func (c *Collection) getManyLocked(keys []string, ordered bool) ([]keyed, error) {
	out := make([]keyed, 0, len(keys))
	var misses []string
	for _, key := range keys {
		if obj, ok := c.cache.get(key); ok {
			out = append(out, keyed{key, obj})
		} else if ch := c.layerChangeLocked(key); ch != nil {
			if !ch.deleted {
				obj, err := c.changeObjectLocked(key, ch)
				if err != nil {
					return nil, err
				}
				out = append(out, keyed{key, obj})
			}
		} else if ordered {
			out = append(out, keyed{key: key}) // filled from the file below
			misses = append(misses, key)
		} else {
			misses = append(misses, key)
		}
	}
	if len(misses) == 0 {
		return out, nil
	}
	if c.memory() != nil {
		// Every object is in memory, but perhaps only since the lookups
		// above. Another reader, holding mu for reading too, may have
		// completed the cache meanwhile. A key that missed is cached now
		// or absent.
		filled := out[:0]
		for _, o := range out {
			if o.obj == nil {
				var ok bool
				if o.obj, ok = c.cache.peek(o.key); !ok {
					continue
				}
			}
			filled = append(filled, o)
		}
		if !ordered {
			for _, key := range misses {
				if obj, ok := c.cache.peek(key); ok {
					filled = append(filled, keyed{key, obj})
				}
			}
		}
		return filled, nil
	}
	decoded := make(map[string]runtime.Object, len(misses))
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		objects := objectsTree(b)
		found := make([]keyed, 0, len(misses))
		records := make([][]byte, 0, len(misses))
		for _, key := range misses {
			if rec := objects.Get([]byte(key)); rec != nil {
				found = append(found, keyed{key: key})
				records = append(records, rec)
			}
		}
		if err := c.decodeAllLocked(found, records); err != nil {
			return err
		}
		for _, f := range found {
			decoded[f.key] = f.obj
		}
		if !ordered {
			out = append(out, found...)
		}
		return nil
	})
	if err != nil || !ordered {
		return out, err
	}
	filled := out[:0]
	for _, o := range out {
		if o.obj == nil {
			if o.obj = decoded[o.key]; o.obj == nil {
				continue // deleted from the file meanwhile
			}
		}
		filled = append(filled, o)
	}
	return filled, nil
}

// IndexValues returns the distinct values of the named index.
func (c *Collection) IndexValues(index string) ([]string, error) {
	c.decodeAhead()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m := c.memoryLocked(); m != nil {
		return c.memIndexValues(m, index)
	}
	if _, ok := c.indexes[index]; !ok {
		return nil, noIndexError(index)
	}
	seen := map[string]struct{}{}
	layers := c.overlaysLocked()
	for i, l := range layers {
		if l == nil {
			continue
		}
		for v, keys := range l.byValue[index] {
			for key := range keys {
				if !shadowed(layers, i, key) {
					seen[v] = struct{}{}
					break
				}
			}
		}
	}
	err := c.view(func(tx *bolt.Tx) error {
		si, err := c.storedIndex(tx, index)
		if err != nil {
			return err
		}
		if si.owed {
			return forEachIndexValues(si.byKey, func(key string, values []string) error {
				if !c.inLayersLocked(key) {
					for _, v := range values {
						seen[v] = struct{}{}
					}
				}
				return nil
			})
		}
		cur := si.byValue.Cursor()
		for k, v := cur.First(); k != nil; {
			value, key, prefixLen, err := format.DecodeIndexEntry(k, v)
			if err != nil {
				return err
			}
			if _, ok := seen[value]; ok || c.inLayersLocked(key) {
				// The key is known already, or its disk entry is
				// overridden. Look at the value's next key.
				k, v = cur.Next()
				continue
			}
			seen[value] = struct{}{}
			// Skip the value's remaining keys. A hashed entry holds its
			// value, and one of another value with the same hash is not
			// skipped.
			prefix := append([]byte(nil), k[:prefixLen]...)
			for k, v = cur.Next(); k != nil && bytes.HasPrefix(k, prefix) && (len(v) == 0 || string(v) == value); k, v = cur.Next() {
			}
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out, err
}

// CacheStats reports the decoded-object cache.
func (c *Collection) CacheStats() CacheStats { return c.cache.stats() }
