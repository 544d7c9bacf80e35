package factory_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

func openDB(t *testing.T) *persist.DB {
	t.Helper()
	db, err := persist.Open(filepath.Join(t.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// closeAndRead closes db and returns its file's bytes.
func closeAndRead(t *testing.T, db *persist.DB) []byte {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(db.Path())
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// requireCollections fails unless db's collections are named want (in
// order), and returns them.
func requireCollections(t *testing.T, db *persist.DB, want ...string) []persist.CollectionInfo {
	t.Helper()
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
	}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("collections = %q, want %q", names, want)
	}
	return infos
}

// kubeSystem is the namespace whose UID the factories record as the
// cluster's identity; an informer does not sync before it has it.
func kubeSystem() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "test-cluster"}}
}

// TestEveryGeneratedAccessorIsPersistent walks every generated accessor the
// factory exposes — f.<Group>().<Version>().<Resources>().Informer() — and
// checks each builds a persistent informer that syncs.
func TestEveryGeneratedAccessorIsPersistent(t *testing.T) {
	db := openDB(t)
	client := fake.NewSimpleClientset(kubeSystem())
	f := factory.NewSharedInformerFactory(client, 0, db)
	var paths []string
	v := reflect.ValueOf(f)
	for i := 0; i < v.NumMethod(); i++ {
		group := v.Type().Method(i)
		groupIface := reflect.TypeFor[informers.SharedInformerFactory]()
		if _, ok := groupIface.MethodByName(group.Name); !ok || group.Type.NumIn() != 1 || group.Type.NumOut() != 1 {
			continue
		}
		gv := v.Method(i).Call(nil)[0]
		if gv.Kind() != reflect.Interface && gv.Kind() != reflect.Pointer {
			continue
		}
		for j := 0; j < gv.NumMethod(); j++ {
			version := gv.Type().Method(j)
			if version.Type.NumIn() != 0 || version.Type.NumOut() != 1 {
				continue
			}
			resources := gv.Method(j).Call(nil)[0]
			for k := 0; k < resources.NumMethod(); k++ {
				res := resources.Type().Method(k)
				if res.Type.NumIn() != 0 || res.Type.NumOut() != 1 {
					continue
				}
				accessor := resources.Method(k).Call(nil)[0]
				informerMethod := accessor.MethodByName("Informer")
				if !informerMethod.IsValid() {
					continue
				}
				path := group.Name + "()." + version.Name + "()." + res.Name + "()"
				informer := informerMethod.Call(nil)[0].Interface().(cache.SharedIndexInformer)
				persistent := factory.PersistentIndexer(informer) != nil
				if secrets := path == "Core().V1().Secrets()"; persistent == secrets {
					t.Errorf("%s.Informer(): persistent = %v (%T); only Secrets stay in memory by default", path, persistent, informer)
				}
				paths = append(paths, path)
			}
		}
	}
	if len(paths) < 100 {
		t.Fatalf("only %d accessors found: %v", len(paths), paths)
	}
	t.Logf("%d generated accessors build persistent informers", len(paths))

	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	res := f.WaitForCacheSyncWithContext(ctx)
	if res.Err != nil {
		t.Fatalf("WaitForCacheSync: %v", res.Err)
	}
	if len(res.Synced) != len(paths) {
		t.Errorf("%d informers synced, %d accessors", len(res.Synced), len(paths))
	}
	cancel()
	f.Shutdown()
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(paths)-1 {
		t.Errorf("%d collections for %d informers, one of them memory-only", len(infos), len(paths))
	}
}

// Our ForResource knows exactly the resources client-go's does.
func TestForResourceMatchesClientGo(t *testing.T) {
	db := openDB(t)
	client := fake.NewSimpleClientset(kubeSystem())
	ours := factory.NewSharedInformerFactory(client, 0, db)
	theirs := informers.NewSharedInformerFactory(client, 0)
	checked := 0
	// Every resource client-go serves must be served by ours, and vice versa.
	for _, gvr := range clientGoResources(t, theirs) {
		g, err := ours.ForResource(gvr)
		if err != nil {
			t.Errorf("client-go serves %v, ours: %v", gvr, err)
			continue
		}
		if factory.PersistentIndexer(g.Informer()) == nil && gvr.Resource != "secrets" {
			t.Errorf("%v: not persistent", gvr)
		}
		checked++
	}
	if checked < 100 {
		t.Errorf("only %d resources checked", checked)
	}
	if _, err := ours.ForResource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); err == nil {
		t.Error("ForResource of an unknown resource did not fail")
	}
}

// clientGoResources probes client-go's ForResource with every resource our
// factory knows plus guesses for every kind in the scheme, returning those
// client-go serves.
func clientGoResources(t *testing.T, f informers.SharedInformerFactory) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	seen := map[schema.GroupVersionResource]bool{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		for _, plural := range pluralGuesses(gvk.Kind) {
			gvr := gvk.GroupVersion().WithResource(plural)
			if seen[gvr] {
				continue
			}
			seen[gvr] = true
			if _, err := f.ForResource(gvr); err == nil {
				out = append(out, gvr)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func pluralGuesses(kind string) []string {
	k := strings.ToLower(kind)
	return []string{k + "s", k + "es", strings.TrimSuffix(k, "y") + "ies", k}
}

func TestNamespaceAndSelectorFilters(t *testing.T) {
	db := openDB(t)
	pod := func(ns, name, app string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}}}
	}
	client := fake.NewSimpleClientset(kubeSystem(), pod("a", "web1", "web"), pod("a", "db1", "db"), pod("b", "web2", "web"))
	all := factory.NewSharedInformerFactory(client, 0, db)
	onlyAWeb := factory.NewSharedInformerFactoryWithOptions(client, 0, db,
		factory.WithNamespace("a"),
		factory.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=web" }))
	allPods := all.Core().V1().Pods().Lister()
	aWebPods := onlyAWeb.Core().V1().Pods().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); all.Shutdown(); onlyAWeb.Shutdown() }()
	all.Start(ctx.Done())
	onlyAWeb.Start(ctx.Done())
	for _, f := range []*factory.Factory{all, onlyAWeb} {
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		sort.Strings(out)
		return out
	}
	got, _ := allPods.List(labels.Everything())
	if n := names(got); strings.Join(n, ",") != "a/db1,a/web1,b/web2" {
		t.Errorf("unfiltered factory lists %v", n)
	}
	got, _ = aWebPods.List(labels.Everything())
	if n := names(got); strings.Join(n, ",") != "a/web1" {
		t.Errorf("filtered factory lists %v", n)
	}
	requireCollections(t, db, "typed/v1/pods", "typed/v1/pods ns=a labels=app=web")
}

func TestTypeWithoutTypedClientFailsClearly(t *testing.T) {
	db := openDB(t)
	f := factory.NewSharedInformerFactory(fake.NewSimpleClientset(kubeSystem()), 0, db)
	informer := f.InformerFor(&unstructured.Unstructured{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	f.Start(ctx.Done())
	res := f.WaitForCacheSyncWithContext(ctx)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "dynamic factory") {
		t.Errorf("SyncResult.Err = %v, want an error pointing to the dynamic factory", res.Err)
	}
	if informer.HasSynced() {
		t.Error("broken informer reports synced")
	}
	if _, err := informer.AddEventHandler(nil); err == nil {
		t.Error("AddEventHandler on a broken informer did not fail")
	}
	f.Shutdown()
}

func TestDynamicFactory(t *testing.T) {
	db := openDB(t)
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget := func(ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"spec": map[string]interface{}{"size": int64(3), "ratio": 2.0},
		}}
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	sch := runtime.NewScheme()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(sch,
		map[schema.GroupVersionResource]string{gvr: "WidgetList"}, widget("a", "w1"), widget("b", "w2"))
	f := factory.NewFilteredDynamicSharedInformerFactory(client, 0, db, "a", nil, factory.WithDynamicPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	generic := f.ForResource(gvr)
	if f.ForResource(gvr) != generic {
		t.Error("ForResource did not return the shared informer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	if synced := f.WaitForCacheSync(ctx.Done()); !synced[gvr] {
		t.Fatalf("not synced: %v", synced)
	}
	objs, err := generic.Lister().List(labels.Everything())
	if err != nil || len(objs) != 1 {
		t.Fatalf("lister: %v %v", objs, err)
	}
	got := objs[0].(*unstructured.Unstructured)
	if got.GetName() != "w1" || got.Object["spec"].(map[string]interface{})["ratio"] != 2.0 {
		t.Errorf("stored object = %v", got.Object)
	}
	cancel()
	f.Shutdown()
	infos, _ := db.Collections()
	if len(infos) != 1 || infos[0].Name != "dynamic/example.com/v1/widgets ns=a" || infos[0].Objects != 1 {
		t.Errorf("collections = %+v", infos)
	}
}

// Secrets never reach the file unless the program opts in.
func TestSecretsStayInMemoryUnlessOptedIn(t *testing.T) {
	const value = "s3cr3t-value-that-must-not-rest-on-disk"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db"}, Data: map[string][]byte{"password": []byte(value)}}
	for _, optIn := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "cache.db")
		db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		f := factory.NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(kubeSystem(), secret), 0, db,
			factory.WithPersistence(factory.PersistenceOptions{PersistSecrets: optIn}))
		lister := f.Core().V1().Secrets().Lister()
		ctx, cancel := context.WithCancel(context.Background())
		f.Start(ctx.Done())
		if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			t.Fatal(res.Err)
		}
		if got, err := lister.Secrets("a").Get("db"); err != nil || string(got.Data["password"]) != value {
			t.Errorf("optIn=%v: lister: %v %v", optIn, got, err)
		}
		cancel()
		f.Shutdown()
		if onDisk := bytes.Contains(closeAndRead(t, db), []byte(value)); onDisk != optIn {
			t.Errorf("optIn=%v: secret data in the file = %v", optIn, onDisk)
		}
	}
}
