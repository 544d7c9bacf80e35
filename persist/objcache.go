package persist

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// objectCache holds decoded objects by key, so that hot reads skip the file
// and the codec. With no bound, it keeps every object it is given. That is
// client-go's memory profile, plus the file. With a bound, it evicts by the
// CLOCK algorithm. So memory stays flat however many objects the collection
// holds.
//
// Lookups take mu for reading. In a bounded cache, they set the entry's
// reference bit atomically. Inserts and removals take mu for writing. A
// plain map under an RWMutex, as in client-go's threadSafeMap, iterates
// several times faster than a sync.Map, and List needs that. Entries are
// map values, not pointers. So a hit costs the same memory accesses as a
// client-go Get. The owner guarantees freshness. Every Apply stores or
// removes the key under the collection's write lock. Reads that decode from
// the file insert under its read lock. So a cached object is never older
// than the collection's newest state for that key.
type objectCache struct {
	maxObjects int   // 0: unbounded
	maxBytes   int64 // 0: unbounded

	hits, misses atomic.Uint64

	// mu guards the fields below it.
	mu      sync.RWMutex
	entries map[string]cacheEntry
	// ring is the CLOCK ring of a bounded cache, one slot per entry, in no
	// particular order. Removal moves the last slot into the gap. It is nil
	// when unbounded. The invariant is entries[ring[i].key].slot == i.
	ring  []clockSlot
	hand  int
	bytes int64
}

type cacheEntry struct {
	obj runtime.Object
	// size and slot are 32 bits, so that an entry is three words. A smaller
	// map iterates (List) and misses the CPU cache (Get) less. Records are
	// far below 2 GiB (etcd's limit is 1.5 MiB), rings far below 2^31.
	size int32
	slot int32 // index into ring; bounded caches only
}

type clockSlot struct {
	key string
	ref uint32 // set by lookups under the read lock: atomic access only
}

func newObjectCache(maxObjects int, maxBytes int64) *objectCache {
	return &objectCache{maxObjects: maxObjects, maxBytes: maxBytes, entries: map[string]cacheEntry{}}
}

func (c *objectCache) bounded() bool { return c.maxObjects > 0 || c.maxBytes > 0 }

func (c *objectCache) get(key string) (runtime.Object, bool) {
	c.mu.RLock()
	e, ok := c.entries[key]
	if ok && c.ring != nil {
		if ref := &c.ring[e.slot].ref; atomic.LoadUint32(ref) == 0 {
			atomic.StoreUint32(ref, 1)
		}
	}
	c.mu.RUnlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return e.obj, true
}

// peek returns the object cached under key, without counting a hit or a
// miss or touching the reference bit.
func (c *objectCache) peek(key string) (runtime.Object, bool) {
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	return e.obj, ok
}

// has reports whether key is cached, without counting a hit or a miss or
// touching the reference bit.
func (c *objectCache) has(key string) bool {
	c.mu.RLock()
	_, ok := c.entries[key]
	c.mu.RUnlock()
	return ok
}

// put caches obj under key, replacing what was there. size is the encoded
// record size, used for the byte bound. An object larger than that bound
// is not cached (putLocked).
func (c *objectCache) put(key string, obj runtime.Object, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, obj, size)
}

// add caches obj under key unless key is cached already, and returns the
// object cached under key, or obj if it is too large to cache (putLocked). Two readers may decode the same record at once,
// such as a warm start's delivery and a lister. They then hand out one
// object, as client-go's store holds one object per key. A handler's OnAdd
// and a lister's Get show the same pointer.
func (c *objectCache) add(key string, obj runtime.Object, size int) runtime.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		return e.obj
	}
	c.putLocked(key, obj, size)
	return obj
}

// putLocked caches obj under key, unless obj alone exceeds the byte bound.
// Caching such an object would evict every other entry first, and then the
// object itself. It is not cached, and an older state of key leaves the
// cache, so that no read serves it.
func (c *objectCache) putLocked(key string, obj runtime.Object, size int) {
	if c.maxBytes > 0 && int64(size) > c.maxBytes {
		c.removeLocked(key)
		return
	}
	e := cacheEntry{obj: obj, size: int32(size)}
	old, loaded := c.entries[key]
	if loaded {
		c.bytes -= int64(old.size)
	}
	if c.bounded() {
		if loaded {
			e.slot = old.slot
			c.ring[e.slot].ref = 0
		} else {
			e.slot = int32(len(c.ring))
			c.ring = append(c.ring, clockSlot{key: key})
		}
	}
	c.entries[key] = e
	c.bytes += int64(e.size)
	if c.bounded() {
		c.evictLocked(key)
	}
}

func (c *objectCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *objectCache) removeLocked(key string) {
	old, loaded := c.entries[key]
	if !loaded {
		return
	}
	delete(c.entries, key)
	c.bytes -= int64(old.size)
	if c.ring != nil {
		c.dropSlotLocked(int(old.slot))
	}
}

func (c *objectCache) overLocked() bool {
	return (c.maxObjects > 0 && len(c.entries) > c.maxObjects) || (c.maxBytes > 0 && c.bytes > c.maxBytes)
}

// evictLocked sweeps the ring until the cache is within its bounds. A swept
// entry with its reference bit set gets a second chance. The entry under
// keep, just put, is evicted last, and never is, since it fits alone.
func (c *objectCache) evictLocked(keep string) {
	for c.overLocked() && len(c.ring) > 0 {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		if s := &c.ring[c.hand]; len(c.ring) > 1 && (s.ref != 0 || s.key == keep) {
			s.ref = 0
			c.hand++
			continue
		}
		// The slot now holds the ring's former last entry, so the hand
		// stays, unless that entry is keep. The hand would otherwise take
		// the entry just added at the next eviction, before anyone read it.
		c.removeLocked(c.ring[c.hand].key)
		if c.hand < len(c.ring) && c.ring[c.hand].key == keep {
			c.hand++
		}
	}
}

// dropSlotLocked removes ring slot i by moving the last slot into it, which
// keeps the ring compact at the cost of exact CLOCK order.
func (c *objectCache) dropSlotLocked(i int) {
	last := len(c.ring) - 1
	if i != last {
		c.ring[i] = c.ring[last]
		moved := c.entries[c.ring[i].key]
		moved.slot = int32(i)
		c.entries[c.ring[i].key] = moved
	}
	c.ring[last] = clockSlot{}
	c.ring = c.ring[:last]
}

// clear empties the cache.
func (c *objectCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	if c.ring != nil {
		clear(c.ring)
		c.ring = c.ring[:0]
	}
	c.hand, c.bytes = 0, 0
}

// CacheStats reports a collection's decoded-object cache.
type CacheStats struct {
	Objects      int
	Bytes        int64
	Hits, Misses uint64
}

// forEach calls fn for every cached object until fn returns an error. fn
// must not call back into the cache.
func (c *objectCache) forEach(fn func(key string, obj runtime.Object) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for key, e := range c.entries {
		if err := fn(key, e.obj); err != nil {
			return err
		}
	}
	return nil
}

func (c *objectCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

func (c *objectCache) stats() CacheStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return CacheStats{Objects: len(c.entries), Bytes: c.bytes, Hits: c.hits.Load(), Misses: c.misses.Load()}
}
