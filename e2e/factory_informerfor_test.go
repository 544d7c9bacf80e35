package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// schedulerPodSelector is the field selector of kube-scheduler's Pod
// informer: pods that can still hold node resources.
const schedulerPodSelector = "status.phase!=Succeeded,status.phase!=Failed"

// newSchedulerPodInformer is kube-scheduler's newPodInformer
// (pkg/scheduler/scheduler.go), which it registers with
// factory.InformerFor: a field-selected Pod informer whose transform strips
// managedFields.
func newSchedulerPodInformer(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	tweak := func(o *metav1.ListOptions) { o.FieldSelector = schedulerPodSelector }
	informer := coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{}, tweak)
	_ = informer.SetTransform(func(obj interface{}) (interface{}, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			p.ManagedFields = nil
		}
		return obj, nil
	})
	return informer
}

// schedulerFactories is a kube-scheduler-style factory (its Pod informer
// registered through InformerFor) and a plain factory whose Pods informer
// lists every Pod, both on one cache file.
type schedulerFactories struct {
	db                 *persist.DB
	scheduler, plain   *factory.Factory
	schedPods, allPods cache.SharedIndexInformer
	schedEvents        *recorder
	schedCounter       *apiCounter
	plainCounter       *apiCounter
	cancel             context.CancelFunc
}

func startSchedulerFactories(ctx context.Context, t *testing.T, cfg func(*apiCounter) kubernetes.Interface, path string) *schedulerFactories {
	t.Helper()
	s := &schedulerFactories{db: openDB(t, path), schedEvents: &recorder{}, schedCounter: newAPICounter(), plainCounter: newAPICounter()}
	s.scheduler = factory.NewSharedInformerFactory(cfg(s.schedCounter), 0, s.db)
	s.plain = factory.NewSharedInformerFactory(cfg(s.plainCounter), 0, s.db)
	s.schedPods = s.scheduler.InformerFor(&corev1.Pod{}, newSchedulerPodInformer)
	s.allPods = s.plain.Core().V1().Pods().Informer()
	if _, err := s.schedPods.AddEventHandler(s.schedEvents); err != nil {
		t.Fatal(err)
	}
	ctx, s.cancel = context.WithCancel(ctx)
	for _, f := range []*factory.Factory{s.scheduler, s.plain} {
		f.StartWithContext(ctx)
	}
	for _, f := range []*factory.Factory{s.scheduler, s.plain} {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			t.Fatalf("factory sync: %v", res.Err)
		}
	}
	return s
}

// stop stops both factories and closes the file.
func (s *schedulerFactories) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	s.scheduler.Shutdown()
	s.plain.Shutdown()
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// requireMatchesServer waits until each informer holds exactly what its
// selector admits on the server.
func (s *schedulerFactories) requireMatchesServer(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	var want, wantAll state
	poll.Until(t, factoryTestTimeout, "informers equal to the server", func() bool {
		want, wantAll = serverPhasePods(ctx, t, admin, schedulerPodSelector), serverPhasePods(ctx, t, admin, "")
		return len(diffStates(want, storeState(t, s.schedPods.GetStore()), 1)) == 0 &&
			len(diffStates(wantAll, storeState(t, s.allPods.GetStore()), 1)) == 0
	})
	requireSameState(t, "scheduler's Pod informer", want, storeState(t, s.schedPods.GetStore()))
	requireSameState(t, "plain Pods informer", wantAll, storeState(t, s.allPods.GetStore()))
	for _, obj := range s.schedPods.GetStore().List() {
		if p := obj.(*corev1.Pod); p.ManagedFields != nil {
			t.Errorf("scheduler's informer holds %s/%s with managedFields: its transform was not applied", p.Namespace, p.Name)
		}
	}
}

// serverPhasePods lists the server's Pods with a field selector.
func serverPhasePods(ctx context.Context, t *testing.T, admin kubernetes.Interface, fieldSelector string) state {
	t.Helper()
	list, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatalf("listing pods on the server: %v", err)
	}
	return serverListState(t, list)
}

// TestFactoryInformerForSelector runs kube-scheduler's Pod informer,
// registered through InformerFor with a field selector and a transform,
// beside a plain Pods informer on one cache file: each holds exactly what
// its selector admits, in its own collection; a Pod that turns Succeeded
// leaves the scheduler's informer as a delete and stays in the plain one;
// after a restart neither lists, and each converges to its selector's
// share, including a Pod that failed while they were down.
func TestFactoryInformerForSelector(t *testing.T) {
	const test = "factory-informerfor"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, "a")
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	phases := []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}
	for i, phase := range phases {
		createPodInPhase(ctx, t, admin, "a", fmt.Sprintf("p-%d", i), test, phase)
	}
	client := func(c *apiCounter) kubernetes.Interface { return typedClient(t, srv.Config(), c) }
	path := cachePath(t)

	s := startSchedulerFactories(ctx, t, client, path)
	s.requireMatchesServer(ctx, t, admin)
	if n := len(s.schedPods.GetStore().ListKeys()); n != 3 {
		t.Errorf("scheduler's informer holds %d Pods, want the 3 not terminated", n)
	}
	sched := requirePersistent(t, "scheduler's Pod informer", s.schedPods).Collection().Name()
	plain := requirePersistent(t, "plain Pods informer", s.allPods).Collection().Name()
	if sched == plain {
		t.Fatalf("both informers write collection %q", sched)
	}
	info, ok := collectionInfo(t, s.db, sched)
	if !ok || info.Description["fieldSelector"] != schedulerPodSelector {
		t.Errorf("scheduler's collection %q described as %v", sched, info.Description)
	}

	// A running Pod turns Succeeded: the server's watch tells the
	// field-selected informer it no longer matches.
	setPodPhase(ctx, t, admin, "a", "p-0", corev1.PodSucceeded)
	s.requireMatchesServer(ctx, t, admin)
	if !hasDelete(s.schedEvents.snapshot(), "a/p-0") {
		t.Errorf("a/p-0 turned Succeeded, but the scheduler's handler got no delete: %v", s.schedEvents.snapshot())
	}
	if _, exists, _ := s.allPods.GetStore().GetByKey("a/p-0"); !exists {
		t.Error("a/p-0 left the plain Pods informer")
	}
	s.stop(t)

	// While down: a Pod fails, another starts.
	setPodPhase(ctx, t, admin, "a", "p-1", corev1.PodFailed)
	createPodInPhase(ctx, t, admin, "a", "p-new", test, corev1.PodRunning)

	s = startSchedulerFactories(ctx, t, client, path)
	defer s.stop(t)
	if n := s.schedCounter.listsOf("pods") + s.plainCounter.listsOf("pods"); n != 0 {
		t.Errorf("restart: %d LIST requests for pods, want none", n)
	}
	s.requireMatchesServer(ctx, t, admin)
	if !hasDelete(s.schedEvents.snapshot(), "a/p-1") {
		t.Errorf("a/p-1 failed while down, but the restarted scheduler's handler got no delete: %v", s.schedEvents.snapshot())
	}
	if n := s.schedCounter.listsOf("pods") + s.plainCounter.listsOf("pods"); n != 0 {
		t.Errorf("after the restart: %d LIST requests for pods, want none", n)
	}
	if infos := collectionInfos(t, s.db); len(infos) != 2 {
		t.Errorf("%d collections, want the scheduler's and the plain one: %v", len(infos), collectionNames(infos))
	}
}

// hasDelete reports whether events hold a delete of key.
func hasDelete(events []event, key string) bool {
	for _, e := range events {
		if e.kind == evDelete && e.key == key {
			return true
		}
	}
	return false
}

// TestFactoryForeignCluster opens a cache file written against one cluster
// with a factory on another (its own kube-apiserver and etcd): the
// collection starts cold, no handler is ever given an object of the first
// cluster, and the informer ends equal to the second cluster.
func TestFactoryForeignCluster(t *testing.T) {
	const test = "factory-foreign-cluster"
	first := apiservertest.Start(t, apiservertest.Options{})
	second := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	firstAdmin := newClientset(t, first.Config(), nil)
	secondAdmin := newClientset(t, second.Config(), nil)
	createNamespaces(t, firstAdmin, "a")
	createNamespaces(t, secondAdmin, "a")
	for i := range 5 {
		createPodInPhase(ctx, t, firstAdmin, "a", fmt.Sprintf("first-%d", i), test, corev1.PodRunning)
	}
	for i := range 2 {
		createPodInPhase(ctx, t, secondAdmin, "a", fmt.Sprintf("second-%d", i), test, corev1.PodRunning)
	}
	path := cachePath(t)

	// Fill the file from the first cluster.
	db := openDB(t, path)
	f := factory.NewSharedInformerFactory(typedClient(t, first.Config(), nil), 0, db)
	informer := f.Core().V1().Pods().Informer()
	runCtx, stop := context.WithCancel(ctx)
	f.StartWithContext(runCtx)
	if res := f.WaitForCacheSyncWithContext(runCtx); res.Err != nil {
		t.Fatal(res.Err)
	}
	firstPods := serverPods(t, firstAdmin, "", "")
	poll.Until(t, factoryTestTimeout, "first cluster's pods stored", func() bool {
		return len(diffStates(firstPods, storeState(t, informer.GetStore()), 1)) == 0
	})
	collection := requirePersistent(t, "first cluster's Pods informer", informer).Collection().Name()
	if info, _ := collectionInfo(t, db, collection); info.Objects != len(firstPods) {
		t.Fatalf("file holds %d Pods of the first cluster, want %d", info.Objects, len(firstPods))
	}
	stop()
	f.Shutdown()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The same file against the second cluster.
	db = openDB(t, path)
	counter := newAPICounter()
	events := &recorder{}
	f = factory.NewSharedInformerFactory(typedClient(t, second.Config(), counter), 0, db)
	informer = f.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(events); err != nil {
		t.Fatal(err)
	}
	runCtx, stop = context.WithCancel(ctx)
	defer func() {
		stop()
		f.Shutdown()
		_ = db.Close()
	}()
	f.StartWithContext(runCtx)
	if res := f.WaitForCacheSyncWithContext(runCtx); res.Err != nil {
		t.Fatal(res.Err)
	}
	secondPods := serverPods(t, secondAdmin, "", "")
	requireSameState(t, "Pods informer on the second cluster", secondPods, storeState(t, informer.GetStore()))
	for _, e := range events.snapshot() {
		if _, ok := firstPods[e.key]; ok {
			t.Errorf("a handler was given the first cluster's %s", e)
		}
	}
	if n := counter.listsOf("pods"); n != 1 {
		t.Errorf("%d LIST requests for pods on the second cluster, want 1 (a cold start)", n)
	}
	if got := requirePersistent(t, "second cluster's Pods informer", informer).Collection().Name(); got != collection {
		t.Errorf("collection %q, want %q reused cold", got, collection)
	}
}

// goDropLabel marks the ConfigMaps the Go-side filter of
// goFilteredConfigMaps drops; goMarkAnnotation is what it sets on the
// ConfigMaps it keeps.
const (
	goDropLabel      = "boltinformer-e2e-drop"
	goMarkAnnotation = "boltinformer-e2e-go-filter"
)

// goFilteredConfigMaps returns a constructor for InformerFor whose
// ListerWatcher selects test's ConfigMaps by label (a request the factory
// sees) and, in Go, drops those labelled goDropLabel and annotates the rest
// (which no request shows), listing and watching (watch.Filter). Like many
// controllers' constructors it registers a handler, events, on the informer
// it builds.
func goFilteredConfigMaps(test string, events cache.ResourceEventHandler) internalinterfaces.NewInformerFunc {
	return func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		selector := e2eLabel + "=" + test
		keep := func(cm *corev1.ConfigMap) bool { return cm.Labels[goDropLabel] == "" }
		mark := func(cm *corev1.ConfigMap) *corev1.ConfigMap {
			cm = cm.DeepCopy()
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations[goMarkAnnotation] = "kept"
			return cm
		}
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.LabelSelector = selector
				list, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, opts)
				if err != nil {
					return nil, err
				}
				kept := list.Items[:0]
				for i := range list.Items {
					if keep(&list.Items[i]) {
						kept = append(kept, *mark(&list.Items[i]))
					}
				}
				list.Items = kept
				return list, nil
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.LabelSelector = selector
				w, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).Watch(ctx, opts)
				if err != nil {
					return nil, err
				}
				return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
					cm, ok := e.Object.(*corev1.ConfigMap)
					if !ok || e.Type == watch.Bookmark {
						return e, true
					}
					if !keep(cm) {
						return e, false
					}
					e.Object = mark(cm)
					return e, true
				}), nil
			},
		}
		informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, cs), &corev1.ConfigMap{}, resync, cache.Indexers{})
		_, _ = informer.AddEventHandler(events) // cannot fail before the informer runs
		return informer
	}
}

// serverGoFiltered lists test's ConfigMaps on the server and keeps what
// goFilteredConfigMaps' filter keeps.
func serverGoFiltered(t *testing.T, admin kubernetes.Interface, test string) state {
	t.Helper()
	list, err := admin.CoreV1().ConfigMaps(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{LabelSelector: e2eLabel + "=" + test})
	if err != nil {
		t.Fatalf("listing configmaps on the server: %v", err)
	}
	out := state{}
	for i := range list.Items {
		if cm := &list.Items[i]; cm.Labels[goDropLabel] == "" {
			out[cm.Namespace+"/"+cm.Name] = cm.ResourceVersion
		}
	}
	return out
}

// goFilteredFactory is a factory on a file whose ConfigMaps informer comes
// from goFilteredConfigMaps, registered through InformerFor.
type goFilteredFactory struct {
	db       *persist.DB
	factory  *factory.Factory
	informer cache.SharedIndexInformer
	events   *recorder
	counter  *requestCounter
	cancel   context.CancelFunc
}

func startGoFilteredFactory(ctx context.Context, t *testing.T, srv *apiservertest.Server, path, test, version string) *goFilteredFactory {
	t.Helper()
	g := &goFilteredFactory{db: openDB(t, path), events: &recorder{}, counter: &requestCounter{resource: "configmaps"}}
	g.factory = factory.NewSharedInformerFactoryWithOptions(newClientset(t, srv.Config(), g.counter), 0, g.db, factory.WithPersistence(factory.PersistenceOptions{ListerWatcherVersion: &version}))
	g.informer = g.factory.InformerFor(&corev1.ConfigMap{}, goFilteredConfigMaps(test, g.events))
	ctx, g.cancel = context.WithCancel(ctx)
	g.factory.StartWithContext(ctx)
	if res := g.factory.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		t.Fatalf("factory sync: %v", res.Err)
	}
	return g
}

func (g *goFilteredFactory) stop(t *testing.T) {
	t.Helper()
	g.cancel()
	g.factory.Shutdown()
	if err := g.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// requireDroppedNeverSeen fails if a handler was given a ConfigMap the Go
// filter drops.
func requireDroppedNeverSeen(t *testing.T, who string, events []event) {
	t.Helper()
	for _, e := range events {
		if strings.Contains(e.key, "/drop-") {
			t.Errorf("%s: a handler was given %s, which the ListerWatcher drops in Go", who, e)
		}
	}
}

// TestFactoryInformerForGoFilter registers through InformerFor a
// constructor whose ListerWatcher filters and rewrites ConfigMaps in Go and
// registers a handler on the informer it builds, beside client-go's own
// factory given the same constructor: client-go's informer never holds nor
// hands out a dropped ConfigMap, and neither does the persistent one, on a
// cold start, while running, and after a warm restart (no LIST) across
// changes made while it was down. A changed ListerWatcherVersion starts
// the collection cold (one LIST).
func TestFactoryInformerForGoFilter(t *testing.T) {
	const test = "factory-informerfor-gofilter"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, "a")
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	create := func(name string, drop bool) {
		t.Helper()
		cm := configMap("a", name, test, 0)
		if drop {
			cm.Labels[goDropLabel] = "yes"
		}
		if _, err := admin.CoreV1().ConfigMaps("a").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create configmap %s: %v", name, err)
		}
	}
	update := func(name string) {
		t.Helper()
		cm, err := admin.CoreV1().ConfigMaps("a").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["index"] += "+"
		if _, err := admin.CoreV1().ConfigMaps("a").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update configmap %s: %v", name, err)
		}
	}
	remove := func(name string) {
		t.Helper()
		if err := admin.CoreV1().ConfigMaps("a").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete configmap %s: %v", name, err)
		}
	}
	for i := range 3 {
		create(fmt.Sprintf("keep-%d", i), false)
	}
	for i := range 2 {
		create(fmt.Sprintf("drop-%d", i), true)
	}

	theirEvents := &recorder{}
	theirs := informers.NewSharedInformerFactory(newClientset(t, srv.Config(), nil), 0)
	reference := theirs.InformerFor(&corev1.ConfigMap{}, goFilteredConfigMaps(test, theirEvents))
	theirCtx, stopTheirs := context.WithCancel(ctx)
	defer func() { stopTheirs(); theirs.Shutdown() }()
	theirs.Start(theirCtx.Done())
	theirs.WaitForCacheSync(theirCtx.Done())

	// Both informers hold exactly what the filter keeps, and only marked.
	requireFiltered := func(what string, g *goFilteredFactory) {
		t.Helper()
		var want state
		// On a timeout the comparisons below say what differs.
		_ = poll.Wait(factoryTestTimeout, func() bool {
			want = serverGoFiltered(t, admin, test)
			return len(diffStates(want, storeState(t, reference.GetStore()), 1)) == 0 &&
				len(diffStates(want, storeState(t, g.informer.GetStore()), 1)) == 0
		})
		requireSameState(t, what+": client-go's informer", want, storeState(t, reference.GetStore()))
		requireSameState(t, what+": InformerFor's informer", want, storeState(t, g.informer.GetStore()))
		for _, obj := range g.informer.GetStore().List() {
			if cm := obj.(*corev1.ConfigMap); cm.Annotations[goMarkAnnotation] != "kept" {
				t.Errorf("%s: InformerFor's informer holds %s/%s not rewritten by its ListerWatcher", what, cm.Namespace, cm.Name)
			}
		}
		requireDroppedNeverSeen(t, what+": client-go's informer", theirEvents.snapshot())
		requireDroppedNeverSeen(t, what+": InformerFor's informer", g.events.snapshot())
	}

	path := cachePath(t)
	g := startGoFilteredFactory(ctx, t, srv, path, test, "v1")
	name := requirePersistent(t, "InformerFor's ConfigMaps informer", g.informer).Collection().Name()
	if !strings.HasSuffix(name, " listwatch=custom") {
		t.Errorf("collection %q does not say its ListerWatcher is custom", name)
	}
	requireFiltered("cold start", g)
	if n := g.counter.lists.Load(); n != 1 {
		t.Errorf("cold start: %d LIST requests for configmaps, want 1", n)
	}

	// While running.
	create("drop-running", true)
	create("keep-running", false)
	update("keep-0")
	update("drop-0")
	remove("keep-1")
	requireFiltered("running", g)
	g.stop(t)

	// While down.
	create("drop-down", true)
	create("keep-down", false)
	update("drop-1")
	remove("keep-2")

	g = startGoFilteredFactory(ctx, t, srv, path, test, "v1")
	requireFiltered("warm restart", g)
	if n := g.counter.lists.Load(); n != 0 {
		t.Errorf("warm restart: %d LIST requests for configmaps, want none", n)
	}
	if !g.events.seen("a/keep-down") {
		t.Errorf("warm restart: keep-down, created while down, never reached newFunc's handler: %v", g.events.snapshot())
	}
	g.stop(t)

	// Another declared version: the same collection, cold.
	g = startGoFilteredFactory(ctx, t, srv, path, test, "v2")
	defer g.stop(t)
	requireFiltered("new ListerWatcher version", g)
	if n := g.counter.lists.Load(); n != 1 {
		t.Errorf("new ListerWatcher version: %d LIST requests for configmaps, want 1 (a cold start)", n)
	}
	if got := requirePersistent(t, "InformerFor's ConfigMaps informer", g.informer).Collection().Name(); got != name {
		t.Errorf("new ListerWatcher version: collection %q, want %q reused cold", got, name)
	}
	if infos := collectionInfos(t, g.db); len(infos) != 1 {
		t.Errorf("%d collections, want one: %v", len(infos), collectionNames(infos))
	}
}
