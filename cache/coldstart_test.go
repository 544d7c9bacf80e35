package cache_test

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// A collection without a resourceVersion starts cold, whatever it holds
// and whatever a checkpoint acknowledged of it. Two ways leave one behind
// with acknowledged objects: a cold start's paged list stopped part-way,
// and an informer that moved to memory because an object could not be
// stored. The next start tells the checkpoint's handler of no deletion,
// and its list reaches the handler as initial adds of every object.
func TestColdStartTellsACheckpointNoDeletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		// leave runs a first informer whose checkpoint handler acknowledges
		// what it is given, and returns once n objects are acknowledged and
		// the collection has no resourceVersion. Then it stops it.
		leave func(t *testing.T, f *testFile) (src *pagingSource, opts bcache.InformerOptions, setup func(*bcache.Informer))
		want  int // initial adds of the next start
	}{
		{"paged list stopped part-way", func(t *testing.T, f *testFile) (*pagingSource, bcache.InformerOptions, func(*bcache.Informer)) {
			src := podSource(podNames(25)...)
			lw := &stoppingPages{pagingSource: newPagingSource(src), stopAt: "20", reached: make(chan struct{})}
			opts := bcache.InformerOptions{PageSize: 10}
			var cp *bcache.Checkpoint
			r := startInformerOpts(t, f, lw, opts, withCheckpoint(t, &cp, nil, nil))
			awaitChan(t, lw.reached, "the third page asked for")
			poll.Until(t, 30*time.Second, "two pages acknowledged", func() bool { return cp.Len() == 20 })
			r.stop()
			return newPagingSource(src), opts, nil
		}, 25},
		{"moved to memory", func(t *testing.T, f *testFile) (*pagingSource, bcache.InformerOptions, func(*bcache.Informer)) {
			src := podSource("a", "b", "c")
			// c cannot be stored; a and b are stored a page each before it.
			unstorable := func(inf *bcache.Informer) {
				if err := inf.SetTransform(storeAllBut("c")); err != nil {
					t.Fatal(err)
				}
			}
			opts := bcache.InformerOptions{PageSize: 1}
			var cp *bcache.Checkpoint
			r := startInformerOpts(t, f, newPagingSource(src), opts, func(inf *bcache.Informer) {
				unstorable(inf)
				withCheckpoint(t, &cp, nil, nil)(inf)
			})
			r.synced(t)
			poll.Until(t, 30*time.Second, "everything acknowledged", func() bool { return cp.Len() == 3 })
			if !r.inf.Indexer().InMemory() {
				t.Fatal("the informer did not move to memory")
			}
			r.stop()
			return newPagingSource(src), opts, unstorable
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFile(t)
			src, opts, setup := tc.leave(t, f)
			f.reopen()
			colls, err := f.db.Collections()
			if err != nil || len(colls) != 1 || colls[0].ResourceVersion != "" || colls[0].Objects == 0 {
				t.Fatalf("file after the first start: %+v (%v), want stored objects without a resourceVersion", colls, err)
			}

			h := &events{}
			var cp *bcache.Checkpoint
			var reg cache.ResourceEventHandlerRegistration
			r := startInformerOpts(t, f, src, opts, func(inf *bcache.Informer) {
				if setup != nil {
					setup(inf)
				}
				withCheckpoint(t, &cp, h.handler(), &reg)(inf)
				if cp.Len() == 0 {
					t.Fatal("the checkpoint holds no acknowledgement from the first start")
				}
			})
			r.synced(t)
			awaitChan(t, reg.HasSyncedChecker().Done(), "the checkpoint's handler to sync")
			if got := r.starts(t); len(got) == 0 || got[0] != "cold" {
				t.Errorf("starts %v, want a cold list first", got)
			}
			got := h.list()
			if i := slices.IndexFunc(got, func(e string) bool { return strings.HasPrefix(e, "delete") }); i >= 0 {
				t.Errorf("the checkpoint's handler was told of a deletion at a cold start: %q; all it got: %v", got[i], got)
			}
			adds := 0
			for _, e := range got {
				if strings.HasPrefix(e, "add ") && strings.HasSuffix(e, " initial=true") {
					adds++
				}
			}
			if adds != tc.want || len(got) != tc.want {
				t.Errorf("the checkpoint's handler got %d calls, %d of them initial adds, want %d initial adds: %v", len(got), adds, tc.want, got)
			}
			if n, d := cp.Len(), cp.Tombstones(); n != 0 || d != 0 {
				t.Errorf("after the cold start the checkpoint holds %d acknowledgements and %d tombstones, want none", n, d)
			}
		})
	}
}

// A collection that must start cold is emptied without reading its
// records. So a record whose header is damaged cannot keep an object the
// list lacks. An object deleted on the server meanwhile is gone after the
// cold start, and after a warm restart.
func TestColdStartEmptiesACollectionWithADamagedRecord(t *testing.T) {
	f := newTestFile(t)
	src := podSource(podNames(25)...)
	lw := &stoppingPages{pagingSource: newPagingSource(src), stopAt: "20", reached: make(chan struct{})}
	opts := bcache.InformerOptions{PageSize: 10}
	r := startInformerOpts(t, f, lw, opts, nil)
	awaitChan(t, lw.reached, "the third page asked for")
	poll.Until(t, 30*time.Second, "two pages stored", func() bool {
		n, err := r.inf.Indexer().Collection().Len()
		return err == nil && n == 20
	})
	r.stop()
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	f.db = nil
	corruptRecord(t, f.path, "pods", "ns/p00001") // its header too
	f.open()
	src.Delete(pod("ns", "p00005", "", nil))

	r = startInformerOpts(t, f, newPagingSource(src), opts, nil)
	r.synced(t)
	r.handled(t)
	if got := r.starts(t); len(got) == 0 || got[0] != "cold" {
		t.Errorf("starts %v, want a cold list first", got)
	}
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("after the cold start the store holds %v, want %v", got, want)
	}
	r.stop()
	f.reopen()

	r = startInformerOpts(t, f, newPagingSource(src), opts, nil)
	r.synced(t)
	if got := r.starts(t); fmt.Sprint(got) != "[resumed]" {
		t.Errorf("starts %v, want a warm start", got)
	}
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("after a warm restart the store holds %v, want %v", got, want)
	}
}

// storeAllBut returns a transform that makes the named Pod an object the
// cache file cannot encode.
func storeAllBut(name string) func(interface{}) (interface{}, error) {
	return func(obj interface{}) (interface{}, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Name == name {
			return &unregistered{ObjectMeta: p.ObjectMeta}, nil
		}
		return obj, nil
	}
}

// TestColdStartAfterAnInterruptedListRandomized generates what a cold
// start may find. A paged list stopped after a random number of pages, and
// a checkpoint acknowledged its objects. Sometimes a record is damaged.
// Objects were deleted, changed and created on the server meanwhile.
// Whatever it finds, the cold start tells the checkpoint's handler of no
// deletion. The handler gets the server's objects as initial adds. The
// store is the server's, and so is a warm restart's after it.
func TestColdStartAfterAnInterruptedListRandomized(t *testing.T) {
	for seed := range int64(12) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			pageSize := 2 + rng.Intn(5)
			n := 2*pageSize + 1 + rng.Intn(20) // at least three pages
			stored := pageSize * (1 + rng.Intn((n-1)/pageSize))
			f := newTestFile(t)
			src := podSource(podNames(n)...)
			lw := &stoppingPages{pagingSource: newPagingSource(src), stopAt: strconv.Itoa(stored), reached: make(chan struct{})}
			opts := bcache.InformerOptions{PageSize: int64(pageSize)}
			var cp *bcache.Checkpoint
			r := startInformerOpts(t, f, lw, opts, withCheckpoint(t, &cp, nil, nil))
			awaitChan(t, lw.reached, "the page the list stops at asked for")
			poll.Until(t, 30*time.Second, "the stored pages acknowledged", func() bool { return cp.Len() == stored })
			r.stop()
			if err := f.db.Close(); err != nil {
				t.Fatal(err)
			}
			f.db = nil
			var did []string
			if rng.Intn(2) == 0 {
				key := "ns/" + podNames(stored)[rng.Intn(stored)]
				corruptRecord(t, f.path, "pods", key)
				did = append(did, "damaged "+key)
			}
			f.open()
			live := podNames(n)
			for i := rng.Intn(4); i > 0 && len(live) > 0; i-- {
				j := rng.Intn(len(live))
				src.Delete(pod("ns", live[j], "", nil))
				did = append(did, "deleted "+live[j])
				live = slices.Delete(live, j, j+1)
			}
			for i := rng.Intn(3); i > 0 && len(live) > 0; i-- {
				name := live[rng.Intn(len(live))]
				src.Modify(pod("ns", name, "", map[string]string{"v": strconv.Itoa(i)}))
				did = append(did, "changed "+name)
			}
			for i := rng.Intn(3); i > 0; i-- {
				name := fmt.Sprintf("new%d", i)
				src.Add(pod("ns", name, "", nil))
				did = append(did, "created "+name)
			}
			t.Logf("%d objects in pages of %d, %d stored; then %v", n, pageSize, stored, did)

			h := &events{}
			var reg cache.ResourceEventHandlerRegistration
			r = startInformerOpts(t, f, newPagingSource(src), opts, withCheckpoint(t, &cp, h.handler(), &reg))
			r.synced(t)
			awaitChan(t, reg.HasSyncedChecker().Done(), "the checkpoint's handler to sync")
			want := sourceState(t, src)
			var wantAdds []string
			for _, s := range want {
				wantAdds = append(wantAdds, "add "+s+" initial=true")
			}
			if got := h.list(); !eq(got, wantAdds) {
				t.Errorf("the checkpoint's handler got %v, want %v", got, wantAdds)
			}
			if got := storeState(r.inf.GetStore()); !eq(got, want) {
				t.Errorf("after the cold start the store holds %v, want %v", got, want)
			}
			r.stop()
			f.reopen()

			r = startInformerOpts(t, f, newPagingSource(src), opts, nil)
			r.synced(t)
			if got := r.starts(t); fmt.Sprint(got) != "[resumed]" {
				t.Errorf("starts %v, want a warm start", got)
			}
			if got := storeState(r.inf.GetStore()); !eq(got, want) {
				t.Errorf("after a warm restart the store holds %v, want %v", got, want)
			}
		})
	}
}
