package persist_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/persist"
)

// An index stored but not named when the collection opens stays dormant.
// AddIndexes at the same version adopts it without reading an object.
// client-go's informers add most indexes with AddIndexers, after the
// collection is open. Rebuilding them on every warm start decoded every
// object. Once a change is applied, the dormant index would be behind it.
// So it is dropped, and AddIndexes builds it again.
func TestDormantIndexIsAdoptedUntilAChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	var calls atomic.Int64
	counting := func(index string, obj runtime.Object) ([]string, error) {
		calls.Add(1)
		return byName(index, obj)
	}
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("cms", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddIndexes(context.Background(), map[string]string{"name": "1"}, counting); err != nil {
		t.Fatal(err)
	}
	putNamed(t, c, "2", cm("a", "1"), cm("b", "2"))
	reopen := func() *persist.Collection {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = openDB(t, path, persist.Options{})
		c, err := db.Collection("cms", persist.CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	c = reopen()
	if _, err := c.IndexKeys("name", "a"); err == nil {
		t.Error("a dormant index is served before AddIndexes adopts it")
	}
	calls.Store(0)
	if err := c.AddIndexes(context.Background(), map[string]string{"name": "1"}, counting); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("adopting the dormant index computed %d index values, want none", n)
	}
	if got := collectionState(t, c); got != `keys=[ns/a ns/b] index(a)=[ns/a] rv="2"` {
		t.Errorf("after adoption the collection serves %s", got)
	}

	t.Run("another version is rebuilt", func(t *testing.T) {
		c = reopen()
		calls.Store(0)
		if err := c.AddIndexes(context.Background(), map[string]string{"name": "2"}, counting); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("AddIndexes at another version computed %d index values, want 2", n)
		}
	})

	t.Run("a change drops it", func(t *testing.T) {
		c = reopen()
		// Moving a to a2 moves its index entry; a dormant index would
		// still say a.
		if err := c.Apply([]persist.Op{{Key: "ns/a", Delete: true}, {Key: "ns/a2", Object: cm("a", "3"), Indexes: map[string][]string{}}}, "3"); err != nil {
			t.Fatal(err)
		}
		calls.Store(0)
		if err := c.AddIndexes(context.Background(), map[string]string{"name": "2"}, counting); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("AddIndexes after a change computed %d index values, want 2 (rebuilt)", n)
		}
		if got := collectionState(t, c); got != `keys=[ns/a2 ns/b] index(a)=[ns/a2] rv="3"` {
			t.Errorf("after the change the collection serves %s", got)
		}
		// Committed without the index named: the next open finds none.
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		c, err = db.Collection("cms", persist.CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A commit without object changes (a bookmark) keeps it: it still
		// matches the objects.
		if err := c.Apply(nil, "4"); err != nil {
			t.Fatal(err)
		}
		c = reopen()
		calls.Store(0)
		if err := c.AddIndexes(context.Background(), map[string]string{"name": "2"}, counting); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("an index kept through a bookmark was rebuilt (%d index values computed)", n)
		}
		// One with a change drops it.
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c, err = db.Collection("cms", persist.CollectionOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Apply([]persist.Op{{Key: "ns/b", Delete: true}}, "5"); err != nil {
			t.Fatal(err)
		}
		c = reopen()
		calls.Store(0)
		if err := c.AddIndexes(context.Background(), map[string]string{"name": "2"}, counting); err != nil {
			t.Fatal(err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("an index dropped by a commit was adopted (%d index values computed, want 1)", n)
		}
	})
}
