package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// configMapRules let a ServiceAccount read the ConfigMaps of its namespace.
var configMapRules = []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// TestFactoryNamespacedServiceAccount runs the typed and the dynamic factory,
// limited to one namespace (WithNamespace, NewFilteredDynamicSharedInformerFactory),
// as a ServiceAccount whose only grant is a RoleBinding in that namespace —
// so it may not read the kube-system namespace the default cluster identity
// is read from — on one cache file:
//
//  1. cold: both sync (before the fallback they never did), one LIST each,
//     and each collection records the ServiceAccount's UID as the cluster;
//  2. warm, after changes while stopped: 0 LISTs, the listers catch up;
//  3. the same namespaced factories as the admin, who may read kube-system:
//     the collections, recorded under the other kind, start cold (a LIST
//     each) and now record kube-system's UID, bare as always;
//  4. as the ServiceAccount again: cold once more, back to its kind;
//  5. as the ServiceAccount with kube-apiserver stopped: the identity cannot
//     be read, so nothing stored is handed out, the informer is not synced
//     and reports why (no other kind is picked); once the apiserver is back
//     it syncs under the ServiceAccount's identity.
func TestFactoryNamespacedServiceAccount(t *testing.T) {
	const (
		test = "namespaced-sa"
		ns   = "team"
	)
	srv := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 4*factoryTestTimeout)
	defer cancel()
	admin := newClientset(t, srv.Config(), nil)
	saCfg, sa, err := srv.ServiceAccountConfig(ctx, ns, "ctrl", configMapRules)
	if err != nil {
		t.Fatal(err)
	}
	// The premise: the ServiceAccount may list its namespace's ConfigMaps
	// but not read kube-system.
	saClient := newClientset(t, saCfg, nil)
	if _, err := saClient.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount reading namespace kube-system: %v, want Forbidden", err)
	}
	kubeSystem, err := admin.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	populateConfigMaps(t, admin, test, []string{ns}, 50)
	saIdentity := fmt.Sprintf("serviceaccount/%s/%s/%s", ns, sa.Name, sa.UID)
	path := cachePath(t)

	run := func(what string, cfg *rest.Config, wantLists int64, wantCluster string) {
		t.Helper()
		r := startNamespacedFactories(ctx, t, path, cfg, ns)
		server := serverConfigMaps(t, admin, ns, "")
		poll.Until(t, time.Minute, what+": the listers to match the server", func() bool {
			return len(diffStates(server, r.typedState(), 1)) == 0 && len(diffStates(server, r.dynamicState(), 1)) == 0
		})
		typedColl, dynamicColl := r.stop(t)
		if n := r.typed.lists.Load(); n != wantLists {
			t.Errorf("%s: typed factory sent %d full LISTs, want %d", what, n, wantLists)
		}
		if n := r.dynamic.lists.Load(); n != wantLists {
			t.Errorf("%s: dynamic factory sent %d full LISTs, want %d", what, n, wantLists)
		}
		for _, coll := range []string{typedColl, dynamicColl} {
			if got := recordedProvenance(t, path, coll)["cluster"]; got != wantCluster {
				t.Errorf("%s: collection %q records cluster %q, want %q", what, coll, got, wantCluster)
			}
		}
	}

	// 1. Cold, as the ServiceAccount.
	run("cold, as the ServiceAccount", saCfg, 1, saIdentity)

	// 2. Warm, after changes while stopped.
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "while-down", test, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, "cm-00007", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	run("warm, as the ServiceAccount", saCfg, 0, saIdentity)

	// 3. and 4. The other kind starts cold, either way.
	run("as the admin, after the ServiceAccount", srv.Config(), 1, string(kubeSystem.UID))
	run("as the ServiceAccount, after the admin", saCfg, 1, saIdentity)

	// 5. Offline.
	srv.StopAPIServer()
	db := openDB(t, path)
	f := factory.NewSharedInformerFactoryWithOptions(typedClient(t, saCfg, nil), 0, db, factory.WithNamespace(ns))
	informer := f.Core().V1().ConfigMaps().Informer()
	reported := make(chan error, 100)
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		select {
		case reported <- err:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	lister := f.Core().V1().ConfigMaps().Lister()
	fctx, stop := context.WithCancel(ctx)
	defer func() { stop(); f.Shutdown() }()
	f.Start(fctx.Done())
	for range 2 {
		select {
		case err := <-reported:
			if !strings.Contains(err.Error(), "cluster's identity is not known") {
				t.Errorf("offline: reported %v, want the unknown cluster identity", err)
			}
		case <-ctx.Done():
			t.Fatal("offline: no error reported while the apiserver is down")
		}
	}
	if informer.HasSynced() {
		t.Error("offline: synced while the cluster's identity cannot be read")
	}
	if got, err := lister.List(k8slabels.Everything()); len(got) != 0 || err != nil {
		t.Errorf("offline: lister served %d stored objects (%v) before the cluster's identity was proven, want none", len(got), err)
	}
	srv.StartAPIServer(t)
	waitClosed(t, informer.HasSyncedChecker().Done(), factoryTestTimeout, "sync once the apiserver is back")
	server := serverConfigMaps(t, admin, ns, "")
	poll.Until(t, time.Minute, "offline, then back: the lister to match the server", func() bool {
		got, _ := lister.List(k8slabels.Everything())
		return len(diffStates(server, listState(got), 1)) == 0
	})
	stop()
	f.Shutdown()
	coll := ""
	for _, info := range collectionInfos(t, db) {
		if strings.HasPrefix(info.Name, "typed/") {
			coll = info.Name
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recordedProvenance(t, path, coll)["cluster"]; got != saIdentity {
		t.Errorf("offline, then back: collection %q records cluster %q, want %q", coll, got, saIdentity)
	}
}

// namespacedFactories are a typed and a dynamic factory for one namespace's
// ConfigMaps on one cache file, each with its own request counter.
type namespacedFactories struct {
	db                         *persist.DB
	typed, dynamic             *requestCounter
	typedF                     *factory.Factory
	dynamicF                   *factory.DynamicFactory
	typedLister, dynamicLister func() ([]interface{}, error)
	cancel                     context.CancelFunc
}

// startNamespacedFactories opens path and starts both factories with cfg's
// credentials, failing the test unless both sync within a minute.
func startNamespacedFactories(ctx context.Context, t *testing.T, path string, cfg *rest.Config, ns string) *namespacedFactories {
	t.Helper()
	r := &namespacedFactories{
		db:      openDB(t, path),
		typed:   &requestCounter{resource: "configmaps"},
		dynamic: &requestCounter{resource: "configmaps"},
	}
	typedCfg := protobuf(cfg)
	typedCfg.Wrap(r.typed.wrap)
	cs, err := kubernetes.NewForConfig(typedCfg)
	if err != nil {
		t.Fatal(err)
	}
	dynamicCfg := rest.CopyConfig(cfg)
	dynamicCfg.Wrap(r.dynamic.wrap)
	r.typedF = factory.NewSharedInformerFactoryWithOptions(cs, 0, r.db, factory.WithNamespace(ns))
	r.dynamicF = factory.NewFilteredDynamicSharedInformerFactory(dynamicClient(t, dynamicCfg, nil), 0, r.db, ns, nil)
	typedLister := r.typedF.Core().V1().ConfigMaps().Lister()
	generic := r.dynamicF.ForResource(configMapsGVR)
	requirePersistent(t, "typed ConfigMap informer", r.typedF.Core().V1().ConfigMaps().Informer())
	requirePersistent(t, "dynamic ConfigMap informer", generic.Informer())
	r.typedLister = func() ([]interface{}, error) {
		cms, err := typedLister.ConfigMaps(ns).List(k8slabels.Everything())
		out := make([]interface{}, len(cms))
		for i, cm := range cms {
			out[i] = cm
		}
		return out, err
	}
	r.dynamicLister = func() ([]interface{}, error) {
		objs, err := generic.Lister().ByNamespace(ns).List(k8slabels.Everything())
		out := make([]interface{}, len(objs))
		for i, obj := range objs {
			out[i] = obj
		}
		return out, err
	}
	fctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	t.Cleanup(func() { cancel(); r.typedF.Shutdown(); r.dynamicF.Shutdown() })
	r.typedF.Start(fctx.Done())
	r.dynamicF.Start(fctx.Done())
	syncCtx, syncCancel := context.WithTimeout(fctx, time.Minute)
	defer syncCancel()
	if res := r.typedF.WaitForCacheSyncWithContext(syncCtx); res.Err != nil {
		t.Fatalf("the namespaced typed factory did not sync within a minute: %v", res.Err)
	}
	for gvr, ok := range r.dynamicF.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("the namespaced dynamic factory's %v informer did not sync within a minute", gvr)
		}
	}
	return r
}

func (r *namespacedFactories) typedState() state {
	objs, _ := r.typedLister()
	return listState(objs)
}

func (r *namespacedFactories) dynamicState() state {
	objs, _ := r.dynamicLister()
	return listState(objs)
}

// stop stops both factories, closes the file and returns the names of the
// typed and the dynamic collection.
func (r *namespacedFactories) stop(t *testing.T) (typedColl, dynamicColl string) {
	t.Helper()
	r.cancel()
	r.typedF.Shutdown()
	r.dynamicF.Shutdown()
	for _, info := range collectionInfos(t, r.db) {
		switch {
		case strings.HasPrefix(info.Name, "typed/"):
			typedColl = info.Name
		case strings.HasPrefix(info.Name, "dynamic/"):
			dynamicColl = info.Name
		}
	}
	if err := r.db.Close(); err != nil {
		t.Fatal(err)
	}
	if typedColl == "" || dynamicColl == "" {
		t.Fatalf("collections typed %q, dynamic %q: want one of each", typedColl, dynamicColl)
	}
	return typedColl, dynamicColl
}

// recordedProvenance opens the cache file read-only and returns what the
// named collection records about where its objects come from.
func recordedProvenance(t *testing.T, path, collection string) map[string]string {
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
	return coll.Provenance()
}
