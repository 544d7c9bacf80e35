package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// TestFactoryDynamicRecovery runs the dynamic factory with
// PersistenceOptions.MetadataClient on a custom resource (served as JSON:
// custom resources have no protobuf) across an apiserver restart (410): the
// informer recovers with a metadata list and fetches of what changed — no
// full list — and its lister ends with exactly the server's objects, a
// deleted and recreated widget (a new UID) included.
func TestFactoryDynamicRecovery(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	admin, widgets := createWidgets(ctx, t, srv, "rec-a", "rec-b")
	path := cachePath(t)
	start := func(counter *byteCounter) (*factory.DynamicFactory, func()) {
		cfg := srv.Config()
		if counter != nil {
			cfg.Wrap(counter.wrap)
		}
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mc, err := metadata.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		db := openDB(t, path)
		f := factory.NewDynamicSharedInformerFactory(dc, 0, db, factory.WithDynamicPersistence(factory.PersistenceOptions{MetadataClient: mc}))
		f.ForResource(widgetGVR)
		stop := startResourceFactory(ctx, t, f)
		return f, func() {
			stop()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// 1. Cold.
	_, stop := start(nil)
	stop()

	// 2. While it is down: update, delete, recreate under the same name,
	// create; then the apiserver restarts, expiring every resourceVersion.
	changeWidgets(ctx, t, widgets, "rec-a", "rec-b")
	srv.RestartAPIServer(t)

	// 3. Warm: a 410, then the recovery.
	counter := newByteCounter("widgets")
	f, stop := start(counter)
	requireWidgetListerMatchesServer(ctx, t, admin, f.ForResource(widgetGVR).Lister())
	stop()
	_, requests := counter.snapshot()
	t.Logf("widget requests after the restart: %s", counter)
	if requests["list"] != 0 || requests["metadata"] == 0 {
		t.Errorf("requests %v: want a metadata list and fetches, no full list", requests)
	}
	// 4 updated, 2 recreated, 1 created: fetched one by one.
	if requests["fetch"] != 7 {
		t.Errorf("%d fetches, want 7 (the changed widgets)", requests["fetch"])
	}
}

// TestFactoryMetadataRecovery runs the metadata factory on a custom
// resource across an apiserver restart (410). Its objects are metadata, so
// it recovers from its own list: a handler registered before the start
// gets, beyond the stored objects' initial adds, exactly what changed
// while it was down — updates of the updated widgets, deletions of the
// deleted ones, recreated ones included (a relist, as client-go's, would
// give a recreated widget as an update from the old UID to the new), adds
// of the recreated and created — and no fetch is made; the lister ends
// with the server's UIDs and resourceVersions.
func TestFactoryMetadataRecovery(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), factoryTestTimeout)
	defer cancel()
	admin, widgets := createWidgets(ctx, t, srv, "mdrec-a", "mdrec-b")
	path := cachePath(t)
	type seen struct {
		mu                       sync.Mutex
		adds, updates, deletions map[string]int
	}
	start := func(counter *byteCounter) (*factory.MetadataFactory, *seen, func()) {
		cfg := srv.Config()
		if counter != nil {
			cfg.Wrap(counter.wrap)
		}
		mc, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := openDB(t, path)
		f := factory.NewMetadataSharedInformerFactory(mc, 0, db)
		s := &seen{adds: map[string]int{}, updates: map[string]int{}, deletions: map[string]int{}}
		count := func(m map[string]int, obj interface{}) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				t.Error(err)
			}
			s.mu.Lock()
			m[key]++
			s.mu.Unlock()
		}
		if _, err := f.ForResource(widgetGVR).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { count(s.adds, obj) },
			UpdateFunc: func(_, obj interface{}) { count(s.updates, obj) },
			DeleteFunc: func(obj interface{}) { count(s.deletions, obj) },
		}); err != nil {
			t.Fatal(err)
		}
		stop := startResourceFactory(ctx, t, f)
		return f, s, func() {
			stop()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// 1. Cold.
	_, _, stop := start(nil)
	stop()

	// 2. While it is down: update 4, delete 4 (2 of them recreated under the
	// same name: another UID), create 1; then the apiserver restarts,
	// expiring every resourceVersion.
	updated, deleted, added := changeWidgets(ctx, t, widgets, "mdrec-a", "mdrec-b")
	srv.RestartAPIServer(t)

	// 3. Warm: a 410, then the recovery.
	counter := newByteCounter("widgets")
	f, s, stop := start(counter)
	defer stop()
	lister := f.ForResource(widgetGVR).Lister()
	for {
		list, err := admin.Resource(widgetGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for _, it := range list.Items {
			want[it.GetNamespace()+"/"+it.GetName()] = string(it.GetUID()) + "@" + it.GetResourceVersion()
		}
		objs, err := lister.List(klabels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, o := range objs {
			m := o.(*metav1.PartialObjectMetadata)
			got[m.Namespace+"/"+m.Name] = string(m.UID) + "@" + m.ResourceVersion
		}
		s.mu.Lock()
		delivered := len(s.updates) >= len(updated) && len(s.deletions) >= len(deleted)
		s.mu.Unlock()
		if maps.Equal(got, want) && delivered {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the lister or the handler did not converge:\n lister %v\n server %v\n updates %v, deletions %v", got, want, s.updates, s.deletions)
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := func(m map[string]int) []string { return slices.Sorted(maps.Keys(m)) }
	if got := keys(s.updates); !slices.Equal(got, updated) {
		t.Errorf("updates of %v, want exactly the updated widgets %v", got, updated)
	}
	if got := keys(s.deletions); !slices.Equal(got, deleted) {
		t.Errorf("deletions of %v, want exactly the deleted widgets %v", got, deleted)
	}
	for _, k := range added {
		if s.adds[k] == 0 {
			t.Errorf("no add for %s", k)
		}
	}
	if n := s.adds["mdrec-a/new"]; n != 1 { // created while down
		t.Errorf("%d adds of the created widget, want 1", n)
	}
	_, requests := counter.snapshot()
	t.Logf("widget requests after the restart: %s", counter)
	if requests["fetch"] != 0 {
		t.Errorf("%d fetches, want none: the list holds the changed objects", requests["fetch"])
	}
}

// createWidgets installs the widgets CRD and creates 40 widgets, w-00 to
// w-39, alternately in namespaces a and b; it returns the admin client
// and the widgets of a namespace.
func createWidgets(ctx context.Context, t *testing.T, srv *apiservertest.Server, a, b string) (dynamic.Interface, func(ns string) dynamic.ResourceInterface) {
	t.Helper()
	admin := dynamicClient(t, srv.Config(), nil)
	installWidgetCRD(ctx, t, admin)
	createNamespaces(t, newClientset(t, srv.Config(), nil), a, b)
	widgets := func(ns string) dynamic.ResourceInterface { return admin.Resource(widgetGVR).Namespace(ns) }
	for i := range 40 {
		ns := []string{a, b}[i%2]
		if _, err := widgets(ns).Create(ctx, widget(ns, fmt.Sprintf("w-%02d", i), i), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create widget: %v", err)
		}
	}
	return admin, widgets
}

// changeWidgets changes createWidgets' widgets as a downtime would: it
// updates w-00 to w-03, deletes w-10 to w-13 and recreates w-10 and w-12
// under the same names (another UID), and creates a/new. It returns the
// keys updated, deleted and added, sorted.
func changeWidgets(ctx context.Context, t *testing.T, widgets func(ns string) dynamic.ResourceInterface, a, b string) (updated, deleted, added []string) {
	t.Helper()
	for i := range 4 {
		ns, name := []string{a, b}[i%2], fmt.Sprintf("w-%02d", i)
		w, err := widgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Object["spec"].(map[string]interface{})["ratio"] = 7.5
		if _, err := widgets(ns).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		updated = append(updated, ns+"/"+name)
	}
	for i := 10; i < 14; i++ {
		ns, name := []string{a, b}[i%2], fmt.Sprintf("w-%02d", i)
		if err := widgets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, ns+"/"+name)
		if i%2 == 0 {
			if _, err := widgets(ns).Create(ctx, widget(ns, name, 100+i), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			added = append(added, ns+"/"+name)
		}
	}
	if _, err := widgets(a).Create(ctx, widget(a, "new", 99), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	added = append(added, a+"/new")
	slices.Sort(updated)
	slices.Sort(deleted)
	slices.Sort(added)
	return updated, deleted, added
}
