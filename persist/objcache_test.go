package persist

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cacheObj(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// checkCache verifies the ring invariant, the byte count and the bounds.
func checkCache(t *testing.T, c *objectCache) {
	t.Helper()
	var bytes int64
	for key, e := range c.entries {
		bytes += int64(e.size)
		if c.bounded() && (int(e.slot) >= len(c.ring) || c.ring[e.slot].key != key) {
			t.Fatalf("entry %q points at slot %d, which holds another key", key, e.slot)
		}
	}
	if bytes != c.bytes {
		t.Fatalf("byte count %d, entries sum to %d", c.bytes, bytes)
	}
	if c.bounded() && len(c.ring) != len(c.entries) {
		t.Fatalf("ring has %d slots for %d entries", len(c.ring), len(c.entries))
	}
	if !c.bounded() && c.ring != nil {
		t.Fatal("unbounded cache has a ring")
	}
	if c.overLocked() {
		t.Fatalf("over its bounds: %d objects, %d bytes", len(c.entries), c.bytes)
	}
}

func TestObjectCacheRandomOps(t *testing.T) {
	for _, bound := range []struct{ objects, bytes int }{{0, 0}, {1, 0}, {7, 0}, {0, 500}, {5, 300}} {
		t.Run(fmt.Sprintf("objects=%d,bytes=%d", bound.objects, bound.bytes), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(bound.objects), uint64(bound.bytes)))
			c := newObjectCache(bound.objects, int64(bound.bytes))
			model := map[string]*corev1.ConfigMap{} // what was put and not removed
			for step := 0; step < 5000; step++ {
				key := fmt.Sprintf("k%d", rng.IntN(20))
				switch op := rng.IntN(10); {
				case op < 5:
					obj := cacheObj(fmt.Sprint(step))
					c.put(key, obj, 1+rng.IntN(100))
					model[key] = obj
					if got, ok := c.get(key); !ok && bound.bytes == 0 {
						t.Fatalf("step %d: %q evicted as it was put", step, key)
					} else if ok && got != obj {
						t.Fatalf("step %d: %q holds a stale object", step, key)
					}
				case op < 8:
					got, ok := c.get(key)
					if ok && got != model[key] {
						t.Fatalf("step %d: get %q returned an object never put or removed", step, key)
					}
					if !c.bounded() && ok != (model[key] != nil) {
						t.Fatalf("step %d: unbounded cache lost %q", step, key)
					}
				case op < 9:
					c.remove(key)
					delete(model, key)
					if _, ok := c.get(key); ok {
						t.Fatalf("step %d: %q still cached after remove", step, key)
					}
				default:
					if rng.IntN(50) == 0 {
						c.clear()
						clear(model)
					}
				}
				checkCache(t, c)
			}
		})
	}
}

// A bounded cache gives a recently read entry a second chance: scanning
// through many cold keys does not evict a key that keeps being read.
func TestObjectCacheSecondChance(t *testing.T) {
	c := newObjectCache(4, 0)
	hot := cacheObj("hot")
	c.put("hot", hot, 1)
	for i := 0; i < 100; i++ {
		if got, ok := c.get("hot"); !ok || got != hot {
			t.Fatalf("after %d cold puts the read key was evicted", i)
		}
		c.put(fmt.Sprintf("cold-%d", i), cacheObj("cold"), 1)
		checkCache(t, c)
	}
	if got := c.stats().Objects; got != 4 {
		t.Errorf("cache holds %d objects, bound 4", got)
	}
}

// A bounded cache keeps a working set that fits within its bound. Once
// the set has been read for a while, every read of it hits, whatever the
// cache held before and in whatever order the set is read. (CLOCK only
// approximates LRU, so a key of the set may miss twice while the set
// loads.) Objects larger than a byte bound come and go among the reads,
// put by Apply or decoded by a read, and must not push the set out.
// Seeded layouts: the bound by objects, bytes or both, the keys cached
// before, the set's size, the sizes of its objects, the order of its reads
// and the oversized objects between them.
func TestObjectCacheKeepsAWorkingSetWithinItsBound(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		bound := 1 + rng.IntN(40)
		// maxSize is the largest object of the set. A set of at most bound
		// keys fits a byte bound of bound*maxSize.
		maxSize, maxObjects, maxBytes := 1, bound, int64(0)
		switch rng.IntN(3) {
		case 1:
			maxSize, maxObjects, maxBytes = 1+rng.IntN(8), 0, 0
		case 2:
			maxSize = 1 + rng.IntN(8)
		}
		if maxObjects == 0 || rng.IntN(2) == 0 {
			maxBytes = int64(bound * maxSize)
		}
		c := newObjectCache(maxObjects, maxBytes)
		for i := range rng.IntN(3 * bound) {
			c.put(fmt.Sprintf("before-%d", i), cacheObj("before"), 1+rng.IntN(maxSize))
			if rng.IntN(2) == 0 { // some were read, some not
				c.get(fmt.Sprintf("before-%d", rng.IntN(i+1)))
			}
		}
		set := 1 + rng.IntN(bound)
		sizes := make([]int, set)
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(maxSize)
		}
		reads := 20 * set
		for i := range reads {
			if maxBytes > 0 && rng.IntN(4) == 0 {
				key, size := fmt.Sprintf("big-%d", rng.IntN(3)), int(maxBytes)+1+rng.IntN(100)
				if rng.IntN(2) == 0 {
					c.put(key, cacheObj(key), size)
				} else {
					c.add(key, cacheObj(key), size)
				}
				checkCache(t, c)
			}
			n := rng.IntN(set)
			key := fmt.Sprintf("set-%d", n)
			if _, ok := c.get(key); !ok {
				if i >= reads/2 {
					t.Fatalf("seed %d: bound of %d objects and %d bytes, a set of %d keys read in turn: read %d of %d, of %q, missed", seed, maxObjects, maxBytes, set, i+1, reads, key)
				}
				c.add(key, cacheObj(key), sizes[n])
			}
			checkCache(t, c)
		}
	}
}

// An object larger than the byte bound is not cached. Caching it would
// first evict every other entry, read or not, and then itself. An older
// state of its key leaves the cache with it, so it is never served stale.
func TestObjectCacheOversizedObjectEvictsNothing(t *testing.T) {
	for _, objects := range []int{0, 10} {
		t.Run(fmt.Sprintf("objects=%d", objects), func(t *testing.T) {
			c := newObjectCache(objects, 100)
			hot := map[string]*corev1.ConfigMap{}
			for i := range 5 {
				key := fmt.Sprintf("hot-%d", i)
				hot[key] = cacheObj(key)
				c.put(key, hot[key], 10)
				c.get(key)
			}
			c.put("big", cacheObj("big"), 101)
			checkCache(t, c)
			big := cacheObj("big")
			if got := c.add("big", big, 500); got != big {
				t.Errorf("add of an oversized object returned %v, want the object given", got)
			}
			checkCache(t, c)
			c.put("hot-0", cacheObj("hot-0 grown"), 101) // a cached key grows past the bound
			checkCache(t, c)
			if _, ok := c.get("big"); ok {
				t.Error("an object larger than the byte bound is cached")
			}
			if _, ok := c.get("hot-0"); ok {
				t.Error("a key that grew past the byte bound still serves its older object")
			}
			for _, key := range []string{"hot-1", "hot-2", "hot-3", "hot-4"} {
				if got, ok := c.get(key); !ok || got != hot[key] {
					t.Errorf("%s was evicted by an object larger than the whole cache", key)
				}
			}
		})
	}
}
