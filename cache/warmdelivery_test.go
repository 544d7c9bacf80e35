package cache_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// A warm start hands out the stored state. Here it is held up inside the
// verification of stored index entries, which calls the index functions.
// Meanwhile the informer is synced and serves its store. Index lookups wait
// for the verification, and the informer's other methods return at once. A
// handler added meanwhile gets the stored state exactly once. A handler
// removed meanwhile gets nothing more. For every key the initial add
// precedes the watch's events.
func TestWarmStartDeliveryHoldsNoInformerLock(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	indexers := cache.Indexers{"block": func(obj interface{}) ([]string, error) {
		if armed.Load() {
			once.Do(func() { close(entered) })
			<-release
		}
		return nil, nil
	}}
	populate(t, f, src, bcache.Persistence{}, indexers, nil)

	removedEv := &events{}
	var removed cache.ResourceEventHandlerRegistration
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, indexers, func(inf *bcache.Informer) {
		var err error
		if removed, err = inf.AddEventHandler(removedEv.handler()); err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
	})
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the warm start never called the index functions (stored index entries are not verified)")
	}

	joinerEv := &events{}
	calls := map[string]func() error{
		"IsStopped":               func() error { r.inf.IsStopped(); return nil },
		"HasStarted":              func() error { r.inf.HasStarted(); return nil },
		"LastSyncResourceVersion": func() error { r.inf.LastSyncResourceVersion(); return nil },
		"AddIndexers":             func() error { return r.inf.AddIndexers(cache.Indexers{"v": byLabel("v")}) },
		"RemoveEventHandler":      func() error { return r.inf.RemoveEventHandler(removed) },
		"AddEventHandler":         func() error { _, err := r.inf.AddEventHandler(joinerEv.handler()); return err },
	}
	var wg sync.WaitGroup
	results := make(chan string, len(calls))
	for name, call := range calls {
		wg.Go(func() {
			if err := call(); err != nil {
				results <- fmt.Sprintf("%s: %v", name, err)
				return
			}
			results <- name
		})
	}
	returned := make(chan struct{})
	go func() { wg.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("informer methods blocked while the warm start was delivering")
	}
	close(results)
	for res := range results {
		if strings.Contains(res, ":") {
			t.Error(res)
		}
	}
	// Synced at open: the store is the file, complete before a single
	// stored object reaches a handler; the handler's own registration syncs
	// once it has handled its initial adds.
	r.synced(t)
	if r.reg.HasSynced() {
		t.Error("the handler's registration synced before its initial adds were handed out")
	}
	if got := r.inf.GetStore().ListKeys(); fmt.Sprint(sorted(got)) != "[ns/a ns/b ns/c]" {
		t.Errorf("lister during the delivery: keys %v, want the stored [ns/a ns/b ns/c]", got)
	}
	// Index lookups wait until the stored index entries are verified.
	var released atomic.Bool
	lookup, looking := make(chan error, 1), make(chan struct{})
	go func() {
		close(looking)
		_, err := r.inf.GetIndexer().ByIndex("block", "x")
		if err == nil && !released.Load() {
			err = fmt.Errorf("ByIndex returned while the stored index entries were still being verified")
		}
		lookup <- err
	}()
	<-looking
	released.Store(true)
	close(release)
	if err := <-lookup; err != nil {
		t.Error(err)
	}
	r.handled(t)
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))

	want := "[add ns/a@1 initial=true add ns/b@2 initial=true add ns/c@3 initial=true update ns/a@1 -> ns/a@4]"
	for name, ev := range map[string]*events{"registered before Run": r.ev, "joined during delivery": joinerEv} {
		poll.Until(t, 10*time.Second, name+" update", func() bool { return len(ev.list()) >= 4 })
		got := ev.list()
		adds := sorted(got[:min(3, len(got))])
		if fmt.Sprint(append(adds, got[3:]...)) != want {
			t.Errorf("%s: events %v, want %s", name, got, want)
		}
	}
	if got := removedEv.list(); len(got) != 0 {
		t.Errorf("handler removed before anything was delivered got %v", got)
	}
	if got, err := r.inf.GetIndexer().ByIndex("v", "2"); err != nil || len(got) != 1 {
		t.Errorf("index added during delivery: ByIndex(v, 2) = %v, %v", names(got), err)
	}
}

// gatedLW holds full lists until gate is closed; the consistent limit=1
// read a warm start catches up to goes through.
type gatedLW struct {
	noWatchList
	gate chan struct{}
}

func (g gatedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit != 1 {
		<-g.gate
	}
	return g.noWatchList.List(opts)
}

// After a warm start, updates that do not change the resourceVersion reach
// exactly the handlers with a resync period. A relist after 410 gives such
// updates for unchanged objects. The handlers may have been added before
// Run or after.
func TestWarmStartResyncRuleSameForLateJoiners(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	src.ResetWatch() // the stored resourceVersion is gone: the informer relists
	src.Add(pod("ns", "z", "", nil))

	gate := make(chan struct{})
	// The informer's default resync period is an hour: handlers added with
	// AddEventHandler resync, those added with period 0 do not. Synced at
	// open, so that handlers join while the relist is held (a caught-up
	// sync waits for the relist).
	early := &events{}
	r := startInformerOpts(t, f, gatedLW{noWatchList{src}, gate}, bcache.InformerOptions{ResyncPeriod: time.Hour, SyncedAtOpen: true}, func(inf *bcache.Informer) {
		if _, err := inf.AddEventHandlerWithResyncPeriod(early.handler(), 0); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	late, lateResync := &events{}, &events{}
	if _, err := r.inf.AddEventHandlerWithResyncPeriod(late.handler(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.inf.AddEventHandler(lateResync.handler()); err != nil {
		t.Fatal(err)
	}
	close(gate)

	handlers := []struct {
		name      string
		ev        *events
		resyncing bool
	}{
		{"before Run, no resync", early, false},
		{"before Run, resync", r.ev, true},
		{"late, no resync", late, false},
		{"late, resync", lateResync, true},
	}
	for _, h := range handlers {
		// The relist's add of z, and a resyncing handler's two updates,
		// which may come after it: wait for both, so that a loaded machine
		// does not fail the comparison below. A missing update still does,
		// once the wait gives up.
		relisted := func() bool {
			added, updates := false, 0
			for _, e := range h.ev.list() {
				added = added || strings.HasPrefix(e, "add ns/z@")
				if strings.HasPrefix(e, "update ") {
					updates++
				}
			}
			return added && (!h.resyncing || updates >= 2)
		}
		_ = poll.Wait(10*time.Second, relisted) // a timeout is judged below
		if !slices.ContainsFunc(h.ev.list(), func(e string) bool { return strings.HasPrefix(e, "add ns/z@") }) {
			t.Errorf("handler %s: no add of ns/z from the relist: %v", h.name, h.ev.list())
		}
		var syncs []string
		for _, e := range h.ev.list() {
			if strings.HasPrefix(e, "update ") {
				syncs = append(syncs, e)
			}
		}
		want := "[]"
		if h.resyncing {
			want = "[update ns/a@1 -> ns/a@1 update ns/b@2 -> ns/b@2]"
		}
		if fmt.Sprint(sorted(syncs)) != want {
			t.Errorf("handler %s: unchanged-resourceVersion updates %v, want %s", h.name, syncs, want)
		}
	}
}
