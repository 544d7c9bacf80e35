package persist

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// objectCache holds decoded objects by key so that hot reads skip the file
// and the codec. With no bound it keeps every object it is given (client-go's
// memory profile, plus the file); with a bound it evicts by the CLOCK
// algorithm, so memory stays flat however many objects the collection holds.
//
// Lookups take mu for reading and set an atomic reference bit; inserts and
// removals take mu for writing. (A plain map under an RWMutex, as in
// client-go's threadSafeMap, iterates several times faster than a sync.Map,
// which List needs.) The owner guarantees freshness: every Apply stores or
// removes the key under the collection's write lock, and reads that decode
// from the file insert under its read lock, so a cached object is never older
// than the collection's newest state for that key.
type objectCache struct {
	maxObjects int   // 0: unbounded
	maxBytes   int64 // 0: unbounded

	hits, misses atomic.Uint64

	// mu guards the fields below it.
	mu      sync.RWMutex
	entries map[string]*cacheEntry
	ring    []*cacheEntry // CLOCK ring; may hold entries already removed
	hand    int
	count   int
	bytes   int64
}

type cacheEntry struct {
	key  string
	obj  runtime.Object
	size int64
	ref  atomic.Bool
	dead bool // guarded by objectCache.mu
}

func newObjectCache(maxObjects int, maxBytes int64) *objectCache {
	return &objectCache{maxObjects: maxObjects, maxBytes: maxBytes, entries: map[string]*cacheEntry{}}
}

func (c *objectCache) bounded() bool { return c.maxObjects > 0 || c.maxBytes > 0 }

func (c *objectCache) get(key string) (runtime.Object, bool) {
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	if !e.ref.Load() {
		e.ref.Store(true)
	}
	c.hits.Add(1)
	return e.obj, true
}

// put caches obj under key, replacing what was there. size is the encoded
// record size, used for the byte bound.
func (c *objectCache) put(key string, obj runtime.Object, size int) {
	e := &cacheEntry{key: key, obj: obj, size: int64(size)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, loaded := c.entries[key]; loaded {
		c.forgetLocked(old)
	}
	c.entries[key] = e
	c.count++
	c.bytes += e.size
	if !c.bounded() {
		return
	}
	c.ring = append(c.ring, e)
	c.evictLocked()
}

func (c *objectCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, loaded := c.entries[key]; loaded {
		delete(c.entries, key)
		c.forgetLocked(old)
	}
}

func (c *objectCache) forgetLocked(e *cacheEntry) {
	e.dead = true
	c.count--
	c.bytes -= e.size
}

func (c *objectCache) overLocked() bool {
	return (c.maxObjects > 0 && c.count > c.maxObjects) || (c.maxBytes > 0 && c.bytes > c.maxBytes)
}

// evictLocked sweeps the ring until the cache is within its bounds. A swept
// entry with its reference bit set gets a second chance.
func (c *objectCache) evictLocked() {
	for c.overLocked() || len(c.ring) > 2*c.count+16 {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		e := c.ring[c.hand]
		switch {
		case e.dead:
			c.dropSlotLocked()
		case e.ref.Load() && c.overLocked():
			e.ref.Store(false)
			c.hand++
		case c.overLocked():
			delete(c.entries, e.key)
			c.forgetLocked(e)
			c.dropSlotLocked()
		default:
			c.hand++
		}
	}
}

// dropSlotLocked removes the ring slot under the hand by moving the last slot
// into it, which keeps the ring compact at the cost of exact CLOCK order.
func (c *objectCache) dropSlotLocked() {
	last := len(c.ring) - 1
	c.ring[c.hand] = c.ring[last]
	c.ring[last] = nil
	c.ring = c.ring[:last]
}

// clear empties the cache.
func (c *objectCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
	c.ring = nil
	c.hand, c.count, c.bytes = 0, 0, 0
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

func (c *objectCache) stats() CacheStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return CacheStats{Objects: c.count, Bytes: c.bytes, Hits: c.hits.Load(), Misses: c.misses.Load()}
}
