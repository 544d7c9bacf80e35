package persist_test

import (
	"path/filepath"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/boltinformer/boltinformer/internal/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

// ForEach over an unbounded cache decodes as it walks: its first callback
// comes after a few chunks are decoded, not after the whole collection (a
// warm start hands objects to its handlers from this walk), and it visits
// every key once, in order. A List afterwards is served from the objects
// the walk cached.
func TestForEachDecodesAsItWalks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	const n = 3000
	keys := make([]string, n)
	func() {
		db := openDB(t, path, persist.Options{})
		c, err := db.Collection("pods", persist.CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ops := make([]persist.Op, n)
		for i := range ops {
			p := fixture.Pod(i)
			keys[i] = p.Namespace + "/" + p.Name
			ops[i] = persist.Op{Key: keys[i], Object: p}
		}
		if err := c.Apply(ops, "1"); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	sort.Strings(keys)

	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("pods", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var visited []string
	cachedAtFirst := -1
	err = c.ForEach(func(key string, _ runtime.Object) error {
		if cachedAtFirst < 0 {
			cachedAtFirst = c.CacheStats().Objects
		}
		visited = append(visited, key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cachedAtFirst >= n/2 {
		t.Errorf("%d of %d objects were decoded before the walk's first callback; want only the first chunks", cachedAtFirst, n)
	}
	if len(visited) != n || !sort.StringsAreSorted(visited) || visited[0] != keys[0] || visited[n-1] != keys[n-1] {
		t.Errorf("walk visited %d keys (sorted %t), want the %d keys in order", len(visited), sort.StringsAreSorted(visited), n)
	}
	misses := c.CacheStats().Misses
	objs, err := c.List()
	if err != nil || len(objs) != n {
		t.Fatalf("List = %d objects, %v", len(objs), err)
	}
	if got := c.CacheStats(); got.Objects != n || got.Misses != misses {
		t.Errorf("after the walk, List missed the cache %d times (%d objects cached); want every object served from the walk's cache", got.Misses-misses, got.Objects)
	}
}
