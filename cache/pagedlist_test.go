package cache_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/processor"
	"github.com/boltinformer/boltinformer/recovery"
)

// pagingSource serves its FakeControllerSource's list in pages of Limit
// items in key order, as an apiserver does. The continue token is the
// offset. It records every list request. If before is set, it is called
// with the offset of every page after the first, before that page is
// served.
type pagingSource struct {
	noWatchList
	before func(offset int)

	mu       sync.Mutex
	requests []metav1.ListOptions
}

func newPagingSource(src *fcache.FakeControllerSource) *pagingSource {
	return &pagingSource{noWatchList: noWatchList{src}}
}

func (s *pagingSource) List(opts metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.requests = append(s.requests, opts)
	s.mu.Unlock()
	full, err := s.FakeControllerSource.List(metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(full)
	if err != nil {
		return nil, err
	}
	key := func(o runtime.Object) string { k, _ := cache.MetaNamespaceKeyFunc(o); return k }
	sort.Slice(items, func(i, j int) bool { return key(items[i]) < key(items[j]) })
	start := 0
	if opts.Continue != "" {
		if start, err = strconv.Atoi(opts.Continue); err != nil {
			return nil, err
		}
		if s.before != nil {
			s.before(start)
		}
	}
	end := len(items)
	next := ""
	if opts.Limit > 0 && start+int(opts.Limit) < end {
		end = start + int(opts.Limit)
		next = strconv.Itoa(end)
	}
	page := &corev1.List{}
	if err := meta.SetList(page, items[start:end]); err != nil {
		return nil, err
	}
	page.ResourceVersion = full.(*corev1.List).ResourceVersion
	page.Continue = next
	return page, nil
}

func (s *pagingSource) Requests() []metav1.ListOptions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metav1.ListOptions(nil), s.requests...)
}

func podNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%05d", i)
	}
	return out
}

// A cold list is never held whole, bounded or not: it is a consistent read
// in pages. Each page is stored while the next is asked for, so at most two
// are held. Handlers and the informer sync as after any list, and watch
// events follow.
func TestColdStartListsInPages(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cacheObjects int
	}{
		{"bounded", 5},
		{"unbounded", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFile(t)
			src := podSource(podNames(25)...)
			lw := newPagingSource(src)
			var inf atomic.Pointer[bcache.Informer]
			var held []int // written by the reflector's goroutine only, read after sync
			lw.before = func(int) {
				n, err := inf.Load().Indexer().Collection().Len()
				if err != nil {
					t.Error(err)
				}
				held = append(held, n)
			}
			r := startInformerOpts(t, f, lw, bcache.InformerOptions{Persistence: bcache.Persistence{CacheObjects: tc.cacheObjects}, PageSize: 10},
				func(i *bcache.Informer) { inf.Store(i) })
			r.synced(t)
			r.handled(t)

			want := []metav1.ListOptions{{ResourceVersion: "", Limit: 10}, {Limit: 10, Continue: "10"}, {Limit: 10, Continue: "20"}}
			if got := lw.Requests(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("list requests:\n got %+v\nwant %+v", got, want)
			}
			// Page 3 is asked for once page 1 is stored, not before.
			if len(held) != 2 || held[1] < 10 {
				t.Errorf("objects stored when pages 2 and 3 were asked for: %v, want at least [0 10]", held)
			}
			evs := r.ev.list()
			if len(evs) != 25 {
				t.Fatalf("%d handler calls, want 25 initial adds: %v", len(evs), evs)
			}
			for i, e := range evs {
				if want := fmt.Sprintf("add ns/p%05d@%d initial=true", i, i+1); e != want {
					t.Fatalf("handler call %d: %q, want %q", i, e, want)
				}
			}
			if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
				t.Errorf("store %v, want %v", got, want)
			}
			// The reflector records the list's version after the store has
			// applied it (as client-go's does), so handlers may be done
			// first.
			poll.Until(t, 10*time.Second, "LastSyncResourceVersion at the list's 25", func() bool { return r.inf.LastSyncResourceVersion() == "25" })
			src.Add(pod("ns", "late", "", nil))
			r.ev.waitFor(t, 26, "the watch's add")
			if got := r.ev.list()[25]; got != "add ns/late@26 initial=false" {
				t.Errorf("after the list: %q, want the watch's add of ns/late", got)
			}
			r.stop()
			f.reopen()
			rv, err := f.db.Collections()
			if err != nil || len(rv) != 1 || rv[0].ResourceVersion != "26" || rv[0].Objects != 26 {
				t.Errorf("file after the stop: %+v (%v), want 26 objects at resourceVersion 26", rv, err)
			}
		})
	}
}

// A bounded informer hands its initial adds out no faster than its handlers
// take them. They come from a warm start's walk of the file or a cold
// start's pages. A slow handler never has more than a pacing window and a
// chunk or page waiting. An unbounded informer hands everything out at
// once.
func TestBoundedStartPacesInitialAdds(t *testing.T) {
	// A loaded machine (-race, other packages' tests) may not run the
	// handler for a second. So never stop waiting for it here.
	t.Cleanup(bcache.SetPaceStall(time.Hour)) // runs after the informers stop
	const n = 3000
	// The slow handler's buffer may hold the pacing window and a page of
	// the list or a chunk of the walk. Some slack covers the notifications
	// in flight.
	const limit = processor.InitialBufferSize + 500 + 64
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("warm=%v", warm), func(t *testing.T) {
			f := newTestFile(t)
			src := podSource(podNames(n)...)
			p := bcache.Persistence{CacheObjects: 100}
			if warm {
				populate(t, f, src, p, nil, nil)
			}
			var reg atomic.Pointer[processor.Listener]
			var most atomic.Int64
			slow := cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) {
				if l := reg.Load(); l != nil {
					if p := l.Pending(); p > most.Load() {
						most.Store(p)
					}
				}
				for start := time.Now(); time.Since(start) < 50*time.Microsecond; {
				}
			}}
			var slowReg cache.ResourceEventHandlerRegistration
			r := startInformer(t, f, newPagingSource(src), p, nil, func(inf *bcache.Informer) {
				var err error
				if slowReg, err = inf.AddEventHandler(slow); err != nil {
					t.Fatal(err)
				}
				reg.Store(slowReg.(*processor.Listener))
			})
			r.synced(t)
			poll.Until(t, time.Minute, "the slow handler's initial adds", slowReg.HasSynced)
			if got := most.Load(); got > limit {
				t.Errorf("the slow handler had up to %d notifications waiting, want at most %d", got, limit)
			}
		})
	}
}

// A handler may wait, in its first initial add, for something the delivery
// must end first. An index lookup during a bounded warm start waits so, for
// the stored index entries to be verified. Such a handler is not waited for
// once it stops taking its adds. The delivery ends, the lookup returns, and
// the handler gets every add.
func TestBoundedWarmStartDoesNotWaitForABlockedHandler(t *testing.T) {
	t.Cleanup(bcache.SetPaceStall(200 * time.Millisecond)) // runs after the informer stops
	const n = 2000
	f := newTestFile(t)
	src := podSource(podNames(n)...)
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	populate(t, f, src, bcache.Persistence{}, indexers, nil)

	var inf atomic.Pointer[bcache.Informer]
	var once sync.Once
	looked := make(chan error, 1)
	var adds atomic.Int64
	blocking := cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) {
		once.Do(func() {
			_, err := inf.Load().GetIndexer().ByIndex(cache.NamespaceIndex, "ns")
			looked <- err
		})
		adds.Add(1)
	}}
	var reg cache.ResourceEventHandlerRegistration
	startInformer(t, f, noWatchList{src}, bcache.Persistence{CacheObjects: 100}, indexers, func(i *bcache.Informer) {
		inf.Store(i)
		var err error
		if reg, err = i.AddEventHandler(blocking); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case err := <-looked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the handler's index lookup never returned: the delivery waits for the handler, which waits for the delivery")
	}
	poll.Until(t, time.Minute, "the blocked handler's initial adds", reg.HasSynced)
	if got := adds.Load(); got != n {
		t.Errorf("the handler got %d adds, want %d", got, n)
	}
}

// stoppingPages is a pagingSource whose page at offset stopAt never comes:
// the request says so on reached, then waits for its context to end.
type stoppingPages struct {
	*pagingSource
	stopAt  string
	reached chan struct{}
}

func (s *stoppingPages) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue == s.stopAt {
		close(s.reached)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.List(opts)
}

func (s *stoppingPages) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return s.Watch(opts)
}

// A cold start stopped part-way through its paged list, as by a crash,
// leaves the pages it stored without a resourceVersion. The next start
// lists cold, replacing them, and does not resume half a list.
func TestColdStartStoppedMidListStartsColdAgain(t *testing.T) {
	f := newTestFile(t)
	src := podSource(podNames(25)...)
	lw := &stoppingPages{pagingSource: newPagingSource(src), stopAt: "20", reached: make(chan struct{})}
	r := startInformerOpts(t, f, lw, bcache.InformerOptions{PageSize: 10}, nil)
	select {
	case <-lw.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the third page was never asked for")
	}
	r.stop()
	if r.inf.HasSynced() {
		t.Fatal("synced without the list's last page")
	}
	f.reopen()
	colls, err := f.db.Collections()
	if err != nil || len(colls) != 1 || colls[0].ResourceVersion != "" || colls[0].Objects == 0 {
		t.Fatalf("file after the stop: %+v (%v), want the stored pages without a resourceVersion", colls, err)
	}

	again := newPagingSource(src)
	r = startInformerOpts(t, f, again, bcache.InformerOptions{PageSize: 10}, nil)
	r.synced(t)
	r.handled(t)
	if got := r.starts(t); len(got) == 0 || got[0] != "cold" {
		t.Errorf("starts %v, want a cold list first", got)
	}
	if reqs := again.Requests(); len(reqs) == 0 || reqs[0].ResourceVersion != "" || reqs[0].Continue != "" {
		t.Errorf("list requests %+v, want a cold list from the first page", reqs)
	}
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("store %v, want %v", got, want)
	}
	if evs := r.ev.list(); len(evs) != 25 {
		t.Errorf("%d handler calls, want 25 initial adds: %v", len(evs), evs)
	}
}

// expiringPages is a pagingSource whose first continued request answers
// 410 Expired, as after a compaction between two pages.
type expiringPages struct {
	*pagingSource
	expired atomic.Bool
}

func (s *expiringPages) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" && s.expired.CompareAndSwap(false, true) {
		return nil, apierrors.NewResourceExpired("The provided continue parameter is too old")
	}
	return s.pagingSource.List(opts)
}

// A cold start whose paged list failed after a page was stored relists as
// a consistent read, in full, through the queue, even with Recovery. The
// page stored has no version to recover from. The informer syncs once the
// list is applied, with the whole collection. A recovery instead would make
// the first of its writes sync the queue, while what it fetched was still
// missing.
func TestColdStartSyncsOnTheListAfterAFailedPagedList(t *testing.T) {
	f := newTestFile(t)
	src := podSource(podNames(5)...)
	lw := &expiringPages{pagingSource: newPagingSource(src)}
	lister := &sourceLister{src: src}
	held, release := lister.holdFetches()
	defer release()
	r := startInformerOpts(t, f, lw, bcache.InformerOptions{
		PageSize: 2,
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, nil)
	select {
	case <-r.inf.HasSyncedChecker().Done():
	case <-held:
		if r.inf.HasSynced() {
			t.Errorf("synced while a recovery fetches what the failed list lacked")
		}
		release()
		r.synced(t)
	case <-time.After(30 * time.Second):
		t.Fatalf("not synced; list requests %+v", lw.Requests())
	}
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("synced with store %v, want %v", got, want)
	}
	if n := lister.Metas(); n != 0 {
		t.Errorf("%d metadata lists, want none: the relist is a full list", n)
	}
}
