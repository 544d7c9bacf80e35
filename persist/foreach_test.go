package persist_test

import (
	"path/filepath"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
)

// ForEach over an unbounded cache decodes as it walks. Its first callback
// comes after a few chunks are decoded, not after the whole collection. A
// warm start hands objects to its handlers from this walk. It visits every
// key once, in order. A List afterwards is served from the objects the walk
// cached.
func TestForEachDecodesAsItWalks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	const n = 3000
	keys := writePods(t, path, n)
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

// A walk may run while a List completes the unbounded cache, both under the
// collection's read lock. It still visits every key. A key the walk looked
// up before the List cached it is read from the cache, not dropped as
// absent.
func TestForEachBesideFirstList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	const n = 2000
	writePods(t, path, n)
	for round := 0; round < 30; round++ {
		db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		c, err := db.Collection("pods", persist.CollectionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		listed := make(chan int, 1)
		go func() {
			objs, _ := c.List()
			listed <- len(objs)
		}()
		visited := 0
		if err := c.ForEach(func(string, runtime.Object) error { visited++; return nil }); err != nil {
			t.Fatal(err)
		}
		if got := <-listed; got != n || visited != n {
			t.Fatalf("round %d: the walk visited %d keys and the List returned %d objects, want %d each", round, visited, got, n)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// writePods stores n fixture Pods in a "pods" collection of a new file at
// path, closes it (so a reopened collection has nothing decoded) and
// returns their keys.
func writePods(t *testing.T, path string, n int) []string {
	t.Helper()
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("pods", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, n)
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
	return keys
}

// The walk's keys are the file's merged with the unwritten layers. The file
// pass reads a transaction begun with a copy of the layers' keys. Keys
// deleted in a layer are not visited. Keys created or changed in one are,
// each once and in order. A change applied while the walk runs does not
// break it.
func TestForEachMergesUnwrittenChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	const n = 1000
	keys := writePods(t, path, n)
	db := openDB(t, path, persist.Options{BatchInterval: time.Hour, BatchLimit: 1 << 20})
	c, err := db.Collection("pods", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Unwritten: the first 10 deleted, the next 10 changed, 10 created.
	want := map[string]bool{}
	for _, k := range keys[10:] {
		want[k] = true
	}
	var ops []persist.Op
	for _, k := range keys[:10] {
		ops = append(ops, persist.Op{Key: k, Delete: true})
	}
	for i := 10; i < 20; i++ {
		p := fixture.Pod(i)
		p.Labels = map[string]string{"changed": "yes"}
		ops = append(ops, persist.Op{Key: keys[i], Object: p})
	}
	for i := n; i < n+10; i++ {
		p := fixture.Pod(i)
		k := p.Namespace + "/" + p.Name
		want[k] = true
		ops = append(ops, persist.Op{Key: k, Object: p})
	}
	if err := c.Apply(ops, "2"); err != nil {
		t.Fatal(err)
	}
	during := fixture.Pod(n + 100) // applied during the walk: may be seen or not
	duringKey := during.Namespace + "/" + during.Name
	var visited []string
	err = c.ForEach(func(key string, _ runtime.Object) error {
		if len(visited) == 0 {
			if err := c.Apply([]persist.Op{{Key: duringKey, Object: during}}, "3"); err != nil {
				return err
			}
		}
		visited = append(visited, key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sort.StringsAreSorted(visited) {
		t.Error("keys not visited in order")
	}
	seen := map[string]bool{}
	for _, k := range visited {
		if seen[k] {
			t.Errorf("%s visited twice", k)
		}
		seen[k] = true
		if !want[k] && k != duringKey {
			t.Errorf("%s visited, but it was not stored (deleted before the walk?)", k)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("%s not visited", k)
		}
	}
}
