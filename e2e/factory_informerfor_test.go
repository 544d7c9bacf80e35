package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/apiservertest"
	"github.com/boltinformer/boltinformer/internal/poll"
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
