package persist_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/persist"
)

// A list loaded into an empty collection is committed a chunk per
// transaction. So no transaction dirties the pages of the whole list. None
// of them stores a resourceVersion. The commit's own transaction writes it
// with the rest. Readers see the whole list throughout. Index entries come
// with their objects. A collection that has a resourceVersion is written in
// one transaction, and so is a layer with deletions.
func TestLargeListIsWrittenAheadInChunks(t *testing.T) {
	const chunk, n = 50, 175
	var seen []string
	var states []string
	var c *persist.Collection
	opts := persist.WithWriteAhead(persist.Options{}, chunk, func(last string) {
		seen = append(seen, last)
		rv, objects, err := persist.CommittedState(c)
		states = append(states, fmt.Sprintf("rv=%q objects=%d err=%v", rv, objects, err))
		if list, err := c.List(); err != nil || len(list) != n {
			t.Errorf("while writing ahead: List() = %d objects, %v", len(list), err)
		}
	})
	path := filepath.Join(t.TempDir(), "cache.db")
	db := openDB(t, path, opts)
	var err error
	indexes := map[string]string{"name": "1"}
	if c, err = db.Collection("cms", persist.CollectionOptions{Indexes: indexes, IndexValues: nameIndex}); err != nil {
		t.Fatal(err)
	}
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = cm(fmt.Sprintf("cm-%03d", i), strconv.Itoa(i+1))
	}
	putNamed(t, c, "500", objs...)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ns/cm-049", "ns/cm-099", "ns/cm-149"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("chunks written ahead ending at %v, want %v", seen, want)
	}
	if want := []string{`rv="" objects=50 err=<nil>`, `rv="" objects=100 err=<nil>`, `rv="" objects=150 err=<nil>`}; fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("file after each chunk: %v, want %v", states, want)
	}
	check := func(c *persist.Collection) {
		t.Helper()
		if rv, objects, err := persist.CommittedState(c); rv != "500" || objects != n || err != nil {
			t.Errorf("committed: rv %q, %d objects, %v; want 500, %d", rv, objects, err, n)
		}
		for _, i := range []int{0, 49, 50, 150, 174} {
			name := fmt.Sprintf("cm-%03d", i)
			keys, err := c.IndexKeys("name", name)
			if err != nil || fmt.Sprint(keys) != "[ns/"+name+"]" {
				t.Errorf("IndexKeys(name, %s) = %v, %v", name, keys, err)
			}
		}
	}
	check(c)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path, opts)
	if c, err = db.Collection("cms", persist.CollectionOptions{Indexes: indexes, IndexValues: nameIndex}); err != nil {
		t.Fatal(err)
	}
	check(c)

	// Stored resourceVersion: one transaction.
	seen = nil
	more := make([]runtime.Object, n)
	for i := range more {
		more[i] = cm(fmt.Sprintf("dm-%03d", i), strconv.Itoa(600+i))
	}
	putNamed(t, c, "900", more...)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("a collection with a resourceVersion was written ahead: %v", seen)
	}
	keys, err := c.Keys()
	sort.Strings(keys)
	if err != nil || len(keys) != 2*n {
		t.Errorf("Keys() = %d, %v", len(keys), err)
	}

	// A deletion in the layer: one transaction.
	other, err := db.Collection("other", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ops := []persist.Op{{Key: "ns/gone", Delete: true}}
	for i := range n {
		o := cm(fmt.Sprintf("cm-%03d", i), "1")
		ops = append(ops, persist.Op{Key: "ns/" + o.Name, Object: o})
	}
	if err := other.Apply(ops, "2"); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("a layer with a deletion was written ahead: %v", seen)
	}
	if rv, objects, err := persist.CommittedState(other); rv != "2" || objects != n || err != nil {
		t.Errorf("committed: rv %q, %d objects, %v; want 2, %d", rv, objects, err, n)
	}
}

// nameIndex indexes objects by name.
func nameIndex(_ string, obj runtime.Object) ([]string, error) {
	return []string{obj.(*corev1.ConfigMap).Name}, nil
}
