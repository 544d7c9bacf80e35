package cache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// seedBeforeRun writes to inf's store before it runs, as controller unit
// tests seed listers, and returns what the store and a typed lister then
// read.
func seedBeforeRun(t *testing.T, inf cache.SharedIndexInformer) string {
	t.Helper()
	idx, store := inf.GetIndexer(), inf.GetStore()
	for _, err := range []error{
		idx.Add(pod("ns", "x", "7", nil)),
		idx.Add(pod("ns", "y", "8", nil)),
		idx.Update(pod("ns", "x", "9", map[string]string{"app": "web"})),
		idx.Delete(pod("ns", "y", "8", nil)),
		store.Add(pod("ns", "a", "5", map[string]string{"app": "web"})), // a key the cluster has
		store.Add(pod("other", "z", "6", nil)),
	} {
		if err != nil {
			t.Fatalf("seeding: %v", err)
		}
	}
	var out []string
	add := func(what string, v any) { out = append(out, fmt.Sprintf("%s=%v", what, v)) }
	add("store", storeState(store))
	add("keys", sorted(idx.ListKeys()))
	obj, exists, err := idx.GetByKey("ns/x")
	add("getByKey(ns/x)", fmt.Sprint(exists, err, eventKeyOrNil(obj)))
	_, exists, err = store.Get(pod("ns", "y", "", nil))
	add("get(ns/y)", fmt.Sprint(exists, err))
	byNS, err := idx.ByIndex(cache.NamespaceIndex, "ns")
	add("byIndex(ns)", fmt.Sprint(names(byNS), err))
	add("indexValues", sorted(idx.ListIndexFuncValues(cache.NamespaceIndex)))
	lister := corev1listers.NewPodLister(idx)
	p, err := lister.Pods("ns").Get("x")
	if err != nil {
		add("lister.get(ns/x)", err)
	} else {
		add("lister.get(ns/x)", p.ResourceVersion)
	}
	_, err = lister.Pods("ns").Get("y")
	add("lister.get(ns/y)", err)
	web, err := lister.Pods("ns").List(labels.SelectorFromSet(labels.Set{"app": "web"}))
	add("lister.list(ns, app=web)", fmt.Sprint(len(web), err))
	all, err := lister.List(labels.Everything())
	add("lister.list", fmt.Sprint(len(all), err))
	add("rv", store.LastStoreSyncResourceVersion())
	return strings.Join(out, "\n")
}

func eventKeyOrNil(obj interface{}) string {
	if obj == nil {
		return "<nil>"
	}
	return eventKey(obj)
}

// What a test writes to an informer's store before Run reads back as it
// does from client-go's informer. It reads back through GetIndexer,
// GetStore and a typed lister. That holds even though the informer's file
// holds a warm collection. Run then starts cold and lists. The seeded
// objects are not the cluster's, and the stored collection is not resumed.
// The list replaces the seeded objects exactly as client-go's first list
// does, with the same handler calls.
func TestListersBeforeRunMatchClientGo(t *testing.T) {
	f := newTestFile(t)
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{}, indexers, nil)
	src.Add(pod("ns", "c", "", nil))

	cg := cache.NewSharedIndexInformer(noWatchList{src}, &corev1.Pod{}, 0, indexers)
	want := seedBeforeRun(t, cg)
	var got string
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, indexers, func(inf *bcache.Informer) { got = seedBeforeRun(t, inf) })
	if got != want {
		t.Errorf("reads after seeding, before Run:\n%s\nclient-go's:\n%s", got, want)
	}

	cgEv := &events{}
	if _, err := cg.AddEventHandler(cgEv.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg wait.Group
	defer wg.Wait()
	defer cancel()
	wg.StartWithContext(ctx, cg.RunWithContext)

	r.synced(t)
	if !cache.WaitForCacheSync(ctx.Done(), cg.HasSynced) {
		t.Fatal("client-go's informer did not sync")
	}
	wantStore := sourceState(t, src)
	for name, s := range map[string]cache.Store{"ours": r.inf.GetStore(), "client-go's": cg.GetStore()} {
		if got := storeState(s); fmt.Sprint(got) != fmt.Sprint(wantStore) {
			t.Errorf("%s store after sync = %v, want the cluster's %v", name, got, wantStore)
		}
	}
	if starts := r.starts(t); fmt.Sprint(starts) != "[cold]" {
		t.Errorf("starts = %v, want [cold]: a store written to before Run is not the stored collection", starts)
	}
	// Five calls each: b and c added, a updated from its seeded state, x
	// and z deleted as not listed.
	cgEv.waitFor(t, 5, "client-go's first list")
	r.ev.waitFor(t, 5, "our first list")
	poll.Until(t, 10*time.Second, "same handler calls", func() bool {
		return fmt.Sprint(sorted(r.ev.list())) == fmt.Sprint(sorted(cgEv.list()))
	})
	if g, w := sorted(r.ev.list()), sorted(cgEv.list()); fmt.Sprint(g) != fmt.Sprint(w) {
		t.Errorf("handler calls = %v, client-go's = %v", g, w)
	}

	// The file holds the cluster's list, not the seeded objects.
	r.stop()
	f.reopen()
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, indexers, nil)
	r.synced(t)
	if got := storeState(r.inf.GetStore()); fmt.Sprint(got) != fmt.Sprint(wantStore) {
		t.Errorf("restarted store = %v, want %v", got, wantStore)
	}
	if starts := r.starts(t); fmt.Sprint(starts) != "[resumed]" {
		t.Errorf("restart starts = %v, want [resumed]", starts)
	}
}

// An informer that nobody writes to before Run still resumes its stored
// collection: reading before Run (empty, as before the provenance check)
// does not count as seeding.
func TestReadsBeforeRunDoNotPreventWarmStart(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		if got := inf.GetStore().List(); len(got) != 0 {
			t.Errorf("List before Run = %v, want empty (nothing stored is served before the provenance check)", names(got))
		}
		if _, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns"); err == nil {
			t.Error("ByIndex on an index the informer lacks: no error")
		}
	})
	r.synced(t)
	if starts := r.starts(t); fmt.Sprint(starts) != "[resumed]" {
		t.Errorf("starts = %v, want [resumed]", starts)
	}
}
