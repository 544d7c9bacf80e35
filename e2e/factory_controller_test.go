package e2e

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/examples/podcounter"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// TestFactoryControllerWarmRestart runs the podcounter example controller,
// written only against client-go's informers.SharedInformerFactory, on
// boltinformer's factory:
//
//  1. cold, on an empty cache file: its listers are boltinformer's indexers
//     and hold exactly the server's Pods and ConfigMaps, its counts and the
//     summaries it writes are what the server's Pods imply (a stale summary
//     in a namespace without Pods is deleted), and the file holds the
//     listers' state once it stops;
//  2. warm, on the same file after Pods were created, deleted and changed
//     phase and summaries were tampered with while it was down: it makes no
//     LIST request at all and converges to the new state, deletions
//     included;
//  3. cold, on client-go's own informers.NewSharedInformerFactory: the same
//     counts, no write (the summaries are right), one LIST per resource.
func TestFactoryControllerWarmRestart(t *testing.T) {
	const test = "factory-controller"
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	admin := newClientset(t, srv.Config(), nil)
	namespaces := []string{"pc-0", "pc-1", "pc-2", "pc-3"}
	createNamespaces(t, admin, namespaces...)
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	for _, ns := range namespaces[:3] {
		for i := range 10 {
			createPodInPhase(ctx, t, admin, ns, fmt.Sprintf("p-%02d", i), test, phases[i%len(phases)])
		}
	}
	populateConfigMaps(t, admin, test, namespaces, 20)
	writeSummary(ctx, t, admin, "pc-3", map[string]string{"Running": "7"}) // stale: pc-3 has no Pods

	path := cachePath(t)

	// 1. Cold, on boltinformer's factory.
	counter := newAPICounter()
	db := openDB(t, path)
	client := typedClient(t, srv.Config(), counter)
	f := factory.NewSharedInformerFactory(client, 0, db)
	cold := startPodCounter(ctx, t, client, f, db)
	podIdx := requirePersistent(t, "cold Pods informer", f.Core().V1().Pods().Informer())
	cmIdx := requirePersistent(t, "cold ConfigMaps informer", f.Core().V1().ConfigMaps().Informer())
	waitPodCounterConverged(ctx, t, "cold run", admin, cold.c)
	requireListersMatchServer(ctx, t, admin, f, namespaces)
	requireListersServedByCollection(t, f, podIdx, cmIdx)
	podColl, cmColl := podIdx.Collection().Name(), cmIdx.Collection().Name()
	cold.stop(t)
	if n, m := counter.listsOf("pods"), counter.listsOf("configmaps"); n != 1 || m != 1 {
		t.Errorf("cold run made %d Pod and %d ConfigMap LIST requests, want 1 each", n, m)
	}
	// The file holds exactly what the listers held.
	requireSameState(t, "stored Pods after the cold run", serverPods(t, admin, "", ""), storedState(t, path, podColl))
	stoppedConfigMaps := storedState(t, path, cmColl)
	for _, ns := range namespaces {
		requireSameState(t, "stored ConfigMaps of "+ns+" after the cold run", serverConfigMaps(t, admin, ns, ""), inNamespace(stoppedConfigMaps, ns))
	}

	// While the controller is down.
	for i := range 10 {
		deletePod(ctx, t, admin, "pc-0", fmt.Sprintf("p-%02d", i)) // pc-0's summary must go
	}
	for i := range 3 {
		deletePod(ctx, t, admin, "pc-1", fmt.Sprintf("p-%02d", i))
	}
	createPodInPhase(ctx, t, admin, "pc-1", "p-10", test, corev1.PodPending)
	createPodInPhase(ctx, t, admin, "pc-1", "p-11", test, corev1.PodFailed)
	setPodPhase(ctx, t, admin, "pc-1", "p-04", corev1.PodRunning)            // was Pending
	setPodPhase(ctx, t, admin, "pc-1", "p-05", corev1.PodSucceeded)          // was Running
	writeSummary(ctx, t, admin, "pc-2", map[string]string{"Running": "999"}) // tampered: must be repaired
	writeSummary(ctx, t, admin, "pc-3", map[string]string{"Failed": "1"})    // stale again: must go
	createNamespaces(t, admin, "pc-4")
	namespaces = append(namespaces, "pc-4")
	for i, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodFailed, corev1.PodPending} {
		createPodInPhase(ctx, t, admin, "pc-4", fmt.Sprintf("p-%02d", i), test, phase)
	}

	// 2. Warm, on the same file.
	counter = newAPICounter()
	db = openDB(t, path)
	client = typedClient(t, srv.Config(), counter)
	f = factory.NewSharedInformerFactory(client, 0, db)
	warm := startPodCounter(ctx, t, client, f, db)
	podIdx = requirePersistent(t, "warm Pods informer", f.Core().V1().Pods().Informer())
	cmIdx = requirePersistent(t, "warm ConfigMaps informer", f.Core().V1().ConfigMaps().Informer())
	warmCounts := waitPodCounterConverged(ctx, t, "warm run", admin, warm.c)
	requireListersMatchServer(ctx, t, admin, f, namespaces)
	requireListersServedByCollection(t, f, podIdx, cmIdx)
	if got := podIdx.Collection().Name(); got != podColl {
		t.Errorf("warm Pods collection %q, cold %q", got, podColl)
	}
	// ForResource hands out the informer of the generated accessor (which
	// client-go v0.37 wraps in a typed informer: compare the indexers).
	generic, err := f.ForResource(corev1.SchemeGroupVersion.WithResource("pods"))
	if err != nil {
		t.Fatal(err)
	}
	if idx := factory.PersistentIndexer(generic.Informer()); idx != podIdx {
		t.Errorf("ForResource(pods) has indexer %p, Core().V1().Pods() %p", idx, podIdx)
	}
	if objs, err := generic.Lister().List(klabels.Everything()); err != nil {
		t.Error(err)
	} else {
		requireSameState(t, "ForResource(pods) lister", serverPods(t, admin, "", ""), listState(objs))
	}
	warm.stop(t)
	if n, m := counter.listsOf("pods"), counter.listsOf("configmaps"); n != 0 || m != 0 {
		t.Errorf("warm restart made %d Pod and %d ConfigMap LIST requests, want none", n, m)
	}
	if counter.watchesOf("pods") == 0 || counter.watchesOf("configmaps") == 0 {
		t.Errorf("warm restart made %d Pod and %d ConfigMap WATCH requests, want at least one each",
			counter.watchesOf("pods"), counter.watchesOf("configmaps"))
	}
	t.Logf("HasSynced: cold %v, warm %v; warm run: %d ConfigMap writes, %d LISTs",
		cold.synced.Round(time.Millisecond), warm.synced.Round(time.Millisecond),
		counter.writesOf("configmaps"), counter.listsOf("pods")+counter.listsOf("configmaps"))

	// 3. The same controller on client-go's factory.
	counter = newAPICounter()
	client = typedClient(t, srv.Config(), counter)
	cg := informers.NewSharedInformerFactory(client, 0)
	clientGo := startPodCounter(ctx, t, client, cg, nil)
	if factory.PersistentIndexer(cg.Core().V1().Pods().Informer()) != nil {
		t.Fatal("client-go's factory built a boltinformer indexer")
	}
	cgCounts := waitPodCounterConverged(ctx, t, "client-go run", admin, clientGo.c)
	requireListersMatchServer(ctx, t, admin, cg, namespaces)
	clientGo.stop(t)
	if !reflect.DeepEqual(cgCounts, warmCounts) {
		t.Errorf("counts on client-go's factory %v, on boltinformer's %v", cgCounts, warmCounts)
	}
	if n := counter.writesOf("configmaps"); n != 0 {
		t.Errorf("client-go run wrote %d ConfigMaps; the summaries were already right", n)
	}
	if n, m := counter.listsOf("pods"), counter.listsOf("configmaps"); n != 1 || m != 1 {
		t.Errorf("client-go run made %d Pod and %d ConfigMap LIST requests, want 1 each", n, m)
	}
}

// podCounterRun is the podcounter controller running on a factory.
type podCounterRun struct {
	f      informers.SharedInformerFactory
	db     *persist.DB // closed after the factory's Shutdown; nil for client-go's factory
	c      *podcounter.Controller
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	synced time.Duration // from New to the factory's WaitForCacheSync
}

// startPodCounter builds the controller on f, starts f and the controller,
// and waits for f's informers to sync. The run is stopped in t's cleanup if
// the test does not stop it.
func startPodCounter(ctx context.Context, t *testing.T, client kubernetes.Interface, f informers.SharedInformerFactory, db *persist.DB) *podCounterRun {
	t.Helper()
	start := time.Now()
	c, err := podcounter.New(client, f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &podCounterRun{f: f, db: db, c: c, cancel: cancel, done: make(chan error, 1)}
	f.StartWithContext(ctx)
	go func() { r.done <- c.Run(ctx, 2) }()
	t.Cleanup(func() { r.stop(t) })
	res := f.WaitForCacheSyncWithContext(ctx)
	if res.Err != nil {
		t.Fatalf("factory sync: %v", res.Err)
	}
	if len(res.Synced) != 2 {
		t.Fatalf("factory synced %v, want the Pod and ConfigMap informers", res.Synced)
	}
	r.synced = time.Since(start)
	return r
}

// stop stops the controller, then the factory's informers (Shutdown waits
// for them), then closes the cache file.
func (r *podCounterRun) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("controller: %v", err)
		}
		r.f.Shutdown()
		if r.db != nil {
			if err := r.db.Close(); err != nil {
				t.Errorf("close %s: %v", r.db.Path(), err)
			}
		}
	})
}

// waitPodCounterConverged waits until the controller's counts are what the
// server's Pods imply and the server's summaries are exactly those counts,
// and returns the counts.
func waitPodCounterConverged(ctx context.Context, t *testing.T, what string, admin kubernetes.Interface, c *podcounter.Controller) podcounter.Counts {
	t.Helper()
	start := time.Now()
	var want, got podcounter.Counts
	var summaries, wantSummaries map[string]map[string]string
	for {
		want = serverPodCounts(ctx, t, admin)
		wantSummaries = map[string]map[string]string{}
		for ns, phases := range want {
			wantSummaries[ns] = podcounter.SummaryData(phases)
		}
		got, summaries = c.Counts(), serverSummaries(ctx, t, admin)
		if reflect.DeepEqual(got, want) && reflect.DeepEqual(summaries, wantSummaries) {
			t.Logf("%s: converged in %v: %v", what, time.Since(start).Round(time.Millisecond), got)
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not converged: counts %v, want %v; summaries %v, want %v", what, got, want, summaries, wantSummaries)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverPodCounts counts the server's Pods per namespace and phase.
func serverPodCounts(ctx context.Context, t *testing.T, admin kubernetes.Interface) podcounter.Counts {
	t.Helper()
	pods, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	out := podcounter.Counts{}
	for _, p := range pods.Items {
		if out[p.Namespace] == nil {
			out[p.Namespace] = map[corev1.PodPhase]int{}
		}
		out[p.Namespace][p.Status.Phase]++
	}
	return out
}

// serverSummaries returns the data of every summary ConfigMap by namespace.
func serverSummaries(ctx context.Context, t *testing.T, admin kubernetes.Interface) map[string]map[string]string {
	t.Helper()
	cms, err := admin.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + podcounter.SummaryName})
	if err != nil {
		t.Fatalf("listing summaries: %v", err)
	}
	out := map[string]map[string]string{}
	for _, cm := range cms.Items {
		out[cm.Namespace] = maps.Clone(cm.Data)
		if out[cm.Namespace] == nil {
			out[cm.Namespace] = map[string]string{}
		}
	}
	return out
}

// requireListersMatchServer waits until f's Pod lister holds exactly the
// server's Pods and its ConfigMap lister exactly the server's ConfigMaps of
// namespaces, and checks lister Gets.
func requireListersMatchServer(ctx context.Context, t *testing.T, admin kubernetes.Interface, f informers.SharedInformerFactory, namespaces []string) {
	t.Helper()
	pods, cms := f.Core().V1().Pods().Lister(), f.Core().V1().ConfigMaps().Lister()
	var diffs []string
	for {
		list, err := pods.List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		diffs = diffStates(serverPods(t, admin, "", ""), listState(list), 10)
		for _, ns := range namespaces {
			list, err := cms.ConfigMaps(ns).List(klabels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffStates(serverConfigMaps(t, admin, ns, ""), listState(list), 10) {
				diffs = append(diffs, "configmap "+d)
			}
		}
		if len(diffs) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("listers differ from the server:\n  %v", diffs)
		case <-time.After(100 * time.Millisecond):
		}
	}
	server, err := admin.CoreV1().Pods("pc-1").Get(ctx, "p-05", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := pods.Pods("pc-1").Get("p-05")
	if err != nil || got.ResourceVersion != server.ResourceVersion || got.Status.Phase != server.Status.Phase {
		t.Errorf("lister Get(pc-1/p-05) = %v, %v; server has rv %s phase %s", got, err, server.ResourceVersion, server.Status.Phase)
	}
}

// requireListersServedByCollection checks that the generated listers read
// the informers' persistent collections: they list exactly the collections'
// objects. It retries briefly, as the apiserver may still touch its own
// ConfigMaps between the two reads.
func requireListersServedByCollection(t *testing.T, f informers.SharedInformerFactory, podIdx, cmIdx *bcache.Indexer) {
	t.Helper()
	var diffs []string
	err := poll.Wait(2*time.Second, func() bool {
		pods, err := f.Core().V1().Pods().Lister().List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		stored, err := podIdx.Collection().ResourceVersions()
		if err != nil {
			t.Fatal(err)
		}
		diffs = diffStates(stored, listState(pods), 10)
		cms, err := f.Core().V1().ConfigMaps().Lister().List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		if stored, err = cmIdx.Collection().ResourceVersions(); err != nil {
			t.Fatal(err)
		}
		for _, d := range diffStates(stored, listState(cms), 10) {
			diffs = append(diffs, "configmap "+d)
		}
		return len(diffs) == 0
	})
	if err == nil {
		return
	}
	t.Fatalf("listers differ from their collections:\n  %v", diffs)
}

// storedState opens the cache file read-only and returns the key →
// resourceVersion map of the named collection.
func storedState(t *testing.T, path, collection string) state {
	t.Helper()
	db, err := persist.Open(path, persist.Options{ReadOnly: true, Scheme: scheme.Scheme})
	if err != nil {
		t.Fatalf("open %s read-only: %v", path, err)
	}
	defer db.Close()
	coll, err := db.Collection(collection, persist.CollectionOptions{})
	if err != nil {
		t.Fatalf("collection %q: %v", collection, err)
	}
	rvs, err := coll.ResourceVersions()
	if err != nil {
		t.Fatal(err)
	}
	return state(rvs)
}

// inNamespace returns the entries of s in namespace ns.
func inNamespace(s state, ns string) state {
	out := state{}
	for k, rv := range s {
		if n, _ := splitKey(k); n == ns {
			out[k] = rv
		}
	}
	return out
}

// createPodInPhase creates a labelled Pod and sets its status phase.
func createPodInPhase(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns, name, test string, phase corev1.PodPhase) {
	t.Helper()
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod(ns, name, test), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	setPodPhase(ctx, t, admin, ns, name, phase)
}

// setPodPhase sets a Pod's status phase, as a kubelet would.
func setPodPhase(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns, name string, phase corev1.PodPhase) {
	t.Helper()
	p, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	if p.Status.Phase == phase {
		return
	}
	p.Status.Phase = phase
	if _, err := admin.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("set phase of pod %s/%s to %s: %v", ns, name, phase, err)
	}
}

func deletePod(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns, name string) {
	t.Helper()
	if err := admin.CoreV1().Pods(ns).Delete(ctx, name, *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
}

// writeSummary creates or overwrites namespace's summary ConfigMap, as
// someone other than the controller would.
func writeSummary(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns string, data map[string]string) {
	t.Helper()
	cms := admin.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, podcounter.SummaryName, metav1.GetOptions{})
	if err == nil {
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	} else {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: podcounter.SummaryName}, Data: data}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("write summary in %s: %v", ns, err)
	}
}
