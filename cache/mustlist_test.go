package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// heldLists is a source whose lists fail until release is called; watches
// and limit=1 reads (a caught-up sync's probe) pass. It holds a relist back
// for as long as a test needs.
type heldLists struct {
	noWatchList
	mu       sync.Mutex
	released bool
}

func (h *heldLists) List(opts metav1.ListOptions) (runtime.Object, error) {
	h.mu.Lock()
	released := h.released
	h.mu.Unlock()
	if !released && !(opts.Limit == 1 && opts.ResourceVersion == "") {
		return nil, errors.New("list held back by the test")
	}
	return h.noWatchList.List(opts)
}

func (h *heldLists) release() {
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
}

// unreadableWarmStart leaves on f a collection "pods" listed from a, b, c
// whose record of b no longer decodes, and returns the source.
func unreadableWarmStart(t *testing.T, f *testFile) *fcache.FakeControllerSource {
	t.Helper()
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptRecord(t, f.path, "pods", "ns/b")
	f.open()
	return src
}

// onSetAside makes the informer's watch error handler call fn, once, when
// the informer reports that it set stored state aside and relists. The
// report is made before the informer stops its first watch, so fn can still
// have an event applied through it.
func onSetAside(fn func(inf *bcache.Informer)) func(*bcache.Informer) {
	var once sync.Once
	return func(inf *bcache.Informer) {
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if strings.Contains(err.Error(), "set aside") {
				once.Do(func() { fn(inf) })
			}
		}); err != nil {
			panic(err)
		}
	}
}

// listResult is what a lister's List did: returned objects or panicked.
type listResult struct {
	keys  []string
	panic any
}

func listAsync(s cache.Store) <-chan listResult {
	out := make(chan listResult, 1)
	go func() {
		var res listResult
		defer func() {
			res.panic = recover()
			out <- res
		}()
		for _, obj := range s.List() {
			k, _ := cache.MetaNamespaceKeyFunc(obj)
			res.keys = append(res.keys, k+"@"+obj.(metav1.Object).GetResourceVersion())
		}
	}()
	return out
}

// A warm start that cannot read a stored record sets aside what its
// handlers were not given and relists. Until that list is applied, the
// store lacks what was set aside. The informer may have reported synced
// meanwhile. A lister must not return the rest as the complete set. A
// controller would act on the missing objects as deleted. List waits for
// the relist, and then returns everything. A Get of a set-aside key waits
// too.
func TestReadErrorListWaitsForTheRelist(t *testing.T) {
	f := newTestFile(t)
	src := unreadableWarmStart(t, f)
	lw := &heldLists{noWatchList: noWatchList{src}}
	setAside := make(chan struct{})
	r := startInformer(t, f, lw, bcache.Persistence{}, nil, onSetAside(func(*bcache.Informer) { close(setAside) }))
	select {
	case <-setAside:
	case <-time.After(30 * time.Second):
		t.Fatal("the unreadable record was not reported")
	}

	want := sourceState(t, src)
	listed := listAsync(r.inf.GetStore())
	got := make(chan bool, 1)
	go func() {
		_, ok, err := r.inf.GetIndexer().GetByKey("ns/b")
		got <- ok && err == nil
	}()
	var early *listResult
	poll.Until(t, 30*time.Second, "List and GetByKey to wait or return", func() bool {
		select {
		case res := <-listed:
			early = &res
			return true
		default:
			return bcache.ListWaitersForTest(r.inf) == 2
		}
	})
	if early != nil {
		t.Fatalf("List returned %v (panic %v) while the relist was held back; want it to wait for the relist (the store lacks what was set aside)", sorted(early.keys), early.panic)
	}
	lw.release()
	select {
	case res := <-listed:
		if res.panic != nil || fmt.Sprint(sorted(res.keys)) != fmt.Sprint(want) {
			t.Errorf("List after the relist = %v (panic %v), want %v", sorted(res.keys), res.panic, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("List did not return after the relist was applied")
	}
	if ok := <-got; !ok {
		t.Error("GetByKey(ns/b) after the relist: not found")
	}
}

// The relist after a read error is owed until a list has been applied,
// across restarts. Here a watch event is applied after the set-aside, which
// writes a valid resourceVersion back. The informer stops before the relist
// lands. A lister then refuses to list, since the store is incomplete and
// nothing will complete it. The next start lists instead of resuming from a
// file without the set-aside objects. It lists twice here, as the first
// restart stops before its list too. Its HasSynced waits for that list.
func TestReadErrorStopBeforeRelistListsAtNextStart(t *testing.T) {
	f := newTestFile(t)
	src := unreadableWarmStart(t, f)
	lw := &heldLists{noWatchList: noWatchList{src}}
	applied := make(chan struct{})
	r1 := startInformer(t, f, lw, bcache.Persistence{}, nil, onSetAside(func(inf *bcache.Informer) {
		defer close(applied)
		src.Add(pod("ns", "d", "", nil))
		if err := poll.Wait(30*time.Second, func() bool { return inf.Indexer().Collection().ResourceVersion() == "4" }); err != nil {
			t.Errorf("the watch event after the set-aside was not applied: %v", err)
		}
	}))
	select {
	case <-applied:
	case <-time.After(30 * time.Second):
		t.Fatal("the unreadable record was not reported")
	}
	listed := listAsync(r1.inf.GetStore())
	r1.stop()
	if res := <-listed; res.panic == nil {
		t.Errorf("List on an informer that stopped before relisting = %v; want a panic, never the partial set", sorted(res.keys))
	} else if err, ok := res.panic.(error); !ok || !errors.Is(err, bcache.ErrIncomplete) {
		t.Errorf("List panicked with %v, want an error wrapping ErrIncomplete", res.panic)
	}
	if _, exists, err := r1.inf.GetIndexer().GetByKey("ns/b"); !errors.Is(err, bcache.ErrIncomplete) {
		t.Errorf("GetByKey(ns/b), set aside, after the stop = exists %v, %v; want ErrIncomplete", exists, err)
	}
	if obj, exists, err := r1.inf.GetIndexer().GetByKey("ns/d"); !exists || err != nil {
		t.Errorf("GetByKey(ns/d), stored, after the stop = %v, %v, %v; want it found", obj, exists, err)
	}
	f.reopen()

	// First restart: the list is held back again and the informer stops.
	r := startInformer(t, f, &heldLists{noWatchList: noWatchList{src}}, bcache.Persistence{}, nil, nil)
	poll.Until(t, 30*time.Second, "a list attempted, or a sync", func() bool {
		select {
		case err := <-r.errs:
			return strings.Contains(err.Error(), "held back")
		default:
			return r.inf.HasSynced()
		}
	})
	if r.inf.HasSynced() {
		t.Errorf("synced with %v (starts %v) before the owed list was applied", storeState(r.inf.Indexer()), r.obs.starts())
	}
	r.stop()
	f.reopen()

	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("synced with %v, want %v: the start resumed from a file that lacks what was set aside", got, want)
	}
	if starts := r.starts(t); starts[0] == "resumed" {
		t.Errorf("starts = %v; the owed list must come before any watch", starts)
	}
	r.ev.waitFor(t, 4, "every object once")
	if got := fmt.Sprint(sorted(r.ev.list())); got != "[add ns/a@1 initial=false add ns/b@2 initial=false add ns/c@3 initial=false add ns/d@4 initial=true]" {
		t.Errorf("events = %s; want the stored object as an initial add and the listed ones it lacked as adds", got)
	}
	if r.inf.Indexer().Collection().MustList() {
		t.Error("the collection still owes a list after one was applied")
	}
}
