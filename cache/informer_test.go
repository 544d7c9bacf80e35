package cache_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// noWatchList makes FakeControllerSource report that it does not implement
// watch-list semantics, so no reflector waits for a stream it never sends.
type noWatchList struct{ *fcache.FakeControllerSource }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// events records handler calls as strings.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) { e.mu.Lock(); e.got = append(e.got, s); e.mu.Unlock() }
func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// waitFor waits until the handler has been called at least n times. Handler
// calls are asynchronous to the store, and a stopped informer's listeners
// drop what they have not delivered, so a test that compares a handler's
// calls after stopping waits for them first, not only for the store.
func (e *events) waitFor(t *testing.T, n int, what string) {
	t.Helper()
	poll.Until(t, 30*time.Second, fmt.Sprintf("%d handler calls (%s)", n, what), func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.got) >= n
	})
}

// handler records calls; it implements OnAdd itself because
// ResourceEventHandlerFuncs drops isInInitialList.
func (e *events) handler() cache.ResourceEventHandler { return recordingHandler{e} }

type recordingHandler struct{ e *events }

func eventKey(obj interface{}) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return "tombstone:" + d.Key
	}
	k, _ := cache.MetaNamespaceKeyFunc(obj)
	return k + "@" + obj.(metav1.Object).GetResourceVersion()
}

func (h recordingHandler) OnAdd(obj interface{}, initial bool) {
	h.e.add(fmt.Sprintf("add %s initial=%v", eventKey(obj), initial))
}
func (h recordingHandler) OnUpdate(old, obj interface{}) {
	h.e.add(fmt.Sprintf("update %s -> %s", eventKey(old), eventKey(obj)))
}
func (h recordingHandler) OnDelete(obj interface{}) { h.e.add("delete " + eventKey(obj)) }

type countingObserver struct {
	mu     sync.Mutex
	causes []string
}

func (o *countingObserver) Resumed(rv string) {
	o.mu.Lock()
	o.causes = append(o.causes, "resumed")
	o.mu.Unlock()
}
func (o *countingObserver) Listed(c reflector.StartCause, rv string, items, pages int) {
	o.mu.Lock()
	o.causes = append(o.causes, string(c))
	o.mu.Unlock()
}
func (o *countingObserver) WatchStarted(string) {}
func (o *countingObserver) WatchEnded(error)    {}
func (o *countingObserver) starts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.causes...)
}

// runInformer starts an informer over src on f's file and returns it with
// its recorded events and a stop function that waits for it to finish.
func runInformer(t *testing.T, f *testFile, src cache.ListerWatcher, obs *countingObserver) (*bcache.Informer, *events, func()) {
	t.Helper()
	inf, err := bcache.NewSharedIndexInformerWithOptions(src, &corev1.Pod{}, bcache.InformerOptions{
		Persistence:    bcache.Persistence{DB: f.db, Collection: "pods"},
		Observer:       obs,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	if _, err := inf.AddEventHandler(ev.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf, ev, func() { cancel(); <-done }
}

func storeState(s cache.Store) []string {
	var out []string
	for _, obj := range s.List() {
		k, _ := cache.MetaNamespaceKeyFunc(obj)
		out = append(out, k+"@"+obj.(metav1.Object).GetResourceVersion())
	}
	sort.Strings(out)
	return out
}

func sourceState(t *testing.T, src *fcache.FakeControllerSource) []string {
	list, err := src.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, obj := range list.(*corev1.List).Items {
		p := obj.Object.(*corev1.Pod)
		out = append(out, p.Namespace+"/"+p.Name+"@"+p.ResourceVersion)
	}
	sort.Strings(out)
	return out
}

// A restart resumes the watch without listing; a restart after the source
// lost its history relists once and reports deletions as tombstones.
func TestInformerWarmRestart(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	for _, name := range []string{"a", "b", "c"} {
		src.Add(pod("ns", name, "", nil))
	}
	f := newTestFile(t)
	obs := &countingObserver{}
	inf, ev, stop := runInformer(t, f, noWatchList{src}, obs)
	poll.Until(t, 30*time.Second, "cold sync", func() bool { return eq(storeState(inf.GetStore()), sourceState(t, src)) })
	ev.waitFor(t, 3, "cold start")
	stop()
	if got := obs.starts(); len(got) != 1 || got[0] != "cold" {
		t.Fatalf("cold start causes = %v", got)
	}
	if n := len(ev.list()); n != 3 {
		t.Fatalf("cold start events = %v", ev.list())
	}
	f.reopen()

	// Changed while down, within the watch history.
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))
	src.Delete(pod("ns", "b", "", nil))
	obs = &countingObserver{}
	inf, ev, stop = runInformer(t, f, noWatchList{src}, obs)
	poll.Until(t, 30*time.Second, "warm catch-up", func() bool { return eq(storeState(inf.GetStore()), sourceState(t, src)) })
	ev.waitFor(t, 5, "warm start")
	stop()
	if got := obs.starts(); len(got) != 1 || got[0] != "resumed" {
		t.Errorf("warm start causes = %v, want [resumed] (no list)", got)
	}
	got := ev.list()
	want := []string{
		"add ns/a@1 initial=true", "add ns/b@2 initial=true", "add ns/c@3 initial=true",
		"update ns/a@1 -> ns/a@4", "delete ns/b@5",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("warm start events\n got %v\nwant %v", got, want)
	}
	f.reopen()

	// Changed while down, and the history is gone: one relist.
	src.ResetWatch()
	src.Delete(pod("ns", "c", "", nil))
	src.Add(pod("ns", "d", "", nil))
	obs = &countingObserver{}
	inf, ev, stop = runInformer(t, f, noWatchList{src}, obs)
	poll.Until(t, 30*time.Second, "relist", func() bool { return eq(storeState(inf.GetStore()), sourceState(t, src)) })
	ev.waitFor(t, 4, "relist")
	stop()
	if got := obs.starts(); fmt.Sprint(got) != "[resumed relist-expired]" {
		t.Errorf("expired start causes = %v", got)
	}
	got = ev.list()
	// ns/a kept its RV: it is not rewritten, and this handler, which has no
	// resync period, does not hear of it.
	want = []string{
		"add ns/a@4 initial=true", "add ns/c@3 initial=true",
		"delete tombstone:ns/c", "add ns/d@7 initial=false",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("relist events\n got %v\nwant %v", got, want)
	}
}

// The reflector of a warm start opens its watch while the stored state is
// still being delivered: with many stored objects and changes waiting in the
// watch history, every stored add must still reach the handler before any
// watch event.
func TestWarmStartDeliversStoredBeforeWatchEvents(t *testing.T) {
	const stored, changed = 3000, 50
	src := fcache.NewFakeControllerSource()
	for i := 0; i < stored; i++ {
		src.Add(pod("ns", fmt.Sprintf("p%04d", i), "", nil))
	}
	f := newTestFile(t)
	inf, _, stop := runInformer(t, f, noWatchList{src}, &countingObserver{})
	poll.Until(t, 30*time.Second, "cold sync", func() bool { return eq(storeState(inf.GetStore()), sourceState(t, src)) })
	stop()
	f.reopen()

	for i := 0; i < changed; i++ {
		src.Modify(pod("ns", fmt.Sprintf("p%04d", i*stored/changed), "", map[string]string{"v": "2"}))
	}
	inf, ev, stop := runInformer(t, f, noWatchList{src}, &countingObserver{})
	poll.Until(t, 30*time.Second, "warm catch-up", func() bool { return eq(storeState(inf.GetStore()), sourceState(t, src)) })
	ev.waitFor(t, stored+changed, "stored adds and watch updates")
	stop()
	got := ev.list()
	if len(got) != stored+changed {
		t.Fatalf("got %d events, want %d stored adds and %d updates", len(got), stored, changed)
	}
	for i, e := range got {
		if initial := strings.HasPrefix(e, "add ") && strings.HasSuffix(e, "initial=true"); initial != (i < stored) {
			t.Fatalf("event %d of %d is %q: the stored adds must come first, then the watch's updates", i, len(got), e)
		}
	}
}
