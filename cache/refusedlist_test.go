package cache_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// refusingIndexers holds one index function, which refuses the pods
// labelled refuse=yes, as a user's function may refuse an object it cannot
// handle.
func refusingIndexers() cache.Indexers {
	return cache.Indexers{"picky": func(obj interface{}) ([]string, error) {
		if obj.(*corev1.Pod).Labels["refuse"] == "yes" {
			return nil, errors.New("picky refuses the pod")
		}
		return []string{"x"}, nil
	}}
}

var refuse = map[string]string{"refuse": "yes"}

// A list holding an object the index function refuses is applied without
// that object, as a watch event of it would be. The object is left out of
// the store and of the notifications. Dropping the whole list instead would
// leave a cold start synced with an empty store. A controller reads that as
// every object deleted.
func TestColdListWithARefusedObjectStoresTheRest(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	src.Add(pod("ns", "r", "", refuse))
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, refusingIndexers(), nil)
	r.synced(t)
	want := []string{"ns/a@1", "ns/b@2"}
	if got := storeState(r.inf.GetStore()); !eq(got, want) {
		t.Errorf("synced with %v, want %v: the list without the pod the index function refuses", got, want)
	}
	r.ev.waitFor(t, 2, "the adds of a and b")
	for _, e := range r.ev.list() {
		if strings.Contains(e, "ns/r") {
			t.Errorf("the handler was told %q of the pod the store refused", e)
		}
	}
}

// A warm start whose collection owes a list (its journal was set aside)
// makes listers wait for that list. When the list held an object the index
// function refuses, the list was dropped: the informer never synced, and
// List waited for ever. The list is now applied without that object, which
// pays what the store owed.
func TestOwedListWithARefusedObjectIsPaid(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, refusingIndexers(), nil) // the list: into the trees
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, refusingIndexers(), nil)
	r.synced(t)
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))
	poll.Until(t, 10*time.Second, "the watch event", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	r.stop()
	if err := f.db.Close(); err != nil { // the event: into the journal
		t.Fatal(err)
	}
	corruptJournal(t, f.path, "pods")
	f.open()
	src.Add(pod("ns", "r", "", refuse))
	src.Delete(pod("ns", "c", "", nil))

	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, refusingIndexers(), nil)
	select {
	case <-r.inf.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the informer did not sync: the list it owed was not applied (starts %v)", r.obs.starts())
	}
	listed := listAsync(r.inf.GetStore())
	select {
	case res := <-listed:
		if want := []string{"ns/a@4", "ns/b@2"}; res.panic != nil || !eq(sorted(res.keys), want) {
			t.Errorf("List = %v (panic %v), want %v", sorted(res.keys), res.panic, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("List waits for a list that was applied")
	}
}

// TestListsWithRefusedObjectsRandomized is a generator of the class above.
// It runs every kind of list the store applies. Those are a cold start's,
// the list a warm start owes after its journal was set aside, and the
// relist after a 410. The index function refuses objects at random, new
// objects and new versions of stored ones alike. After the list the store
// holds the server's object for each key. Where the index function refuses
// it, the store holds what it held before, since a refused write applies
// nothing. No handler is told of a version the store refused.
func TestListsWithRefusedObjectsRandomized(t *testing.T) {
	for seed := range 24 {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runRefusedList(t, uint64(seed)) })
	}
}

func runRefusedList(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x4ef05ed))
	kind := []string{"cold", "owed", "gone"}[rng.IntN(3)]
	labels := func() map[string]string {
		if rng.IntN(3) == 0 {
			return refuse
		}
		return map[string]string{"v": fmt.Sprint(rng.IntN(1000))}
	}
	f := newTestFile(t)
	src := fcache.NewFakeControllerSource()
	n := 3 + rng.IntN(5)
	for i := range n {
		l := labels()
		if kind != "cold" {
			l = nil // populate stores them all
		}
		src.Add(pod("ns", fmt.Sprintf("p%d", i), "", l))
	}
	var before map[string]string // key -> rv the store holds before the list
	var lw cache.ListerWatcher = noWatchList{src}
	if kind != "cold" {
		populate(t, f, src, bcache.Persistence{}, refusingIndexers(), nil)
		before = stateMap(sourceState(t, src))
		if kind == "owed" {
			r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, refusingIndexers(), nil)
			r.synced(t)
			src.Modify(pod("ns", "p0", "", nil))
			poll.Until(t, 10*time.Second, "the watch event", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
			r.stop()
			if err := f.db.Close(); err != nil {
				t.Fatal(err)
			}
			corruptJournal(t, f.path, "pods") // the store goes back to the list
			f.open()
		} else {
			lw = &goneOnce{noWatchList: noWatchList{src}}
		}
		// Changes while the informer is down, which the list brings.
		for i := range n + 2 {
			name := fmt.Sprintf("p%d", i)
			switch rng.IntN(4) {
			case 0, 1:
				if i < n {
					src.Modify(pod("ns", name, "", labels()))
				} else {
					src.Add(pod("ns", name, "", labels()))
				}
			case 2:
				if i < n {
					src.Delete(pod("ns", name, "", nil))
				}
			}
		}
	}
	list, err := src.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	refused := map[string]bool{} // key@rv of the versions refused
	for _, item := range list.(*corev1.List).Items {
		obj := item.Object.(*corev1.Pod)
		key := obj.Namespace + "/" + obj.Name
		if obj.Labels["refuse"] != "yes" {
			want = append(want, key+"@"+obj.ResourceVersion)
			continue
		}
		refused[key+"@"+obj.ResourceVersion] = true
		if rv, ok := before[key]; ok {
			want = append(want, key+"@"+rv)
		}
	}
	want = sorted(want)

	r := startInformer(t, f, lw, bcache.Persistence{}, refusingIndexers(), nil)
	r.synced(t)
	var got []string
	if err := poll.Wait(30*time.Second, func() bool {
		got = storeState(r.inf.GetStore())
		return eq(got, want)
	}); err != nil {
		t.Fatalf("seed %d (%s list): the store holds %v, want %v (refused %v; before the list %v)", seed, kind, got, want, refused, before)
	}
	r.stop()
	t.Logf("%s list: %v, refused %v", kind, got, sortedKeys(refused))
	for _, e := range r.ev.list() {
		for kv := range refused {
			if strings.Contains(e, " "+kv) {
				t.Errorf("seed %d (%s list): the handler was told %q, a version the store refused", seed, kind, e)
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}

// stateMap turns storeState's key@rv strings into a map.
func stateMap(state []string) map[string]string {
	m := map[string]string{}
	for _, s := range state {
		key, rv, _ := strings.Cut(s, "@")
		m[key] = rv
	}
	return m
}
