package e2e

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/apiservertest"
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
	admin := dynamicClient(t, srv.Config(), nil)
	installWidgetCRD(ctx, t, admin)
	createNamespaces(t, newClientset(t, srv.Config(), nil), "rec-a", "rec-b")
	widgets := func(ns string) dynamic.ResourceInterface { return admin.Resource(widgetGVR).Namespace(ns) }
	for i := range 40 {
		ns := []string{"rec-a", "rec-b"}[i%2]
		if _, err := widgets(ns).Create(ctx, widget(ns, fmt.Sprintf("w-%02d", i), i), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create widget: %v", err)
		}
	}
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
	for i := range 4 {
		ns, name := []string{"rec-a", "rec-b"}[i%2], fmt.Sprintf("w-%02d", i)
		w, err := widgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Object["spec"].(map[string]interface{})["ratio"] = 7.5
		if _, err := widgets(ns).Update(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 10; i < 14; i++ {
		ns, name := []string{"rec-a", "rec-b"}[i%2], fmt.Sprintf("w-%02d", i)
		if err := widgets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // recreated: another UID
			if _, err := widgets(ns).Create(ctx, widget(ns, name, 100+i), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := widgets("rec-a").Create(ctx, widget("rec-a", "new", 99), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
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
