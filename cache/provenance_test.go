package cache_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgofeatures "k8s.io/client-go/features"
	clientgofeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// informerRun is one run of an informer over a test file.
type informerRun struct {
	inf    *bcache.Informer
	ev     *events
	reg    cache.ResourceEventHandlerRegistration // ev's
	obs    *countingObserver
	errs   chan error // watch error handler reports
	cancel context.CancelFunc
	done   chan struct{}
}

// startInformer builds an informer on f's file with p (DB and Collection
// filled in), lets setup adjust it, registers a recording handler and runs
// it. It does not wait for sync.
func startInformer(t *testing.T, f *testFile, lw cache.ListerWatcher, p bcache.Persistence, indexers cache.Indexers, setup func(*bcache.Informer)) *informerRun {
	t.Helper()
	return startInformerOpts(t, f, lw, bcache.InformerOptions{Persistence: p, Indexers: indexers}, setup)
}

// startInformerOpts is startInformer with more of the options.
func startInformerOpts(t *testing.T, f *testFile, lw cache.ListerWatcher, opts bcache.InformerOptions, setup func(*bcache.Informer)) *informerRun {
	t.Helper()
	p := opts.Persistence
	p.DB = f.db
	if p.Collection == "" {
		p.Collection = "pods"
	}
	r := &informerRun{ev: &events{}, obs: &countingObserver{}, errs: make(chan error, 100), done: make(chan struct{})}
	opts.Persistence = p
	opts.Observer = r.obs
	opts.InitialBackoff, opts.MaxBackoff = time.Millisecond, 10*time.Millisecond
	inf, err := bcache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.inf = inf
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if rerr := reenter(inf); rerr != nil {
			t.Errorf("reporting %v: %v", err, rerr)
		}
		select {
		case r.errs <- err:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(inf)
	}
	if r.reg, err = inf.AddEventHandler(r.ev.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { inf.RunWithContext(ctx); close(r.done) }()
	t.Cleanup(r.stop)
	return r
}

func (r *informerRun) stop() {
	r.cancel()
	<-r.done
}

// synced waits (bounded, for -race on a loaded machine) for the informer to
// sync.
func (r *informerRun) synced(t *testing.T) {
	t.Helper()
	select {
	case <-r.inf.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("informer did not sync; starts %v", r.obs.starts())
	}
}

// handled waits (bounded) until the recording handler has handled its
// initial adds: its registration has synced.
func (r *informerRun) handled(t *testing.T) {
	t.Helper()
	select {
	case <-r.reg.HasSyncedChecker().Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("handler registration did not sync; events %v", r.ev.list())
	}
}

// starts waits until the reflector has reported how it started (the
// observer may hear of it after the informer synced) and returns the
// causes.
func (r *informerRun) starts(t *testing.T) []string {
	t.Helper()
	poll.Until(t, 10*time.Second, "start reported", func() bool { return len(r.obs.starts()) > 0 })
	return r.obs.starts()
}

// populate cold-starts an informer with p over src so the file holds src's
// state, and stops it.
func populate(t *testing.T, f *testFile, src *fcache.FakeControllerSource, p bcache.Persistence, indexers cache.Indexers, setup func(*bcache.Informer)) {
	t.Helper()
	r := startInformer(t, f, noWatchList{src}, p, indexers, setup)
	r.synced(t)
	poll.Until(t, 10*time.Second, "cold sync", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	r.stop()
	f.reopen()
}

func podSource(names ...string) *fcache.FakeControllerSource {
	src := fcache.NewFakeControllerSource()
	for _, n := range names {
		src.Add(pod("ns", n, "", nil))
	}
	return src
}

// A collection stored under another ListIdentity (another selector under
// the same collection name) is never resumed: the informer lists.
func TestWarmStartListIdentityMismatchStartsCold(t *testing.T) {
	f := newTestFile(t)
	populate(t, f, podSource("a", "b"), bcache.Persistence{ListIdentity: "pods labels=app=web"}, nil, nil)

	other := podSource("c") // what the new selector admits
	r := startInformer(t, f, noWatchList{other}, bcache.Persistence{ListIdentity: "pods labels=app=db"}, nil, nil)
	r.synced(t)
	poll.Until(t, 10*time.Second, "list", func() bool { return len(r.ev.list()) >= 1 })
	if got, want := storeState(r.inf.GetStore()), sourceState(t, other); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("store = %v, want %v (only what the new list admits)", got, want)
	}
	if got := fmt.Sprint(r.ev.list()); got != "[add ns/c@1 initial=true]" {
		t.Errorf("events = %s, want only the listed object as an initial add", got)
	}
	if got := r.starts(t); fmt.Sprint(got) != "[cold]" {
		t.Errorf("starts = %v, want [cold]", got)
	}
}

// A file carried to another cluster starts cold; the same cluster resumes.
func TestWarmStartClusterMismatchStartsCold(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{Cluster: bcache.StaticCluster("uid-1")}, nil, nil)

	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{Cluster: bcache.StaticCluster("uid-1")}, nil, nil)
	r.synced(t)
	// A warm informer syncs when its file is open, before its reflector
	// has necessarily started: wait for the start before stopping.
	starts := r.starts(t)
	r.stop()
	if fmt.Sprint(starts) != "[resumed]" {
		t.Fatalf("same cluster: starts = %v, want [resumed]", starts)
	}
	f.reopen()

	other := podSource("x")
	r = startInformer(t, f, noWatchList{other}, bcache.Persistence{Cluster: bcache.StaticCluster("uid-2")}, nil, nil)
	r.synced(t)
	if got := r.starts(t); fmt.Sprint(got) != "[cold]" {
		t.Errorf("other cluster: starts = %v, want [cold]", got)
	}
	if got, want := storeState(r.inf.GetStore()), sourceState(t, other); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("other cluster: store = %v, want %v", got, want)
	}
}

// While the cluster's identity cannot be learned (apiserver down), nothing
// stored is handed out and the informer is not synced; it keeps asking.
func TestClusterIdentityRetriedBeforeResume(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a")
	populate(t, f, src, bcache.Persistence{Cluster: bcache.StaticCluster("uid-1")}, nil, nil)

	failures := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	cluster := func(ctx context.Context) (string, error) {
		select {
		case <-release:
			return "uid-1", nil
		default:
		}
		once.Do(func() { close(failures) })
		return "", errors.New("connection refused")
	}
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{Cluster: cluster}, nil, nil)
	select {
	case <-failures:
	case <-time.After(30 * time.Second):
		t.Fatal("the informer never asked for the cluster's identity")
	}
	select {
	case err := <-r.errs:
		if err == nil || !errorsContain(err, "connection refused") {
			t.Errorf("reported %v, want the identity error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the identity error was not reported to the watch error handler")
	}
	if r.inf.HasSynced() || len(r.ev.list()) != 0 {
		t.Fatalf("synced=%v events=%v while the cluster is unknown; want nothing", r.inf.HasSynced(), r.ev.list())
	}
	close(release)
	r.synced(t)
	if got := r.starts(t); fmt.Sprint(got) != "[resumed]" {
		t.Errorf("starts = %v, want [resumed]", got)
	}
}

func errorsContain(err error, s string) bool {
	return err != nil && contains(err.Error(), s)
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func dropLabels(obj interface{}) (interface{}, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p = p.DeepCopy()
		p.Labels = nil
		return p, nil
	}
	return obj, nil
}

func keepLabels(obj interface{}) (interface{}, error) { return obj, nil }

// Objects are stored transformed: a new transform version, or another
// transform function, starts cold instead of serving the old shape.
func TestWarmStartTransformChangeStartsCold(t *testing.T) {
	for _, tc := range []struct {
		name     string
		version  string
		fn       cache.TransformFunc
		wantCold bool
	}{
		{"same", "1", dropLabels, false},
		{"declared version changed", "2", dropLabels, true},
		{"function changed", "1", keepLabels, true},
		{"transform removed", "1", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTestFile(t)
			src := fcache.NewFakeControllerSource()
			src.Add(pod("ns", "a", "", map[string]string{"app": "web"}))
			populate(t, f, src, bcache.Persistence{TransformVersion: "1"}, nil, func(inf *bcache.Informer) {
				if err := inf.SetTransform(dropLabels); err != nil {
					t.Fatal(err)
				}
			})
			r := startInformer(t, f, noWatchList{src}, bcache.Persistence{TransformVersion: tc.version}, nil, func(inf *bcache.Informer) {
				if tc.fn != nil {
					if err := inf.SetTransform(tc.fn); err != nil {
						t.Fatal(err)
					}
				}
			})
			r.synced(t)
			want := "[resumed]"
			if tc.wantCold {
				want = "[cold]"
			}
			if got := r.starts(t); fmt.Sprint(got) != want {
				t.Errorf("starts = %v, want %s", got, want)
			}
		})
	}
}

// unregistered is a type the cache file's scheme does not know.
type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object {
	c := *u
	c.ObjectMeta = *u.ObjectMeta.DeepCopy()
	return &c
}

// A transform whose result cannot be stored makes the informer report it
// and keep its objects in memory, as client-go's would, instead of syncing
// with an empty store.
func TestTransformUnencodableFallsBackToMemory(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, func(inf *bcache.Informer) {
		if err := inf.SetTransform(func(obj interface{}) (interface{}, error) {
			p := obj.(*corev1.Pod)
			return &unregistered{ObjectMeta: p.ObjectMeta}, nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	r.synced(t)
	select {
	case err := <-r.errs:
		if !errors.Is(err, persist.ErrUnencodable) {
			t.Errorf("reported %v, want persist.ErrUnencodable", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the unencodable object was not reported to the watch error handler")
	}
	if got := storeState(r.inf.GetStore()); fmt.Sprint(got) != "[ns/a@1 ns/b@2 ns/c@3]" {
		t.Errorf("store = %v, want the three listed objects", got)
	}
	poll.Until(t, 10*time.Second, "three adds", func() bool { return len(r.ev.list()) >= 3 })
	if got := r.ev.list(); len(got) != 3 {
		t.Errorf("handler got %v, want three adds", got)
	}
	// Later events keep flowing through the in-memory store.
	src.Modify(pod("ns", "a", "", map[string]string{"v": "2"}))
	poll.Until(t, 10*time.Second, "update", func() bool { return len(r.ev.list()) == 4 })
	r.stop()
	f.reopen()
	r = startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	if got := r.starts(t); fmt.Sprint(got) != "[cold]" {
		t.Errorf("restart after the fallback: starts = %v, want [cold] (the file lacks what could not be stored)", got)
	}
}

// Index identity by Go name cannot tell byLabel("app") from
// byLabel("team") made at one call site: the warm start verifies stored
// entries and serves what client-go's indexer would.
func TestWarmStartRepairsClosureIndex(t *testing.T) {
	f := newTestFile(t)
	src := fcache.NewFakeControllerSource()
	src.Add(pod("ns", "a", "", map[string]string{"app": "web", "team": "red"}))
	src.Add(pod("ns", "b", "", map[string]string{"app": "db", "team": "web"}))

	var fnNames []string
	for run, label := range []string{"app", "team"} {
		indexers := cache.Indexers{"by": byLabel(label)} // one call site for both
		fnNames = append(fnNames, goruntime.FuncForPC(reflect.ValueOf(indexers["by"]).Pointer()).Name())
		if run == 0 {
			populate(t, f, src, bcache.Persistence{}, indexers, nil)
			continue
		}
		if fnNames[0] != fnNames[1] {
			t.Fatalf("the two closures have different Go names %v: this test needs them equal", fnNames)
		}
		r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, indexers, nil)
		r.synced(t)
		got, err := r.inf.GetIndexer().ByIndex("by", "web")
		if err != nil {
			t.Fatal(err)
		}
		ref := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
		for _, obj := range r.inf.GetStore().List() {
			if err := ref.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
		want, err := ref.ByIndex("by", "web")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(names(got)) != fmt.Sprint(names(want)) || len(want) != 1 {
			t.Errorf("ByIndex(by, web) = %v; client-go's indexer: %v", names(got), names(want))
		}
		if values := r.inf.GetIndexer().ListIndexFuncValues("by"); fmt.Sprint(sorted(values)) != "[red web]" {
			t.Errorf("index values = %v, want [red web]", values)
		}
	}
}

// bookmarkLW lists a fixed PodList and hands each watcher it opens to the
// test.
type bookmarkLW struct {
	list     *corev1.PodList
	watchers chan *watch.FakeWatcher
}

func (l *bookmarkLW) List(metav1.ListOptions) (runtime.Object, error) { return l.list.DeepCopy(), nil }
func (l *bookmarkLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	l.watchers <- w
	return w, nil
}
func (*bookmarkLW) IsWatchListSemanticsUnSupported() bool { return true }

// With the AtomicFIFO gate off the stored resourceVersion is still the
// list's, and bookmarks still advance it: a restart must not resume from an
// older object's version.
func TestAtomicFIFOGateOffStoresListResourceVersion(t *testing.T) {
	clientgofeaturestesting.SetFeatureDuringTest(t, clientgofeatures.AtomicFIFO, false)
	f := newTestFile(t)
	lw := &bookmarkLW{
		list: &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}, Items: []corev1.Pod{
			*pod("ns", "a", "1", nil), *pod("ns", "b", "2", nil), *pod("ns", "c", "3", nil),
		}},
		watchers: make(chan *watch.FakeWatcher, 10),
	}
	r := startInformer(t, f, lw, bcache.Persistence{}, nil, nil)
	r.synced(t)
	coll := r.inf.Indexer().Collection()
	poll.Until(t, 10*time.Second, "list", func() bool { return len(r.ev.list()) == 3 })
	if rv := coll.ResourceVersion(); rv != "100" {
		t.Errorf("stored resourceVersion after the list = %q, want the list's \"100\"", rv)
	}
	var w *watch.FakeWatcher
	select {
	case w = <-lw.watchers:
	case <-time.After(30 * time.Second):
		t.Fatal("no watch")
	}
	w.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "150"}})
	poll.Until(t, 10*time.Second, "bookmark stored", func() bool { return coll.ResourceVersion() == "150" })
}

// corruptRecord overwrites the stored record of key in collection with
// bytes no codec reads, through bbolt directly (the file must be closed).
func corruptRecord(t *testing.T, path, collection, key string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		objs := tx.Bucket([]byte("collections")).Bucket([]byte(collection)).Bucket([]byte("objects"))
		if objs.Get([]byte(key)) == nil {
			return fmt.Errorf("no record %q", key)
		}
		return objs.Put([]byte(key), []byte("not a record"))
	}); err != nil {
		t.Fatal(err)
	}
}

// A stored state that cannot be read back does not stop the informer. The
// part handlers were not given is set aside, and the informer relists, as
// client-go keeps retrying its list. The relist brings what was set aside.
func TestWarmStartReadErrorRelists(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b", "c")
	populate(t, f, src, bcache.Persistence{}, nil, nil)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	corruptRecord(t, f.path, "pods", "ns/b")
	f.open()

	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{}, nil, nil)
	r.synced(t)
	poll.Until(t, 10*time.Second, "relist", func() bool { return eq(storeState(r.inf.GetStore()), sourceState(t, src)) })
	select {
	case err := <-r.errs:
		if !errors.Is(err, persist.ErrCorruptRecord) {
			t.Errorf("reported %v, want persist.ErrCorruptRecord", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the read error was not reported")
	}
	r.handled(t)
	// Every object reaches the handler once: the unreadable chunk (here all
	// three) was set aside, so the relist adds it.
	poll.Until(t, 10*time.Second, "adds", func() bool { return len(r.ev.list()) >= 3 })
	got := sorted(r.ev.list())
	if fmt.Sprint(got) != "[add ns/a@1 initial=false add ns/b@2 initial=false add ns/c@3 initial=false]" {
		t.Errorf("events = %v, want each object once, as the relist's add", got)
	}
	poll.Until(t, 10*time.Second, "a relist reported last", func() bool {
		starts := r.obs.starts()
		return len(starts) > 0 && starts[len(starts)-1] == "relist-error"
	})
	if rv := r.inf.Indexer().Collection().ResourceVersion(); rv == "" {
		t.Error("the relist was applied but the collection has no resourceVersion")
	}
}

// The cluster's identity cannot be learned while the apiserver is down and
// the informer uses the factories' default identity. Meanwhile nothing
// stored is handed out, neither to handlers nor to listers. The informer is
// not synced. The file may belong to another cluster.
func TestClusterIdentityFailingHandsOutNothing(t *testing.T) {
	f := newTestFile(t)
	src := podSource("a", "b")
	populate(t, f, src, bcache.Persistence{Cluster: bcache.StaticCluster("uid-1")}, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)

	asked := make(chan struct{}, 1)
	cluster := func(ctx context.Context) (string, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return "", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	}
	r := startInformer(t, f, noWatchList{src}, bcache.Persistence{Cluster: cluster}, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	// Two reported failures: the informer has gone round its retry loop.
	for i := 0; i < 2; i++ {
		select {
		case err := <-r.errs:
			if !errorsContain(err, "connection refused") {
				t.Fatalf("reported %v, want the identity error", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the identity error was not reported to the watch error handler")
		}
	}
	idx := r.inf.GetIndexer()
	if got := idx.List(); len(got) != 0 {
		t.Errorf("lister List = %d objects while the cluster is unknown, want none", len(got))
	}
	if got := idx.ListKeys(); len(got) != 0 {
		t.Errorf("ListKeys = %v, want none", got)
	}
	if _, ok, err := idx.GetByKey("ns/a"); ok || err != nil {
		t.Errorf("GetByKey(ns/a) = %v, %v; want absent", ok, err)
	}
	if got, err := idx.ByIndex(cache.NamespaceIndex, "ns"); len(got) != 0 || err != nil {
		t.Errorf("ByIndex = %d objects, %v; want none", len(got), err)
	}
	if _, err := idx.ByIndex("nope", "ns"); err == nil {
		t.Error("ByIndex on an unknown index: no error")
	}
	if rv := r.inf.GetStore().LastStoreSyncResourceVersion(); rv != "" {
		t.Errorf("store resourceVersion %q, want none", rv)
	}
	if r.inf.HasSynced() || len(r.ev.list()) != 0 {
		t.Errorf("synced=%v events=%v while the cluster is unknown; want nothing", r.inf.HasSynced(), r.ev.list())
	}
	if n := len(r.obs.starts()); n != 0 {
		t.Errorf("reflector started (%v) before the cluster was known", r.obs.starts())
	}
}
