package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/recovery"
)

// sourceLister lists a FakeControllerSource for a recovery (lister).
// Its fetches wait while held.
type sourceLister struct {
	src *fcache.FakeControllerSource

	mu      sync.Mutex
	metas   int
	fetches []string
	hold    chan struct{} // non-nil: fetches wait until it is closed
	held    chan struct{} // closed when a fetch first waits
}

// oneByOne makes a recovery fetch each changed object alone.
var oneByOne = recovery.Tuning{FullListFraction: 2}

// lister is the recovery.Lister of l's methods.
func (l *sourceLister) lister() *recovery.Lister {
	return &recovery.Lister{ListMetadata: l.ListMetadata, ListObjects: l.ListObjects}
}

func (l *sourceLister) list() ([]*corev1.Pod, string, error) {
	obj, err := l.src.List(metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	list := obj.(*corev1.List)
	var pods []*corev1.Pod
	for _, it := range list.Items {
		pods = append(pods, it.Object.(*corev1.Pod))
	}
	return pods, list.ResourceVersion, nil
}

func (l *sourceLister) ListMetadata(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	l.mu.Lock()
	l.metas++
	l.mu.Unlock()
	if opts.ResourceVersion == "0" || opts.ResourceVersion != "" && opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		return nil, fmt.Errorf("metadata list with %+v", opts)
	}
	pods, rv, err := l.list()
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	for _, p := range pods {
		out.Items = append(out.Items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
	}
	return out, nil
}

func (l *sourceLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	l.fetches = append(l.fetches, namespace+"/"+name)
	hold, held := l.hold, l.held
	l.mu.Unlock()
	if hold != nil {
		select {
		case <-held:
		default:
			close(held)
		}
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	pods, rv, err := l.list()
	if err != nil {
		return nil, err
	}
	out := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
	for _, p := range pods {
		if (namespace == "" || p.Namespace == namespace) && (name == "" || p.Name == name) {
			out.Items = append(out.Items, *p.DeepCopy())
		}
	}
	return out, nil
}

// holdFetches makes fetches wait until the returned function is called.
func (l *sourceLister) holdFetches() (held <-chan struct{}, release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold, l.held = make(chan struct{}), make(chan struct{})
	hold := l.hold
	return l.held, func() { close(hold) }
}

func (l *sourceLister) Metas() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.metas
}

func (l *sourceLister) Fetches() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fetches)
}

// noFullLists is a source that fails full lists: a recovery must not make
// any. A caught-up sync's limit=1 read passes.
type noFullLists struct {
	noWatchList
	t *testing.T
}

func (n noFullLists) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Limit == 1 && opts.ResourceVersion == "" {
		return n.noWatchList.List(opts)
	}
	n.t.Errorf("full list %+v during a recovery", opts)
	return nil, errors.New("no full lists")
}

func uidPod(name, uid string) *corev1.Pod {
	p := pod("ns", name, "", nil)
	p.UID = types.UID(uid)
	return p
}

// tombstoneRecorder records handler calls as events does, with the
// resourceVersion of a tombstone's object.
type tombstoneRecorder struct{ events }

func (r *tombstoneRecorder) OnAdd(obj interface{}, initial bool) {
	r.add(fmt.Sprintf("add %s initial=%v", eventKey(obj), initial))
}
func (r *tombstoneRecorder) OnUpdate(old, obj interface{}) {
	r.add(fmt.Sprintf("update %s -> %s", eventKey(old), eventKey(obj)))
}
func (r *tombstoneRecorder) OnDelete(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		r.add(fmt.Sprintf("delete tombstone:%s (stored %s)", d.Key, eventKey(d.Obj)))
		return
	}
	r.add("delete " + eventKey(obj))
}

// recoveryFixture is a file holding pods a (ua), b (ub), c (uc) and d (ud)
// at resourceVersions 1–4, and a source that, since, updated a, deleted
// b, deleted and recreated c (another UID), created e, and lost its watch
// history.
func recoveryFixture(t *testing.T, f *testFile) *fcache.FakeControllerSource {
	t.Helper()
	return recoveryFixtureWith(t, f, bcache.Persistence{}, nil)
}

// recoveryFixtureWith is recoveryFixture, populated by an informer with p
// and setup.
func recoveryFixtureWith(t *testing.T, f *testFile, p bcache.Persistence, setup func(*bcache.Informer)) *fcache.FakeControllerSource {
	t.Helper()
	src := fcache.NewFakeControllerSource()
	for _, n := range []string{"a", "b", "c", "d"} {
		src.Add(uidPod(n, "u"+n))
	}
	populate(t, f, src, p, nil, setup)
	a := uidPod("a", "ua")
	a.Labels = map[string]string{"v": "2"}
	src.Modify(a)                 // a@5
	src.Delete(uidPod("b", "ub")) // @6
	src.Delete(uidPod("c", "uc")) // @7
	src.Add(uidPod("c", "uc2"))   // c@8
	src.Add(uidPod("e", "ue"))    // e@9
	src.ResetWatch()              // every older resourceVersion expired
	return src
}

// After a 410 the informer recovers without a full list: objects gone are
// deleted as DeletedFinalStateUnknown carrying the stored object (an object
// replaced under the same name too, whose new UID is then an add), changed
// and new objects arrive as updates and adds, and unchanged objects are
// neither written nor delivered, except to a handler with a resync period,
// as a relist's unchanged objects are. The store ends at the list's
// resourceVersion, no longer marked must-list.
func TestRecoveryAfterExpiry(t *testing.T) {
	f := newTestFile(t)
	src := recoveryFixture(t, f)
	lister := &sourceLister{src: src}
	plain, resyncing := &tombstoneRecorder{}, &tombstoneRecorder{}
	r := startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Recovery:     &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
		ResyncPeriod: time.Hour,
	}, func(inf *bcache.Informer) {
		if _, err := inf.AddEventHandlerWithResyncPeriod(plain, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := inf.AddEventHandlerWithResyncPeriod(resyncing, time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}
	initial := []string{"add ns/a@1 initial=true", "add ns/b@2 initial=true", "add ns/c@3 initial=true", "add ns/d@4 initial=true"}
	changes := []string{
		"delete tombstone:ns/b (stored ns/b@2)",
		"delete tombstone:ns/c (stored ns/c@3)",
		"update ns/a@1 -> ns/a@5",
		"add ns/c@8 initial=false",
		"add ns/e@9 initial=false",
	}
	plain.waitFor(t, len(initial)+len(changes), "plain handler")
	resyncing.waitFor(t, len(initial)+len(changes)+1, "resyncing handler")
	r.stop()
	if got := plain.list(); fmt.Sprint(got) != fmt.Sprint(append(initial, changes...)) {
		t.Errorf("plain handler\n got %v\nwant %v", got, append(initial, changes...))
	}
	// The unchanged object reaches the resyncing handler only, as a
	// relist's unchanged objects reach the handlers due for a resync.
	wantResync := slices.Concat(initial, changes[:2], []string{"update ns/d@4 -> ns/d@4"}, changes[2:])
	if got := resyncing.list(); fmt.Sprint(got) != fmt.Sprint(wantResync) {
		t.Errorf("resyncing handler\n got %v\nwant %v", got, wantResync)
	}
	if got := lister.Fetches(); fmt.Sprint(got) != "[ns/a ns/c ns/e]" {
		t.Errorf("fetches %v, want one per new or changed object", got)
	}
	if got := r.obs.starts(); fmt.Sprint(got) != "[resumed relist-expired]" {
		t.Errorf("starts %v", got)
	}
	coll := r.inf.Indexer().Collection()
	if coll.MustList() {
		t.Error("the collection is still marked must-list after the recovery")
	}
	if rv := coll.ResourceVersion(); rv != "9" {
		t.Errorf("collection resourceVersion %s, want the list's, 9", rv)
	}
}

// markTransformed is a transform that fails for anything but a Pod, as a
// user's transform asserting its input type does, and marks the Pods.
func markTransformed(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("transform given a %T", obj)
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["transformed"] = "yes"
	return p, nil
}

// A recovering informer with a transform recovers as one without: its
// steps, which ride the queue beside the watch events, never reach the
// transform, while every fetched object and watch event does.
func TestRecoveryWithATransform(t *testing.T) {
	withTransform := func(inf *bcache.Informer) {
		if err := inf.SetTransform(markTransformed); err != nil {
			t.Fatal(err)
		}
	}
	f := newTestFile(t)
	p := bcache.Persistence{TransformVersion: "1"}
	src := recoveryFixtureWith(t, f, p, withTransform)
	lister := &sourceLister{src: src}
	r := startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Persistence: p,
		Recovery:    &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, withTransform)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}
	for _, obj := range r.inf.GetStore().List() {
		if p := obj.(*corev1.Pod); p.Annotations["transformed"] != "yes" {
			t.Errorf("stored %s/%s was not transformed", p.Namespace, p.Name)
		}
	}
	r.ev.waitFor(t, 9, "initial adds and the recovery's changes")
	r.stop()
	if got := lister.Fetches(); fmt.Sprint(got) != "[ns/a ns/c ns/e]" {
		t.Errorf("fetches %v, want one per new or changed object", got)
	}
	if got := r.obs.starts(); fmt.Sprint(got) != "[resumed relist-expired]" {
		t.Errorf("starts %v, want one recovery", got)
	}
	for len(r.errs) > 0 {
		if err := <-r.errs; !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
			t.Errorf("watch error handler told: %v", err)
		}
	}
}

// A recovery marks the collection must-list before it applies anything and
// clears the mark only once the store is consistent; until then the
// informer is not synced. An informer stopped in the middle leaves the mark
// (with the tombstones already applied), and the next start recovers again
// and converges; handlers never get a deletion twice.
func TestRecoveryInterruptedIsRedone(t *testing.T) {
	f := newTestFile(t)
	src := recoveryFixture(t, f)
	lister := &sourceLister{src: src}
	held, release := lister.holdFetches()
	r := startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, nil)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no fetch")
	}
	coll := r.inf.Indexer().Collection()
	if !coll.MustList() {
		t.Error("the collection is not marked must-list during the recovery")
	}
	r.ev.waitFor(t, 6, "initial adds and the tombstones")
	if r.inf.HasSynced() {
		t.Error("synced before the recovery made the store consistent")
	}
	r.stop()
	release()
	first := r.ev.list()
	f.reopen()

	r = startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, nil)
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}
	r.ev.waitFor(t, 5, "second start")
	r.stop()
	if got := r.obs.starts(); fmt.Sprint(got) != "[relist-error]" {
		t.Errorf("second start causes %v, want a recovery at once (the collection owed a list)", got)
	}
	second := warmOrder(t, r.ev.list())
	want := []string{"add ns/a@1 initial=true", "add ns/d@4 initial=true", "update ns/a@1 -> ns/a@5", "add ns/c@8 initial=false", "add ns/e@9 initial=false"}
	if fmt.Sprint(second) != fmt.Sprint(want) {
		t.Errorf("second start events\n got %v\nwant %v (first start: %v)", second, want, first)
	}
	if coll := r.inf.Indexer().Collection(); coll.MustList() {
		t.Error("still marked must-list")
	}
	for _, e := range second {
		if strings.HasPrefix(e, "delete") {
			t.Errorf("second start delivered %q again", e)
		}
	}
}

// A recovery does not wait for a warm start's hand-off of the stored
// objects: the informer syncs once the store is consistent, while a slow
// handler still holds the hand-off back (a bounded cache walks no faster
// than its handlers take the objects), and each key the recovery touches is
// handed out first, so every handler still gets a key's initial add before
// its changes.
func TestRecoveryOvertakesTheWarmHandOff(t *testing.T) {
	t.Cleanup(bcache.SetPaceStall(time.Hour)) // the held handler is never given up on
	const n = 3000
	f := newTestFile(t)
	src := fcache.NewFakeControllerSource()
	for i, name := range podNames(n) {
		src.Add(uidPod(name, fmt.Sprint("u", i)))
	}
	p := bcache.Persistence{CacheObjects: 100}
	populate(t, f, src, p, nil, nil)
	// Changed while down, all near the end of the walk's key order.
	last := uidPod(fmt.Sprintf("p%05d", n-1), fmt.Sprint("u", n-1))
	last.Labels = map[string]string{"v": "2"}
	src.Modify(last)
	src.Delete(uidPod(fmt.Sprintf("p%05d", n-2), fmt.Sprint("u", n-2)))
	src.Add(uidPod("p99999", "unew"))
	src.ResetWatch()

	release := make(chan struct{})
	var first, released sync.Once
	unblock := func() { released.Do(func() { close(release) }) }
	held := cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) { first.Do(func() { <-release }) }}
	var heldReg cache.ResourceEventHandlerRegistration
	lister := &sourceLister{src: src}
	r := startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Persistence: p,
		Recovery:    &recovery.Options{Lister: lister.lister()},
	}, func(inf *bcache.Informer) {
		var err error
		if heldReg, err = inf.AddEventHandler(held); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(unblock) // before r.stop, which waits for the handlers
	r.synced(t)
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}
	initial := 0
	for _, e := range r.ev.list() {
		if strings.HasSuffix(e, "initial=true") {
			initial++
		}
	}
	if heldReg.HasSynced() || initial >= n-1 {
		t.Fatalf("the hand-off ended (%d initial adds) before the held handler took one: the test holds nothing", initial)
	}
	unblock()
	r.handled(t)
	r.ev.waitFor(t, n+3, "initial adds and changes")
	r.stop()
	got := warmOrder(t, r.ev.list())
	want := []string{ // in any order: the fetches run concurrently
		fmt.Sprintf("add ns/p99999@%d initial=false", n+3),
		fmt.Sprintf("delete tombstone:ns/p%05d", n-2),
		fmt.Sprintf("update ns/p%05d@%d -> ns/p%05d@%d", n-1, n, n-1, n+1),
	}
	if rest := sorted(got[n:]); fmt.Sprint(rest) != fmt.Sprint(want) {
		t.Errorf("changes after the initial adds\n got %v\nwant %v", rest, want)
	}
	if got := lister.Fetches(); len(got) != 2 {
		t.Errorf("fetches %v, want the changed and the new object", got)
	}
}

// A warm start holds its walk back while a recovery runs, whether the walk
// hands the stored objects to handlers registered before the start or only
// verifies the stored index entries, and goes on once the store is
// consistent again — or at once when something waits for it, as an index
// lookup does. A start handler still gets every key's initial add, before
// the key's changes.
func TestRecoveryHoldsBackTheWalk(t *testing.T) {
	for _, tc := range []struct {
		name            string
		lookup, handler bool
	}{
		{name: "no handlers"},
		{name: "no handlers, index lookup", lookup: true},
		{name: "a start handler", handler: true},
	} {
		lookup := tc.lookup
		t.Run(tc.name, func(t *testing.T) {
			const n = 2000 // several of the walk's chunks
			f := newTestFile(t)
			src := fcache.NewFakeControllerSource()
			t.Cleanup(src.Shutdown)
			for i, name := range podNames(n) {
				src.Add(uidPod(name, fmt.Sprint("u", i)))
			}
			indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
			p := bcache.Persistence{DB: f.db, Collection: "pods"}
			populate(t, f, src, p, indexers, nil)
			changed := uidPod("p00007", "u7")
			changed.Labels = map[string]string{"v": "2"}
			src.Modify(changed)
			src.ResetWatch() // the stored resourceVersion is gone: a recovery

			// The walk begins only once the recovery is fetching, so that
			// it cannot end before it could be held.
			lister := &sourceLister{src: src}
			fetching, releaseFetches := lister.holdFetches()
			held := make(chan struct{})
			var heldOnce sync.Once
			t.Cleanup(bcache.SetWalkHooks(func() { <-fetching }, func() { heldOnce.Do(func() { close(held) }) }))

			p.DB = f.db
			inf, err := bcache.NewSharedIndexInformerWithOptions(noFullLists{noWatchList{src}, t}, &corev1.Pod{}, bcache.InformerOptions{
				Persistence:    p,
				Indexers:       indexers,
				Recovery:       &recovery.Options{Lister: lister.lister(), Workers: 1},
				InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			ev := &events{}
			var reg cache.ResourceEventHandlerRegistration
			if tc.handler {
				if reg, err = inf.AddEventHandler(ev.handler()); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { inf.RunWithContext(ctx); close(done) }()
			var once sync.Once
			release := func() { once.Do(releaseFetches) }
			t.Cleanup(func() { release(); cancel(); <-done })

			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatal("the walk was not held back during the recovery")
			}
			walked := bcache.WalkEndedForTest(inf)
			if lookup {
				got := make(chan int, 1)
				go func() {
					objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "ns")
					if err != nil {
						t.Error(err)
					}
					got <- len(objs)
				}()
				select {
				case k := <-got:
					if k != n {
						t.Errorf("ByIndex returned %d objects, want %d", k, n)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("an index lookup during the recovery still waits for the held walk")
				}
				select {
				case <-walked:
				default:
					t.Fatal("the index lookup returned before the walk verified the index entries")
				}
				release()
			} else {
				select {
				case <-walked:
					t.Fatal("the walk ended while the recovery was still fetching")
				default:
				}
				if tc.handler && reg.HasSynced() {
					t.Fatal("the start handler synced while the recovery was still fetching")
				}
				release()
				select {
				case <-walked:
				case <-time.After(30 * time.Second):
					t.Fatal("the walk did not go on after the recovery ended")
				}
			}
			select {
			case <-inf.HasSyncedChecker().Done():
			case <-time.After(30 * time.Second):
				t.Fatal("informer did not sync")
			}
			if got, want := storeState(inf.GetStore()), sourceState(t, src); !eq(got, want) {
				t.Fatalf("store %v, want %v", got, want)
			}
			if !tc.handler {
				return
			}
			awaitChan(t, reg.HasSyncedChecker().Done(), "the start handler to sync")
			got := warmOrder(t, ev.list())
			if len(got) != n+1 || !strings.HasPrefix(got[n], "update ns/p00007@") || !strings.HasSuffix(got[n], " -> ns/p00007@"+changed.ResourceVersion) {
				t.Errorf("the start handler got %d events, the last after the initial adds %q; want %d initial adds and the update of ns/p00007",
					len(got), got[len(got)-1], n)
			}
		})
	}
}

// A warm start's proof by versions takes a consistent metadata list. A
// recovery much later in the same run must not diff against that list:
// objects created since would be told deleted, and objects deleted since
// given back at their older state. Here the informer runs on after the
// proof, the source changes, and then loses its watch history.
func TestRecoveryLongAfterTheProofListsAgain(t *testing.T) {
	f := newTestFile(t)
	src := fcache.NewFakeControllerSource()
	for _, n := range []string{"a", "b", "c", "d"} {
		src.Add(uidPod(n, "u"+n))
	}
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	lister := &sourceLister{src: src}
	rec := &tombstoneRecorder{}
	r := startInformerOpts(t, f, noWatchList{src}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, func(inf *bcache.Informer) {
		if _, err := inf.AddEventHandler(rec); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	rec.waitFor(t, 4, "initial adds")
	if got := lister.Metas(); got != 1 {
		t.Fatalf("%d metadata lists at the start, want the proof's one", got)
	}

	// Changes after the proof, seen by the watch.
	src.Add(uidPod("e", "ue"))    // e@5
	src.Delete(uidPod("b", "ub")) // @6
	a := uidPod("a", "ua")
	a.Labels = map[string]string{"v": "2"}
	src.Modify(a) // a@7
	rec.waitFor(t, 7, "the watch's events")

	// z@8 is made while the watch is away; then the history goes: a 410.
	src.Change(watch.Event{Type: watch.Added, Object: uidPod("z", "uz")}, 0)
	src.ResetWatch()
	poll.Until(t, 30*time.Second, "the recovery", func() bool {
		return len(r.obs.starts()) >= 2 && !r.inf.Indexer().Collection().MustList()
	})
	src.Add(uidPod("y", "uy")) // y@9, delivered after everything the recovery delivered
	rec.waitFor(t, 9, "the marker")
	if got, want := storeState(r.inf.GetStore()), sourceState(t, src); !eq(got, want) {
		t.Errorf("store %v, want %v", got, want)
	}
	r.stop()
	want := []string{
		"add ns/a@1 initial=true", "add ns/b@2 initial=true", "add ns/c@3 initial=true", "add ns/d@4 initial=true",
		"add ns/e@5 initial=false", "delete ns/b@6", "update ns/a@1 -> ns/a@7",
		"add ns/z@8 initial=false", "add ns/y@9 initial=false",
	}
	if got := rec.list(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
}

// laggingLister is a sourceLister whose fetches of one key wait for their
// context, and whose first metadata list, if lagging is set, is lagging's
// (an older apiserver of an HA pair serves it).
type laggingLister struct {
	*sourceLister
	// stuck is a name whose fetches never return; set between runs.
	stuck string

	mu      sync.Mutex
	lagging func(opts metav1.ListOptions) *metav1.PartialObjectMetadataList
}

// lister is the recovery.Lister of l's methods, which wrap the
// sourceLister's.
func (l *laggingLister) lister() *recovery.Lister {
	return &recovery.Lister{ListMetadata: l.ListMetadata, ListObjects: l.ListObjects}
}

func (l *laggingLister) ListMetadata(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	l.mu.Lock()
	lagging := l.lagging
	l.lagging = nil
	l.mu.Unlock()
	if lagging != nil {
		return lagging(opts), nil
	}
	return l.sourceLister.ListMetadata(ctx, opts)
}

func (l *laggingLister) ListObjects(ctx context.Context, namespace, name string, opts metav1.ListOptions) (runtime.Object, error) {
	if name == l.stuck {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return l.sourceLister.ListObjects(ctx, namespace, name, opts)
}

// A recovery that did not finish left an object it fetched, newer than the
// store's resourceVersion. The next recovery's metadata list, served by a
// lagging apiserver at a version before that object was created, lacks
// it. The handler is not told it was deleted (and then given it again):
// the watch from the list's resourceVersion brings its changes.
func TestRecoveryKeepsWhatALaggingListLacks(t *testing.T) {
	f := newTestFile(t)
	src := fcache.NewFakeControllerSource()
	for _, n := range []string{"a", "b", "c", "d"} {
		src.Add(uidPod(n, "u"+n)) // @1–4
	}
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	src.ResetWatch() // the watch from 4 expires
	b := uidPod("b", "ub")
	b.Labels = map[string]string{"v": "2"}
	src.Modify(b)                // b@5
	src.Add(uidPod("a0", "ua0")) // a0@6
	c := uidPod("c", "uc")
	c.Labels = map[string]string{"v": "2"}
	src.Modify(c) // c@7

	// The first run fetches a0@6 and b@5 (in key order) and is stopped
	// while the fetch of c hangs: the store owes a list, at 5.
	lister := &laggingLister{sourceLister: &sourceLister{src: src}, stuck: "c"}
	r := startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, nil)
	r.ev.waitFor(t, 6, "initial adds, a0 and b")
	r.stop()
	// The warm walk's initial adds may interleave with the recovery's
	// events; warmOrder checks each key's own order and sorts them first.
	if got, want := warmOrder(t, r.ev.list())[4:], []string{"add ns/a0@6 initial=false", "update ns/b@2 -> ns/b@5"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("first run's recovery\n got %v\nwant %v", got, want)
	}
	f.reopen()

	// The second run's metadata list is served at 5, before a0 existed.
	lister.stuck = ""
	lister.mu.Lock()
	lister.lagging = func(opts metav1.ListOptions) *metav1.PartialObjectMetadataList {
		if opts.ResourceVersion != "5" || opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
			t.Errorf("metadata list with %+v, want at 5, not older", opts)
		}
		out := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "5"}}
		for _, p := range []*corev1.Pod{uidPod("a", "ua"), uidPod("b", "ub"), uidPod("c", "uc"), uidPod("d", "ud")} {
			out.Items = append(out.Items, metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
		}
		out.Items[0].ResourceVersion, out.Items[1].ResourceVersion = "1", "5"
		out.Items[2].ResourceVersion, out.Items[3].ResourceVersion = "3", "4"
		return out
	}
	lister.mu.Unlock()
	r = startInformerOpts(t, f, noFullLists{noWatchList{src}, t}, bcache.InformerOptions{
		Recovery: &recovery.Options{Lister: lister.lister(), Workers: 1, Tuning: oneByOne},
	}, nil)
	r.synced(t)
	r.ev.waitFor(t, 6, "initial adds and c's update")
	poll.Until(t, 10*time.Second, "the store at the source's state", func() bool {
		return eq(storeState(r.inf.GetStore()), sourceState(t, src))
	})
	r.stop()
	want := []string{
		"add ns/a0@6 initial=true", "add ns/a@1 initial=true", "add ns/b@5 initial=true",
		"add ns/c@3 initial=true", "add ns/d@4 initial=true",
		"update ns/c@3 -> ns/c@7",
	}
	if got := warmOrder(t, r.ev.list()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second run's events\n got %v\nwant %v", got, want)
	}
	if coll := r.inf.Indexer().Collection(); coll.MustList() {
		t.Error("still marked must-list")
	}
}

// A Lister without ListMetadata or ListObjects is a mistake the informer's
// constructor names. A nil Lister is no recovery, as Recovery nil is:
// factory.NewMetadataLister returns nil where it cannot list.
func TestRecoveryWithAnIncompleteListerIsRejected(t *testing.T) {
	f := newTestFile(t)
	src := fcache.NewFakeControllerSource()
	_, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{DB: f.db, Collection: "pods"},
		Recovery:    &recovery.Options{Lister: &recovery.Lister{}},
	})
	if err == nil || !strings.Contains(err.Error(), "InformerOptions.Recovery.Lister.ListMetadata is nil") {
		t.Fatalf("NewSharedIndexInformerWithOptions: %v, want the missing ListMetadata named", err)
	}
	if _, err := bcache.NewSharedIndexInformerWithOptions(noWatchList{src}, &corev1.Pod{}, bcache.InformerOptions{
		Persistence: bcache.Persistence{MemoryOnly: true},
		Recovery:    &recovery.Options{},
	}); err != nil {
		t.Fatalf("NewSharedIndexInformerWithOptions with a nil Lister: %v, want no recovery", err)
	}
}
