package persist_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/boltinformer/boltinformer/persist"
)

// A bounded collection's memory must not grow with what one Apply holds: a
// list of N objects leaves no decoded object in the layers waiting for the
// commit, only records, which reads decode (and the cache keeps within its
// bound). An unbounded collection's layers share the cache's objects. A
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
