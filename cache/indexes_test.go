package cache_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/persist"
)

func TestAddIndexersBuildsOverStoredObjects(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{}
	store := f.indexer(opts)
	for _, p := range []*corev1.Pod{
		pod("ns", "a", "1", map[string]string{"app": "web"}),
		pod("ns", "b", "2", map[string]string{"app": "db"}),
	} {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	f.flush()
	// Still in memory only: the build must see it.
	if err := store.Add(pod("ns", "c", "3", map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	if err := store.AddIndexers(cache.Indexers{"byApp": byLabel("app")}); err != nil {
		t.Fatal(err)
	}
	if err := store.AddIndexers(cache.Indexers{"byApp": byLabel("app")}); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Errorf("second AddIndexers with the same name: %v, want a conflict", err)
	}
	if _, ok := store.GetIndexers()["byApp"]; !ok {
		t.Error("GetIndexers lacks the added index")
	}
	if keys, err := store.IndexKeys("byApp", "web"); err != nil || !eq(keys, []string{"ns/a", "ns/c"}) {
		t.Errorf("IndexKeys(web) = %v %v", keys, err)
	}
	// The index is kept on disk: reopening with the same indexer reuses it.
	opts.Indexers = cache.Indexers{"byApp": byLabel("app")}
	atEachStage(t, f, opts, &store, func(t *testing.T, s stage) {
		if keys, err := store.IndexKeys("byApp", "db"); err != nil || !eq(keys, []string{"ns/b"}) {
			t.Errorf("%s: IndexKeys(db) = %v %v", s, keys, err)
		}
	})
}

func TestAddIndexersFailureAddsNothing(t *testing.T) {
	f := newTestFile(t)
	store := f.indexer(bcache.IndexerOptions{})
	for _, name := range []string{"a", "b", "c"} {
		if err := store.Add(pod("ns", name, "1", map[string]string{"app": name})); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	err := store.AddIndexers(cache.Indexers{
		"good": byLabel("app"),
		"bad": func(obj interface{}) ([]string, error) {
			if obj.(*corev1.Pod).Name == "b" {
				return nil, boom
			}
			return []string{"x"}, nil
		},
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "ns/b") {
		t.Fatalf("AddIndexers error = %v, want boom naming ns/b", err)
	}
	if len(store.GetIndexers()) != 0 {
		t.Errorf("indexers after failed AddIndexers: %v", store.GetIndexers())
	}
	if _, err := store.IndexKeys("good", "a"); err == nil {
		t.Error("index from a failed AddIndexers is queryable")
	}
	// And the store still works, including adding the good index alone.
	if err := store.AddIndexers(cache.Indexers{"good": byLabel("app")}); err != nil {
		t.Fatal(err)
	}
	if keys, _ := store.IndexKeys("good", "b"); !eq(keys, []string{"ns/b"}) {
		t.Errorf("good[b] = %v", keys)
	}
}

// Indexes are code: reopening with a changed index function must never serve
// the old function's entries.
func TestChangedIndexIsRebuiltOnOpen(t *testing.T) {
	f := newTestFile(t)
	byApp := byLabel("app")
	byTeam := byLabel("team")
	store := f.indexer(bcache.IndexerOptions{Indexers: cache.Indexers{"owner": byApp}})
	if err := store.Add(pod("ns", "a", "1", map[string]string{"app": "web", "team": "blue"})); err != nil {
		t.Fatal(err)
	}
	f.reopen()

	t.Run("same name and version, same function: reused", func(t *testing.T) {
		store = f.indexer(bcache.IndexerOptions{Indexers: cache.Indexers{"owner": byApp}})
		if keys, _ := store.IndexKeys("owner", "web"); !eq(keys, []string{"ns/a"}) {
			t.Errorf("owner[web] = %v", keys)
		}
		f.reopen()
	})
	t.Run("declared version bumped: rebuilt", func(t *testing.T) {
		// byLabel returns closures with one Go name, so only the version
		// tells the two functions apart.
		store = f.indexer(bcache.IndexerOptions{
			Indexers:      cache.Indexers{"owner": byTeam},
			IndexVersions: map[string]string{"owner": "team-v2"},
		})
		if keys, _ := store.IndexKeys("owner", "blue"); !eq(keys, []string{"ns/a"}) {
			t.Errorf("owner[blue] = %v", keys)
		}
		if keys, _ := store.IndexKeys("owner", "web"); len(keys) != 0 {
			t.Errorf("stale entry served: owner[web] = %v", keys)
		}
		f.reopen()
	})
	t.Run("function with another Go name: rebuilt without a version bump", func(t *testing.T) {
		store = f.indexer(bcache.IndexerOptions{
			Indexers:      cache.Indexers{"owner": cache.MetaNamespaceIndexFunc},
			IndexVersions: map[string]string{"owner": "team-v2"},
		})
		if keys, _ := store.IndexKeys("owner", "ns"); !eq(keys, []string{"ns/a"}) {
			t.Errorf("owner[ns] = %v", keys)
		}
		if keys, _ := store.IndexKeys("owner", "blue"); len(keys) != 0 {
			t.Errorf("stale entry served: owner[blue] = %v", keys)
		}
		f.reopen()
	})
	t.Run("index removed: dropped", func(t *testing.T) {
		store = f.indexer(bcache.IndexerOptions{})
		if _, err := store.IndexKeys("owner", "ns"); err == nil {
			t.Error("removed index still answers")
		}
		if got := store.Collection().Indexes(); len(got) != 0 {
			t.Errorf("collection still lists indexes %v", got)
		}
	})
}

func TestReplaceRewritesOnlyChangedObjects(t *testing.T) {
	f := newTestFile(t)
	var mu sync.Mutex
	var commits []persist.CommitStats
	f.db.AddCommitObserver(func(s persist.CommitStats) {
		mu.Lock()
		commits = append(commits, s)
		mu.Unlock()
	})
	store := f.indexer(bcache.IndexerOptions{})
	var list []interface{}
	for n := 0; n < 100; n++ {
		list = append(list, configMap("ns", "cm"+string(rune('a'+n%26))+string(rune('a'+n/26)), "5", nil))
	}
	if err := store.Replace(list, "10"); err != nil {
		t.Fatal(err)
	}
	f.flush()
	// Relist: 97 unchanged (fresh copies, same RV), one changed, one new, two gone.
	var relist []interface{}
	for n, obj := range list[:98] {
		cm := obj.(*corev1.ConfigMap).DeepCopy()
		if n == 0 {
			cm.ResourceVersion = "11"
			cm.Data = map[string]string{"changed": "yes"}
		}
		relist = append(relist, cm)
	}
	relist = append(relist, configMap("ns", "new", "12", nil))
	mu.Lock()
	commits = nil
	mu.Unlock()
	if err := store.Replace(relist, "20"); err != nil {
		t.Fatal(err)
	}
	f.flush()
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, c := range commits {
		total += c.Changes
	}
	if total != 4 {
		t.Errorf("relist wrote %d changes, want 4 (1 changed, 1 new, 2 deleted)", total)
	}
	if n := len(store.ListKeys()); n != 99 {
		t.Errorf("%d keys after relist, want 99", n)
	}
	if item, _, _ := store.GetByKey("ns/cmaa"); item.(*corev1.ConfigMap).Data["changed"] != "yes" {
		t.Error("changed object not rewritten")
	}
	if rv, _ := store.Collection().CommittedResourceVersion(); rv != "20" {
		t.Errorf("committed RV = %q, want 20", rv)
	}
}

// Concurrent readers and a writer, with commits in between, under -race.
func TestConcurrentReadersAndWriter(t *testing.T) {
	f := newTestFile(t)
	store := f.indexer(bcache.IndexerOptions{
		Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		CacheObjects: 16,
	})
	const writes = 1000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch r {
				case 0:
					for _, obj := range store.List() {
						if obj.(*corev1.ConfigMap).Namespace == "" {
							t.Error("List returned an object without namespace")
							return
						}
					}
				case 1:
					if _, err := store.ByIndex(cache.NamespaceIndex, "ns1"); err != nil {
						t.Error(err)
						return
					}
				case 2:
					_, _, _ = store.GetByKey("ns0/cm7")
					_ = store.ListIndexFuncValues(cache.NamespaceIndex)
				case 3:
					_ = f.db.Flush(t.Context())
					time.Sleep(time.Millisecond)
				}
			}
		}(r)
	}
	for n := 0; n < writes; n++ {
		cm := configMap("ns"+string(rune('0'+n%3)), "cm"+string(rune('0'+n%10)), "", nil)
		var err error
		if n%7 == 0 {
			err = store.Delete(cm)
		} else {
			err = store.Update(cm)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	f.flush()
	model := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, nil)
	for n := 0; n < writes; n++ {
		cm := configMap("ns"+string(rune('0'+n%3)), "cm"+string(rune('0'+n%10)), "", nil)
		if n%7 == 0 {
			_ = model.Delete(cm)
		} else {
			_ = model.Update(cm)
		}
	}
	if a, b := model.ListKeys(), store.ListKeys(); !eq(a, b) {
		t.Errorf("final keys %v, want %v", b, a)
	}
}

// An index added after NewIndexer takes the version IndexerOptions declared
// for its name. A later open may pass the same function up front with the
// same declaration. It then reuses the index instead of rebuilding it.
func TestAddIndexersUsesDeclaredVersion(t *testing.T) {
	f := newTestFile(t)
	opts := bcache.IndexerOptions{IndexVersions: map[string]string{"byApp": "v2"}}
	store := f.indexer(opts)
	if err := store.Add(pod("ns", "a", "1", map[string]string{"app": "web"})); err != nil {
		t.Fatal(err)
	}
	if err := store.AddIndexers(cache.Indexers{"byApp": countedAppIndex}); err != nil {
		t.Fatal(err)
	}
	if v := store.Collection().Indexes()["byApp"]; !strings.HasPrefix(v, "v2|") {
		t.Fatalf("stored version of byApp = %q, want the declared v2", v)
	}
	f.reopen()
	countedAppIndexCalls.Store(0)
	opts.Indexers = cache.Indexers{"byApp": countedAppIndex}
	store = f.indexer(opts)
	if n := countedAppIndexCalls.Load(); n != 0 {
		t.Errorf("reopening with the declared version called the index function %d times, want 0 (reused)", n)
	}
	if keys, err := store.IndexKeys("byApp", "web"); err != nil || !eq(keys, []string{"ns/a"}) {
		t.Errorf("IndexKeys(web) after reopen = %v %v", keys, err)
	}
}

var countedAppIndexCalls atomic.Int64

// countedAppIndex indexes by the app label and counts its calls; a named
// function, so its identity is the same on every open.
func countedAppIndex(obj interface{}) ([]string, error) {
	countedAppIndexCalls.Add(1)
	return byLabel("app")(obj)
}
