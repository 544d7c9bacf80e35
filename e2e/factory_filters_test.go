package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/persist"
)

// TestFactoryFilters runs typed factories with different filters on one
// cache file:
//
//   - NamespaceSelectorUnfiltered: a WithNamespace("a"), a
//     WithTweakListOptions(tier=frontend) and an unfiltered factory each see
//     exactly their filtered share of the server's Pods (live changes too),
//     in three distinct collections described by their filters. Restarted
//     with the selector changed to tier=backend, the factory lists cold into
//     a new collection and never serves a frontend Pod, while the old
//     collection keeps its resourceVersion, objects and commit time; the
//     old selector then resumes it with no LIST.
//   - ClusterScopedInFilteredFactories: Namespaces ignore a factory's
//     namespace, so a WithNamespace("a") and an unfiltered factory on one
//     file list the same thing; both must serve them.
func TestFactoryFilters(t *testing.T) {
	const test = "factory-filters"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, "a", "b")
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	for _, ns := range []string{"a", "b"} {
		for i := range 3 {
			createTierPod(ctx, t, admin, ns, fmt.Sprintf("fe-%d", i), test, "frontend")
		}
		for i := range 2 {
			createTierPod(ctx, t, admin, ns, fmt.Sprintf("be-%d", i), test, "backend")
		}
	}

	// Namespace-, selector-filtered and unfiltered factories on one file:
	// each lister holds exactly its filtered share of the server, live
	// changes included, each in its own collection. Then the selector
	// factory restarts with a changed selector: a new collection, listed
	// cold, without the old selector's objects, while the old collection
	// stays intact and still resumes without a LIST.
	t.Run("NamespaceSelectorUnfiltered", func(t *testing.T) {
		path := cachePath(t)
		db := openDB(t, path)
		frontend := func(o *metav1.ListOptions) { o.LabelSelector = "tier=frontend" }
		fleet := []*filteredFactory{
			{name: "namespace a", namespace: "a",
				f: factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), nil), 0, db, factory.WithNamespace("a"))},
			{name: "tier=frontend", selector: "tier=frontend",
				f: factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), nil), 0, db, factory.WithTweakListOptions(frontend))},
			{name: "unfiltered",
				f: factory.NewSharedInformerFactory(typedClient(t, srv.Config(), nil), 0, db)},
		}
		for _, ff := range fleet {
			ff.start(ctx, t)
		}
		for _, ff := range fleet {
			ff.requireMatchesServer(ctx, t, admin)
		}
		infos := collectionInfos(t, db)
		if len(infos) != len(fleet) {
			t.Fatalf("%d collections in the file, want %d: %v", len(infos), len(fleet), collectionNames(infos))
		}
		for _, ff := range fleet {
			name := requirePersistent(t, ff.name, ff.f.Core().V1().Pods().Informer()).Collection().Name()
			info, ok := collectionInfo(t, db, name)
			if !ok {
				t.Fatalf("%s: collection %q not in the file (%v)", ff.name, name, collectionNames(infos))
			}
			if n := len(serverPods(t, admin, ff.namespace, ff.selector)); info.Objects != n {
				t.Errorf("%s: collection %q holds %d objects, the server %d", ff.name, name, info.Objects, n)
			}
			if info.Description["namespace"] != ff.namespace || info.Description["labelSelector"] != ff.selector {
				t.Errorf("%s: collection %q described as %v", ff.name, name, info.Description)
			}
			ff.collection = name
		}

		// Live changes reach exactly the factories whose filters match.
		createTierPod(ctx, t, admin, "b", "fe-live", test, "frontend")
		createTierPod(ctx, t, admin, "a", "be-live", test, "backend")
		deletePod(ctx, t, admin, "a", "fe-2")
		for _, ff := range fleet {
			ff.requireMatchesServer(ctx, t, admin)
		}
		for _, ff := range fleet {
			ff.stop()
		}
		old := fleet[1]
		oldInfo, _ := collectionInfo(t, db, old.collection)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		// While down: the old selector's share changes on the server.
		createTierPod(ctx, t, admin, "a", "fe-down", test, "frontend")
		deletePod(ctx, t, admin, "b", "fe-0")

		// Restart with a changed selector.
		db = openDB(t, path)
		counter := newAPICounter()
		backend := &filteredFactory{name: "tier=backend", selector: "tier=backend",
			f: factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), counter), 0, db,
				factory.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "tier=backend" }))}
		backend.start(ctx, t)
		backend.requireMatchesServer(ctx, t, admin)
		pods, err := backend.f.Core().V1().Pods().Lister().List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Labels["tier"] != "backend" {
				t.Errorf("changed selector serves %s/%s with tier=%s", p.Namespace, p.Name, p.Labels["tier"])
			}
		}
		if n := counter.listsOf("pods"); n != 1 {
			t.Errorf("changed selector: %d LIST requests, want 1 (a cold list)", n)
		}
		newName := requirePersistent(t, backend.name, backend.f.Core().V1().Pods().Informer()).Collection().Name()
		if newName == old.collection {
			t.Fatalf("changed selector resumed collection %q", newName)
		}
		infos = collectionInfos(t, db)
		if len(infos) != len(fleet)+1 {
			t.Errorf("%d collections after the changed selector, want %d: %v", len(infos), len(fleet)+1, collectionNames(infos))
		}
		if info, ok := collectionInfo(t, db, old.collection); !ok ||
			info.ResourceVersion != oldInfo.ResourceVersion || info.Objects != oldInfo.Objects || !info.Committed.Equal(oldInfo.Committed) {
			t.Errorf("old selector's collection %q changed: %+v, at stop %+v", old.collection, info, oldInfo)
		}

		// The old selector, restarted on the same file beside the new one,
		// resumes its intact collection without a LIST.
		counter = newAPICounter()
		again := &filteredFactory{name: "tier=frontend again", selector: "tier=frontend",
			f: factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), counter), 0, db, factory.WithTweakListOptions(frontend))}
		again.start(ctx, t)
		again.requireMatchesServer(ctx, t, admin)
		if n := counter.listsOf("pods"); n != 0 {
			t.Errorf("old selector restarted: %d LIST requests, want none", n)
		}
		backend.stop()
		again.stop()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})

	// A cluster-scoped resource ignores a factory's namespace, so a
	// namespace-filtered and an unfiltered factory list the same Namespaces.
	// On one file, both must still serve them (and their Pods).
	t.Run("ClusterScopedInFilteredFactories", func(t *testing.T) {
		db := openDB(t, cachePath(t))
		fleet := []*filteredFactory{
			{name: "namespace a", namespace: "a", namespaces: true,
				f: factory.NewSharedInformerFactoryWithOptions(typedClient(t, srv.Config(), nil), 0, db, factory.WithNamespace("a"))},
			{name: "unfiltered", namespaces: true,
				f: factory.NewSharedInformerFactory(typedClient(t, srv.Config(), nil), 0, db)},
		}
		for _, ff := range fleet {
			ff.start(ctx, t)
		}
		for _, ff := range fleet {
			ff.requireMatchesServer(ctx, t, admin)
		}
		for _, ff := range fleet {
			ff.stop()
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// filteredFactory is a typed factory with its filters, running a Pod
// informer (and a Namespace informer if namespaces is set).
type filteredFactory struct {
	name                string
	namespace, selector string // the factory's filters
	namespaces          bool
	f                   *factory.Factory
	collection          string // of the Pod informer

	cancel context.CancelFunc
	once   sync.Once
}

func (ff *filteredFactory) start(ctx context.Context, t *testing.T) {
	t.Helper()
	ff.f.Core().V1().Pods().Informer()
	if ff.namespaces {
		ff.f.Core().V1().Namespaces().Informer()
	}
	ctx, ff.cancel = context.WithCancel(ctx)
	ff.f.StartWithContext(ctx)
	t.Cleanup(ff.stop)
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if res := ff.f.WaitForCacheSyncWithContext(syncCtx); res.Err != nil {
		t.Fatalf("%s: sync: %v", ff.name, res.Err)
	}
}

func (ff *filteredFactory) stop() {
	ff.once.Do(func() {
		ff.cancel()
		ff.f.Shutdown()
	})
}

// requireMatchesServer waits until the factory's listers hold exactly the
// server's objects under its filters.
func (ff *filteredFactory) requireMatchesServer(ctx context.Context, t *testing.T, admin kubernetes.Interface) {
	t.Helper()
	var diffs []string
	for {
		pods, err := ff.f.Core().V1().Pods().Lister().List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		diffs = diffStates(serverPods(t, admin, ff.namespace, ff.selector), listState(pods), 10)
		if ff.namespaces {
			nss, err := ff.f.Core().V1().Namespaces().Lister().List(klabels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range diffStates(serverNamespaces(t, admin), listState(nss), 10) {
				diffs = append(diffs, "namespace "+d)
			}
		}
		if len(diffs) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: listers differ from the server's filtered state:\n  %s", ff.name, strings.Join(diffs, "\n  "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverNamespaces returns the server's Namespaces (keys "/<name>").
func serverNamespaces(t *testing.T, admin kubernetes.Interface) state {
	t.Helper()
	list, err := admin.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing namespaces: %v", err)
	}
	return listState(ptrs(list.Items))
}

func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// createTierPod creates a labelled Pod with label tier=<tier>.
func createTierPod(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns, name, test, tier string) {
	t.Helper()
	p := pod(ns, name, test)
	p.Labels = maps.Clone(p.Labels)
	p.Labels["tier"] = tier
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
}

func collectionNames(infos []persist.CollectionInfo) []string {
	var out []string
	for _, info := range infos {
		out = append(out, info.Name)
	}
	return out
}
