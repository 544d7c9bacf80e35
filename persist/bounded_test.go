package persist_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/boltinformer/boltinformer/persist"
)

// A bounded collection's memory must not grow with what one Apply holds. A
// list of N objects leaves no decoded object in the layers waiting for the
// commit, only records. Reads decode them, and the cache keeps within its
// bound. An unbounded collection's layers share the cache's objects. A
// checkpoint opened while a deletion waits behind a layer being committed
// finds the deleted object's state in that layer's record.
func TestBoundedLayersHoldRecordsOnly(t *testing.T) {
	const n, bound = 200, 10
	for _, cacheObjects := range []int{0, bound} {
		t.Run(fmt.Sprintf("CacheObjects=%d", cacheObjects), func(t *testing.T) {
			db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{BatchInterval: time.Hour, BatchLimit: 1 << 20})
			c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: cacheObjects})
			if err != nil {
				t.Fatal(err)
			}
			objs := make([]*corev1.ConfigMap, n)
			for i := range objs {
				objs[i] = cm(fmt.Sprintf("cm-%03d", i), strconv.Itoa(i+1))
			}
			put(t, c, strconv.Itoa(n), objs...)
			wantObjects := n
			if cacheObjects > 0 {
				wantObjects = 0
			}
			if o, ch := persist.LayerObjects(c); o != wantObjects || ch != n {
				t.Errorf("after an Apply of %d: the layers hold %d objects in %d changes, want %d in %d", n, o, ch, wantObjects, n)
			}
			if cacheObjects > 0 {
				if st := c.CacheStats(); st.Objects > cacheObjects {
					t.Errorf("the cache holds %d objects, bound %d", st.Objects, cacheObjects)
				}
			}
			for i, o := range objs {
				got, ok, err := c.Get("ns/" + o.Name)
				if err != nil || !ok || got.(*corev1.ConfigMap).ResourceVersion != strconv.Itoa(i+1) {
					t.Fatalf("Get(%s) = %v, %v, %v", o.Name, got, ok, err)
				}
			}
			if list, err := c.List(); err != nil || len(list) != n {
				t.Fatalf("List: %d objects, %v", len(list), err)
			}

			cp, err := c.Checkpoint("handler")
			if err != nil {
				t.Fatal(err)
			}
			ack(t, cp, "ns/cm-000", "1")
			cp.Close()
			persist.HoldForCommit(c) // the list and the ack wait in the committing layer
			if err := c.Apply([]persist.Op{{Key: "ns/cm-000", Delete: true, DeletedAt: "9"}}, strconv.Itoa(n+1)); err != nil {
				t.Fatal(err)
			}
			if cp, err = c.Checkpoint("handler"); err != nil {
				t.Fatal(err)
			}
			d := cp.Deleted()
			if obj, ok := d["ns/cm-000"].(*corev1.ConfigMap); !ok || obj.ResourceVersion != "1" {
				t.Errorf("Deleted() = %v, want ns/cm-000 at resourceVersion 1", d)
			}
			cp.Close()

			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if o, ch := persist.LayerObjects(c); o != 0 || ch != 0 {
				t.Errorf("after the commit the layers hold %d objects in %d changes", o, ch)
			}
			if list, err := c.List(); err != nil || len(list) != n-1 {
				t.Fatalf("List after the commit: %d objects, %v", len(list), err)
			}
		})
	}
}

// ApplyPart applies a page of a list without touching the resourceVersion
// or the must-list mark; ApplyList of no ops then sets the version. The
// file holds the pages as they are committed, still without a version.
func TestApplyPartKeepsTheVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 1})
	if err != nil {
		t.Fatal(err)
	}
	page := func(names ...string) []persist.Op {
		var ops []persist.Op
		for _, name := range names {
			ops = append(ops, persist.Op{Key: "ns/" + name, Object: cm(name, "5")})
		}
		return ops
	}
	if err := c.ApplyPart(page("a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyPart(page("c")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rv, err := c.CommittedResourceVersion(); rv != "" || err != nil || c.ResourceVersion() != "" || c.MustList() {
		t.Fatalf("after the pages: committed %q (%v), applied %q, must list %v; want no version, no mark", rv, err, c.ResourceVersion(), c.MustList())
	}
	if keys, err := c.Keys(); err != nil || len(keys) != 3 {
		t.Fatalf("Keys() = %v, %v", keys, err)
	}
	if err := c.ApplyList(nil, "7"); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rv, err := c.CommittedResourceVersion(); rv != "7" || err != nil {
		t.Errorf("after the list's end: committed %q (%v), want 7", rv, err)
	}
	if keys, err := c.Keys(); err != nil || len(keys) != 3 {
		t.Errorf("Keys() after the list's end = %v, %v", keys, err)
	}
}

// A bounded collection's memory stays flat however many deletions a
// checkpoint has not acknowledged. Once committed, a tombstone is a key in
// memory, and its object is read from the file when asked for.
func TestBoundedTombstonesHoldNoObjects(t *testing.T) {
	const n, batch = 3000, 500
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheObjects: 10})
	if err != nil {
		t.Fatal(err)
	}
	cp, err := c.Checkpoint("handler")
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	key := func(i int) string { return fmt.Sprintf("ns/cm-%04d", i) }
	for start := 0; start < n; start += batch { // ~8 KiB each, never held by the test
		var ops []persist.Op
		for i := start; i < start+batch; i++ {
			obj := cm(key(i)[3:], "1")
			obj.Data = map[string]string{"blob": strings.Repeat(strconv.Itoa(i%10), 8<<10)}
			ops = append(ops, persist.Op{Key: key(i), Object: obj})
		}
		if err := c.Apply(ops, "1"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		ack(t, cp, key(i), "1")
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // the record pool is freed by the second
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for start := 0; start < n; start += batch {
		var ops []persist.Op
		for i := start; i < start+batch; i++ {
			ops = append(ops, persist.Op{Key: key(i), Delete: true})
		}
		if err := c.Apply(ops, "2"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := heap()
	if cp.Tombstones() != n {
		t.Fatalf("%d tombstones, want %d", cp.Tombstones(), n)
	}
	grown := int64(after) - int64(before)
	t.Logf("%d committed tombstones: live heap %+.1f MiB", n, float64(grown)/(1<<20))
	if grown > 5<<20 {
		t.Errorf("%d committed tombstones grew the live heap by %.1f MiB, want under 5 (their objects take %.0f MiB)", n, float64(grown)/(1<<20), float64(n*8<<10)/(1<<20))
	}
	d := cp.Deleted()
	if obj, ok := d[key(7)].(*corev1.ConfigMap); !ok || len(obj.Data["blob"]) != 8<<10 {
		t.Errorf("Deleted()[%s] = %v, want its last state", key(7), d[key(7)])
	}
}

// An object whose record is larger than CacheBytes is served, from the
// layers and from the file, without entering the cache. The objects read
// before it stay cached and keep hitting.
func TestObjectLargerThanCacheBytesLeavesTheCacheAlone(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "cache.db"), persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{CacheBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var hot []*corev1.ConfigMap
	for i := range 5 {
		hot = append(hot, cm(fmt.Sprintf("hot-%d", i), "1"))
	}
	put(t, c, "1", hot...)
	read := func(key string) *corev1.ConfigMap {
		t.Helper()
		obj, ok, err := c.Get(key)
		if err != nil || !ok {
			t.Fatalf("Get(%s) = %v, %v", key, ok, err)
		}
		return obj.(*corev1.ConfigMap)
	}
	for _, o := range hot {
		read("ns/" + o.Name)
	}
	big := cm("big", "2")
	big.Data = map[string]string{"blob": strings.Repeat("x", 16<<10)}
	put(t, c, "2", big)
	for round, when := range []string{"applied", "committed"} {
		if round == 1 {
			if err := db.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := read("ns/big"); len(got.Data["blob"]) != 16<<10 || got.ResourceVersion != "2" {
			t.Errorf("%s: the large object reads back as %s@%s with %d bytes", when, got.Name, got.ResourceVersion, len(got.Data["blob"]))
		}
		before := c.CacheStats()
		if before.Objects != len(hot) {
			t.Errorf("%s: the cache holds %d objects, want the %d read before", when, before.Objects, len(hot))
		}
		for _, o := range hot {
			read("ns/" + o.Name)
		}
		if after := c.CacheStats(); after.Misses != before.Misses {
			t.Errorf("%s: %d reads of the objects read before missed the cache", when, after.Misses-before.Misses)
		}
	}
}
