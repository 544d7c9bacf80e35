package cache_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
)

// heldWatch counts lists (full and limit=1 apart) and holds back the events
// of every watch until release is closed (the watch itself opens at once).
type heldWatch struct {
	noWatchList
	release      chan struct{}
	probed       chan struct{} // closed at the first limit=1 list
	full, probes atomic.Int64
}

func newHeldWatch(src *fcache.FakeControllerSource) *heldWatch {
	return &heldWatch{noWatchList: noWatchList{src}, release: make(chan struct{}), probed: make(chan struct{})}
}

func (h *heldWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit == 1 && opts.ResourceVersion == "" {
		if h.probes.Add(1) == 1 {
			close(h.probed)
		}
	} else {
		h.full.Add(1)
	}
	return h.noWatchList.List(opts)
}

func (h *heldWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	w, err := h.noWatchList.Watch(opts)
	if err != nil {
		return nil, err
	}
	held := &heldWatcher{inner: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go func() {
		defer close(held.out)
		select {
		case <-h.release:
		case <-held.stop:
			return
		}
		for ev := range w.ResultChan() {
			select {
			case held.out <- ev:
			case <-held.stop:
				return
			}
		}
	}()
	return held, nil
}

// heldWatcher forwards inner's events once its heldWatch is released.
type heldWatcher struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (w *heldWatcher) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

func (w *heldWatcher) ResultChan() <-chan watch.Event { return w.out }

// By default a warm informer is synced only once its store holds what
// changed while it was stopped (an object created, one deleted), taken from
// a consistent limit=1 read, without a full list. With SyncedAtOpen it is
// synced with the stored state (checked at the end).
func TestWarmStartSyncedWhenCaughtUp(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	src.Add(pod("ns", "c", "", nil))
	src.Delete(pod("ns", "a", "", nil))
	want := sourceState(t, src)

	lw := newHeldWatch(src)
	r := startInformerOpts(t, f, lw, bcache.InformerOptions{}, nil)
	select {
	case <-lw.probed:
	case <-time.After(30 * time.Second):
		t.Fatal("no consistent limit=1 read")
	}
	// The stored state has reached the handler (it is what a sync without
	// the option would wait for), but the watch is held: not caught up.
	poll.Until(t, 10*time.Second, "stored objects delivered", func() bool { return len(r.ev.list()) == 2 })
	if r.inf.HasSynced() {
		t.Fatalf("synced before the watch applied the read's resourceVersion; store %v, server %v", storeState(r.inf.GetStore()), want)
	}
	close(lw.release)
	r.synced(t)
	if got := storeState(r.inf.GetStore()); !slices.Equal(got, want) {
		t.Errorf("store at sync = %v, want the server's %v", got, want)
	}
	if n := lw.full.Load(); n != 0 {
		t.Errorf("%d full lists, want 0", n)
	}
	if n := lw.probes.Load(); n == 0 {
		t.Error("no limit=1 read: what did the informer catch up to?")
	}
	r.stop()
	f.reopen()

	// With SyncedAtOpen the same start is synced with the stored state.
	src.Add(pod("ns", "d", "", nil))
	lw = newHeldWatch(src)
	r = startInformerOpts(t, f, lw, bcache.InformerOptions{SyncedAtOpen: true}, nil)
	r.synced(t)
	if got := storeState(r.inf.GetStore()); slices.Equal(got, sourceState(t, src)) {
		t.Errorf("store at sync with SyncedAtOpen = %v: the watch was held, it should hold the stored state", got)
	}
	if n := lw.probes.Load(); n != 0 {
		t.Errorf("%d limit=1 reads with SyncedAtOpen, want 0", n)
	}
	close(lw.release)
}

// While the consistent read fails (apiserver unreachable) a warm informer
// is not synced; the failures reach the watch error handler.
func TestWarmStartNotSyncedWhileConsistentReadFails(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	lw := &failingProbe{noWatchList: noWatchList{src}}
	r := startInformerOpts(t, f, lw, bcache.InformerOptions{}, nil)
	for i := 0; i < 2; i++ {
		select {
		case err := <-r.errs:
			if !errorsContain(err, "consistent read") {
				t.Fatalf("reported %v, want the failed consistent read", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the failed read was not reported")
		}
	}
	poll.Until(t, 10*time.Second, "stored objects delivered", func() bool { return len(r.ev.list()) == 1 })
	if r.inf.HasSynced() {
		t.Error("synced although the consistent read never succeeded")
	}
}

type failingProbe struct{ noWatchList }

func (f *failingProbe) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit == 1 {
		return nil, context.DeadlineExceeded
	}
	return f.noWatchList.List(opts)
}

// forbiddenWatch is a source whose watches are all refused, as RBAC that
// grants list but not watch refuses them (403); lists work.
type forbiddenWatch struct {
	noWatchList
	full atomic.Int64
}

func (f *forbiddenWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit != 1 {
		f.full.Add(1)
	}
	return f.noWatchList.List(opts)
}

func (f *forbiddenWatch) Watch(metav1.ListOptions) (watch.Interface, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`cannot watch resource "pods"`))
}

// A warm informer whose watch the server refuses falls back, after one
// retry, to a list reconciled with the stored state. It is synced once it
// has applied that list, as a client-go informer is synced after its first
// list. What changed while it was stopped reaches the handler, the deleted
// object as a tombstone. The refusals reach the watch error handler.
func TestWarmStartSyncedByAListWhenTheWatchIsForbidden(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	src.Add(pod("ns", "c", "", nil))
	src.Delete(pod("ns", "a", "", nil))
	want := sourceState(t, src)

	lw := &forbiddenWatch{noWatchList: noWatchList{src}}
	r := startInformerOpts(t, f, lw, bcache.InformerOptions{}, nil)
	r.synced(t)
	if got := storeState(r.inf.GetStore()); !slices.Equal(got, want) {
		t.Errorf("store at sync = %v, want the server's %v", got, want)
	}
	// The observer may hear of the list after the informer synced on it.
	poll.Until(t, 10*time.Second, "the relist reported", func() bool { return len(r.obs.starts()) >= 2 })
	if got := r.starts(t); len(got) < 2 || got[0] != "resumed" || got[1] != "relist-catchup" {
		t.Errorf("starts = %v, want resumed, then the catch-up's relist", got)
	}
	select {
	case err := <-r.errs:
		if !apierrors.IsForbidden(err) {
			t.Errorf("reported %v, want the refused watch", err)
		}
	default:
		t.Error("the refused watch was not reported")
	}
	r.ev.waitFor(t, 4, "the stored objects, then the list's changes")
	r.stop()
	got := r.ev.list()
	for _, e := range []string{"add ns/a@1 initial=true", "add ns/b@2 initial=true", "add ns/c@3 initial=false", "delete tombstone:ns/a"} {
		if !slices.Contains(got, e) {
			t.Errorf("handler calls %v lack %q", got, e)
		}
	}
}
