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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/reflector"
)

// noWatchList makes FakeControllerSource report that it does not implement
// watch-list semantics, so no reflector waits for a stream it never sends.
type noWatchList struct{ *fcache.FakeControllerSource }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// watchedList is a noWatchList that tells each time a watch opens. A
// change the source makes unseen (AddDropWatch and the like) is missed only
// by a watch already open; a watch opened later replays it. A change made
// before the watch after a relist opens expires that watch's version with
// this fake, which forces a second relist.
type watchedList struct {
	noWatchList
	opened chan struct{} // one value per watch opened
}

func newWatchedList(src *fcache.FakeControllerSource) *watchedList {
	return &watchedList{noWatchList: noWatchList{src}, opened: make(chan struct{}, 100)}
}

func (w *watchedList) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	wi, err := w.noWatchList.Watch(opts)
	if err == nil {
		w.opened <- struct{}{}
	}
	return wi, err
}

// awaitWatch waits for the next watch to open.
func (w *watchedList) awaitWatch(t *testing.T, what string) {
	t.Helper()
	select {
	case <-w.opened:
	case <-time.After(30 * time.Second):
		t.Fatalf("no watch opened %s", what)
	}
}

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
// calls are asynchronous to the store. A stopped informer's listeners drop
// what they have not delivered. So a test that compares a handler's calls
// after stopping waits for them first, not only for the store.
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
	got := warmOrder(t, ev.list())
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
	got = warmOrder(t, ev.list())
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

// warmOrder checks the order a warm start promises a handler registered
// before it. Each key's initial add comes once, before every other event
// for the key. warmOrder returns the events with the initial adds first, in
// key order, as a list would have delivered them.
func warmOrder(t *testing.T, events []string) []string {
	t.Helper()
	seen := map[string]string{} // key -> its first event
	var initial, rest []string
	for _, e := range events {
		f := strings.Fields(e)
		key, _, _ := strings.Cut(strings.TrimPrefix(f[1], "tombstone:"), "@")
		first, ok := seen[key]
		if strings.HasPrefix(e, "add ") && strings.HasSuffix(e, "initial=true") {
			if ok {
				t.Errorf("%q comes after %q: a key's initial add must come once and before its other events; events %v", e, first, events)
			}
			initial = append(initial, e)
		} else {
			rest = append(rest, e)
		}
		if !ok {
			seen[key] = e
		}
	}
	return append(sorted(initial), rest...)
}

// A warm start hands the stored state out in the background while the watch
// is applied. Many stored objects and changes wait in the watch history.
// Each stored key still reaches the handler once as an initial add, before
// its watch event. The add carries the state the event's old starts from.
// With an unbounded cache it is the very object, decoded once. The watch's
// events keep their order.
func TestWarmStartInitialAddPrecedesEachKeysEvents(t *testing.T) {
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

	var want []string
	for i := 0; i < changed; i++ {
		// From the end backwards: the walk goes in key order, so these are
		// the keys it reaches last.
		name := fmt.Sprintf("p%04d", stored-1-i*stored/changed)
		src.Modify(pod("ns", name, "", map[string]string{"v": "2"}))
		want = append(want, "ns/"+name)
	}
	inf, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{DB: f.db, Collection: "pods"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &identityHandler{added: map[string]interface{}{}}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, 30*time.Second, "handler synced and every update handled", func() bool {
		return reg.HasSynced() && h.updates() == changed
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.added) != stored || h.addedTwice != nil {
		t.Errorf("%d keys got an initial add (want %d); added twice: %v", len(h.added), stored, h.addedTwice)
	}
	if fmt.Sprint(h.updated) != fmt.Sprint(want) {
		t.Errorf("updates in order %v, want the watch's order %v", h.updated, want)
	}
	for _, e := range h.errs {
		t.Error(e)
	}
}

// identityHandler records, per key, the object of its initial add, and
// checks each update's old object against it.
type identityHandler struct {
	mu         sync.Mutex
	added      map[string]interface{}
	addedTwice []string
	updated    []string
	errs       []string
}

func (h *identityHandler) OnAdd(obj interface{}, initial bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	if !initial {
		h.errs = append(h.errs, "non-initial add of "+key)
	}
	if _, ok := h.added[key]; ok {
		h.addedTwice = append(h.addedTwice, key)
	}
	h.added[key] = obj
}

func (h *identityHandler) OnUpdate(old, new interface{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key, _ := cache.MetaNamespaceKeyFunc(new)
	added, ok := h.added[key]
	switch {
	case !ok:
		h.errs = append(h.errs, "update of "+key+" before its initial add")
	case added != old:
		h.errs = append(h.errs, fmt.Sprintf("update of %s: old is not the object of the initial add (%s vs %s)", key, eventKey(old), eventKey(added)))
	}
	h.updated = append(h.updated, key)
}

func (h *identityHandler) OnDelete(obj interface{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, "unexpected delete of "+eventKey(obj))
}

func (h *identityHandler) updates() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.updated)
}
