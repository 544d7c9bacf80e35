package factory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// parityIndexers are a user's index functions: one value per Pod, and
// several per Pod, duplicates and empty strings included.
func parityIndexers() cache.Indexers { return parityIndexersWith("") }

// parityIndexersWith prefixes byNode's values with prefix, as a changed
// index function under the same name would.
func parityIndexersWith(prefix string) cache.Indexers {
	return cache.Indexers{
		"byNode": func(obj any) ([]string, error) {
			return []string{prefix + obj.(*corev1.Pod).Spec.NodeName}, nil
		},
		"byTag": func(obj any) ([]string, error) {
			tags, ok := obj.(*corev1.Pod).Labels["tags"]
			if !ok {
				return nil, nil
			}
			return strings.Split(tags, ","), nil
		},
	}
}

func parityPod(i int) *corev1.Pod {
	tags := []string{"a,a", "a,b", "b", "", "c,,c"}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("pod-%04d", i)},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%4)}}
	if i%6 != 5 {
		p.Labels = map[string]string{"tags": tags[i%5]}
	}
	if i%4 == 3 {
		p.Spec.NodeName = ""
	}
	return p
}

// eventLog records what a handler is told, and what the informer's indexer
// and lister answer about that object inside the handler.
type eventLog struct {
	mu     sync.Mutex
	cond   *sync.Cond
	events []string
	faults []string
}

func newEventLog() *eventLog {
	l := &eventLog{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *eventLog) handler(inf cache.SharedIndexInformer) cache.ResourceEventHandler {
	check := func(what string, obj any) {
		pod := obj.(*corev1.Pod)
		key := pod.Namespace + "/" + pod.Name
		var faults []string
		got, exists, err := inf.GetIndexer().GetByKey(key)
		// A handler runs behind the store, so the object may be gone already.
		if err != nil {
			faults = append(faults, fmt.Sprintf("%s %s: GetByKey = %v, %v", what, key, exists, err))
		} else if exists && got.(*corev1.Pod).ResourceVersion < pod.ResourceVersion && len(got.(*corev1.Pod).ResourceVersion) == len(pod.ResourceVersion) {
			faults = append(faults, fmt.Sprintf("%s %s: store holds rv %s, handler told rv %s", what, key, got.(*corev1.Pod).ResourceVersion, pod.ResourceVersion))
		}
		if err == nil && exists {
			faults = append(faults, indexHoldsOwn(inf.GetIndexer(), what, key, got.(*corev1.Pod))...)
		}
		l.mu.Lock()
		l.faults = append(l.faults, faults...)
		l.mu.Unlock()
	}
	record := func(s string) {
		l.mu.Lock()
		l.events = append(l.events, s)
		l.cond.Broadcast()
		l.mu.Unlock()
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			check("add", obj)
			p := obj.(*corev1.Pod)
			record(fmt.Sprintf("add %s/%s initial=%v", p.Namespace, p.Name, initial))
		},
		UpdateFunc: func(old, obj any) {
			check("update", obj)
			p, o := obj.(*corev1.Pod), old.(*corev1.Pod)
			record(fmt.Sprintf("update %s/%s node %q->%q tags %q->%q", p.Namespace, p.Name, o.Spec.NodeName, p.Spec.NodeName, o.Labels["tags"], p.Labels["tags"]))
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				record("delete-unknown " + d.Key)
				return
			}
			p := obj.(*corev1.Pod)
			record(fmt.Sprintf("delete %s/%s", p.Namespace, p.Name))
		},
	}
}

// waitFor blocks until n events are recorded, and returns them sorted.
func (l *eventLog) waitFor(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.events) < n {
		l.cond.Wait()
	}
	out := append([]string(nil), l.events...)
	sort.Strings(out)
	return out
}

func (l *eventLog) takeFaults() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.faults
	l.faults = nil
	return out
}

// indexAnswers is everything the indexer and lister answer, in one text.
func indexAnswers(t *testing.T, inf cache.SharedIndexInformer) string {
	t.Helper()
	idx := inf.GetIndexer()
	var b strings.Builder
	keys := idx.ListKeys()
	sort.Strings(keys)
	fmt.Fprintf(&b, "keys %d\n", len(keys))
	for _, k := range keys {
		obj, ok, err := idx.GetByKey(k)
		if err != nil || !ok {
			fmt.Fprintf(&b, "  %s: %v %v\n", k, ok, err)
			continue
		}
		fmt.Fprintf(&b, "  %s rv=%s\n", k, obj.(*corev1.Pod).ResourceVersion)
	}
	fmt.Fprintf(&b, "list %d\n", len(idx.List()))
	for _, name := range []string{"byNode", "byTag"} {
		values := idx.ListIndexFuncValues(name)
		sort.Strings(values)
		fmt.Fprintf(&b, "index %s values %q\n", name, values)
		for _, v := range values {
			ik, err := idx.IndexKeys(name, v)
			sort.Strings(ik)
			objs, err2 := idx.ByIndex(name, v)
			var bk []string
			for _, o := range objs {
				p := o.(*corev1.Pod)
				bk = append(bk, p.Namespace+"/"+p.Name)
			}
			sort.Strings(bk)
			fmt.Fprintf(&b, "  %q IndexKeys %v (%v) ByIndex %v (%v)\n", v, ik, err, bk, err2)
		}
		sample := parityPod(7)
		objs, err := idx.Index(name, sample)
		fmt.Fprintf(&b, "  Index(pod-0007) %d %v\n", len(objs), err)
	}
	return b.String()
}

type paritySide struct {
	name     string
	inf      cache.SharedIndexInformer
	lister   func() int
	before   *eventLog
	after    *eventLog
	afterReg cache.ResourceEventHandlerRegistration
	waitSync func(ctx context.Context) bool
	shutdown func()
}

func startParitySide(t *testing.T, ctx context.Context, name string, f informers.SharedInformerFactory, indexers cache.Indexers, start func(), waitSync func(context.Context) bool, shutdown func()) *paritySide {
	t.Helper()
	pods := f.Core().V1().Pods()
	inf := pods.Informer()
	if err := inf.AddIndexers(indexers); err != nil {
		t.Fatalf("%s: AddIndexers before Start: %v", name, err)
	}
	s := &paritySide{name: name, inf: inf, before: newEventLog(), after: newEventLog(), waitSync: waitSync, shutdown: shutdown}
	s.lister = func() int {
		got, err := pods.Lister().List(labels.Everything())
		if err != nil {
			t.Errorf("%s: lister: %v", name, err)
		}
		return len(got)
	}
	if _, err := inf.AddEventHandler(s.before.handler(inf)); err != nil {
		t.Fatal(err)
	}
	start()
	if !waitSync(ctx) {
		t.Fatalf("%s: not synced", name)
	}
	reg, err := inf.AddEventHandler(s.after.handler(inf))
	if err != nil {
		t.Fatal(err)
	}
	s.afterReg = reg
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatalf("%s: late handler not synced", name)
	}
	return s
}

func clientGoSide(t *testing.T, ctx context.Context, srv *podAPIServer, indexers cache.Indexers) *paritySide {
	f := informers.NewSharedInformerFactory(srv.clientset(t), 0)
	return startParitySide(t, ctx, "client-go", f, indexers, func() { f.Start(ctx.Done()) },
		func(ctx context.Context) bool { return f.WaitForCacheSyncWithContext(ctx).Err == nil },
		f.Shutdown)
}

func boltSide(t *testing.T, ctx context.Context, srv *podAPIServer, db *persist.DB, indexers cache.Indexers, opts ...factory.Option) *paritySide {
	f := factory.NewSharedInformerFactoryWithOptions(srv.clientset(t), 0, db, opts...)
	return startParitySide(t, ctx, "boltinformer", f, indexers, func() { f.Start(ctx.Done()) },
		func(ctx context.Context) bool {
			res := f.WaitForCacheSyncWithContext(ctx)
			if res.Err != nil {
				t.Errorf("boltinformer: WaitForCacheSync: %v", res.Err)
			}
			return res.Err == nil
		},
		f.Shutdown)
}

func compareSides(t *testing.T, when string, a, b *paritySide, nBefore, nAfter int) {
	t.Helper()
	if ga, gb := a.before.waitFor(nBefore), b.before.waitFor(nBefore); strings.Join(ga, "\n") != strings.Join(gb, "\n") {
		t.Errorf("%s: handler registered before Start: client-go told\n%s\nboltinformer told\n%s", when, diffLines(ga, gb), diffLines(gb, ga))
	}
	if ga, gb := a.after.waitFor(nAfter), b.after.waitFor(nAfter); strings.Join(ga, "\n") != strings.Join(gb, "\n") {
		t.Errorf("%s: handler registered after Start: client-go told\n%s\nboltinformer told\n%s", when, diffLines(ga, gb), diffLines(gb, ga))
	}
	for _, s := range []*paritySide{a, b} {
		for _, f := range append(s.before.takeFaults(), s.after.takeFaults()...) {
			t.Errorf("%s: %s: inside a handler: %s", when, s.name, f)
		}
	}
	if ia, ib := indexAnswers(t, a.inf), indexAnswers(t, b.inf); ia != ib {
		t.Errorf("%s: indexer answers differ:\nclient-go only:\n%s\nboltinformer only:\n%s", when,
			diffLines(strings.Split(ia, "\n"), strings.Split(ib, "\n")), diffLines(strings.Split(ib, "\n"), strings.Split(ia, "\n")))
	}
	if la, lb := a.lister(), b.lister(); la != lb {
		t.Errorf("%s: Lister().List: client-go %d Pods, boltinformer %d", when, la, lb)
	}
}

// diffLines returns the lines of a that b lacks, at most 20.
func diffLines(a, b []string) string {
	in := map[string]int{}
	for _, l := range b {
		in[l]++
	}
	var out []string
	for _, l := range a {
		if in[l] > 0 {
			in[l]--
			continue
		}
		out = append(out, "  "+l)
	}
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("  ... %d more", len(out)-20))
	}
	return strings.Join(out, "\n")
}

// A cold start through the factory, then the next changes, then a restart
// on the same file with changes missed while down: handlers and indexes
// answer as client-go's informer on the same apiserver.
func TestColdStartThenRestartMatchClientGo(t *testing.T) {
	t.Run("unbounded", func(t *testing.T) { parityColdStartThenRestart(t) })
	t.Run("bounded", func(t *testing.T) {
		parityColdStartThenRestart(t, factory.WithPersistence(factory.PersistenceOptions{CacheObjects: 100}))
	})
}

// parityServer returns a server holding n Pods, and a new cache file.
func parityServer(t *testing.T, n int) (*podAPIServer, string, *persist.DB) {
	t.Helper()
	srv := newPodAPIServer(t)
	for i := 0; i < n; i++ {
		srv.apply(watch.Added, parityPod(i))
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return srv, path, db
}

func parityColdStartThenRestart(t *testing.T, opts ...factory.Option) {
	const n = 1100 // three pages of the reflectors' 500
	srv, path, db := parityServer(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	cg := clientGoSide(t, ctx, srv, parityIndexers())
	bi := boltSide(t, ctx, srv, db, parityIndexers(), opts...)
	compareSides(t, "right after sync", cg, bi, n, n)

	// The next changes: a node move, a tag change to duplicates, a new Pod,
	// a deletion.
	moved := parityPod(1)
	moved.Spec.NodeName = "node-9"
	srv.apply(watch.Modified, moved)
	retagged := parityPod(2)
	retagged.Labels = map[string]string{"tags": "z,z,a"}
	srv.apply(watch.Modified, retagged)
	srv.apply(watch.Added, parityPod(n))
	srv.apply(watch.Deleted, parityPod(3))
	compareSides(t, "after four changes", cg, bi, n+4, n+4)

	cancel()
	cg.shutdown()
	bi.shutdown()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Changes while both are down.
	gone := parityPod(4)
	srv.apply(watch.Deleted, gone)
	moved = parityPod(5)
	moved.Spec.NodeName = "node-7"
	srv.apply(watch.Modified, moved)
	srv.apply(watch.Added, parityPod(n+1))

	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel = context.WithCancel(context.Background())
	cg = clientGoSide(t, ctx, srv, parityIndexers())
	bi = boltSide(t, ctx, srv, db, parityIndexers(), opts...)
	defer bi.shutdown()
	defer cg.shutdown()
	defer cancel()
	// client-go lists cold: n+1 Pods, all initial adds. A warm start gives
	// the stored ones as initial adds and the missed changes as events, so
	// compare only the indexer answers here, and the events' count after.
	bi.before.waitFor(1)
	if ia, ib := indexAnswers(t, cg.inf), indexAnswers(t, bi.inf); ia != ib {
		t.Errorf("after the restart: indexer answers differ:\nclient-go only:\n%s\nboltinformer only:\n%s",
			diffLines(strings.Split(ia, "\n"), strings.Split(ib, "\n")), diffLines(strings.Split(ib, "\n"), strings.Split(ia, "\n")))
	}
	for _, s := range []*paritySide{cg, bi} {
		for _, f := range append(s.before.takeFaults(), s.after.takeFaults()...) {
			t.Errorf("after the restart: %s: inside a handler: %s", s.name, f)
		}
	}
	// The warm start tells the stored Pods as initial adds, then what it
	// missed as ordinary events, in the order the watch replays them.
	var notInitial []string
	initial := 0
	for _, e := range bi.before.waitFor(n + 3) {
		if strings.HasSuffix(e, "initial=true") {
			initial++
			continue
		}
		notInitial = append(notInitial, e)
	}
	want := []string{
		fmt.Sprintf("add ns%d/pod-%04d initial=false", (n+1)%3, n+1),
		"delete ns1/pod-0004",
		`update ns2/pod-0005 node "node-1"->"node-7" tags ""->""`,
	}
	if initial != n || strings.Join(notInitial, "|") != strings.Join(want, "|") {
		t.Errorf("warm start told the handler registered before Start %d initial adds and %q, want %d and %q", initial, notInitial, n, want)
	}
}

// A user changes an index function but keeps its name and declares no
// version. The docs promise a warm start never serves stale entries.
func TestChangedIndexFunctionAfterRestart(t *testing.T) {
	const n = 600
	srv, path, db := parityServer(t, n)
	ctx, cancel := context.WithCancel(context.Background())
	bi := boltSide(t, ctx, srv, db, parityIndexers())
	cancel()
	bi.shutdown()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	moved := parityPod(1)
	moved.Spec.NodeName = "node-9"
	srv.apply(watch.Modified, moved)
	srv.takeFullLists()

	db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel = context.WithCancel(context.Background())
	cg := clientGoSide(t, ctx, srv, parityIndexersWith("v2:"))
	bi = boltSide(t, ctx, srv, db, parityIndexersWith("v2:"))
	defer bi.shutdown()
	defer cg.shutdown()
	defer cancel()
	// Only the file's collection could serve stale entries; a cold start
	// would pass without testing them.
	if pages := srv.takeFullLists(); pages != 0 {
		t.Errorf("the restart listed %d pages; it did not start warm", pages)
	}
	if ia, ib := indexAnswers(t, cg.inf), indexAnswers(t, bi.inf); ia != ib {
		t.Errorf("after a restart with a changed byNode: indexer answers differ:\nclient-go only:\n%s\nboltinformer only:\n%s",
			diffLines(strings.Split(ia, "\n"), strings.Split(ib, "\n")), diffLines(strings.Split(ib, "\n"), strings.Split(ia, "\n")))
	}
}

// indexHoldsOwn checks that the indexes answer for stored as the store
// holds it: its key under each of its values, each value listed. It
// reports nothing if the store moved on meanwhile.
func indexHoldsOwn(idx cache.Indexer, what, key string, stored *corev1.Pod) []string {
	var faults []string
	for name, fn := range parityIndexers() {
		values, _ := fn(stored)
		listed := map[string]bool{}
		for _, v := range idx.ListIndexFuncValues(name) {
			listed[v] = true
		}
		for _, v := range values {
			keys, err := idx.IndexKeys(name, v)
			found := false
			for _, k := range keys {
				found = found || k == key
			}
			objs, err2 := idx.ByIndex(name, v)
			inBy := false
			for _, o := range objs {
				p := o.(*corev1.Pod)
				inBy = inBy || p.Namespace+"/"+p.Name == key
			}
			if !found || !inBy || !listed[v] || err != nil || err2 != nil {
				faults = append(faults, fmt.Sprintf("%s %s rv %s: index %s value %q: IndexKeys has it %v (%v), ByIndex has it %v (%v), ListIndexFuncValues has the value %v",
					what, key, stored.ResourceVersion, name, v, found, err, inBy, err2, listed[v]))
			}
		}
	}
	now, ok, err := idx.GetByKey(key)
	if err != nil || !ok || now.(*corev1.Pod).ResourceVersion != stored.ResourceVersion {
		return nil
	}
	return faults
}
