package factory_test

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

var (
	configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsResource    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// partial returns the metadata of an object of kind (core/v1) as the fake
// metadata client holds it. Its TypeMeta names the object's kind. That is
// how the fake's tracker finds its resource.
func partial(kind, ns, name string, lbls, annotations map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), Labels: lbls, Annotations: annotations},
	}
}

// newMetadataClient returns a fake metadata client holding objs and the
// kube-system namespace whose UID the factory records as the cluster.
func newMetadataClient(objs ...runtime.Object) *metadatafake.FakeMetadataClient {
	s := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(s)
	kubeSystem := partial("Namespace", "", metav1.NamespaceSystem, nil, nil)
	kubeSystem.UID = "test-cluster"
	return metadatafake.NewSimpleMetadataClient(s, append([]runtime.Object{kubeSystem}, objs...)...)
}

// startMetadata starts f and waits for its informers to sync; the returned
// function stops them and waits for Shutdown.
func startMetadata(t *testing.T, f metadatainformer.SharedInformerFactory) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	stop := func() { cancel(); f.Shutdown() }
	for gvr, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			stop()
			t.Fatalf("%v did not sync", gvr)
		}
	}
	return stop
}

func listNames(t *testing.T, lister cache.GenericLister) []string {
	t.Helper()
	objs, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		m := o.(*metav1.PartialObjectMetadata)
		out = append(out, m.Namespace+"/"+m.Name)
	}
	sort.Strings(out)
	return out
}

// A filtered and an unfiltered metadata factory share one file. Each
// persists exactly its share in its own collection, named by its filters.
// Each hands out the objects as the client gave them, TypeMeta included,
// through client-go's metadata lister.
func TestMetadataFactory(t *testing.T) {
	db := openDB(t)
	web := map[string]string{"app": "web"}
	client := newMetadataClient(
		partial("ConfigMap", "a", "web1", web, nil),
		partial("ConfigMap", "a", "db1", map[string]string{"app": "db"}, nil),
		partial("ConfigMap", "b", "web2", web, nil),
	)
	all := factory.NewMetadataSharedInformerFactory(client, 0, db)
	aWeb := factory.NewFilteredMetadataSharedInformerFactory(client, 0, db, "a",
		func(o *metav1.ListOptions) { o.LabelSelector = "app=web" })
	allCMs, aWebCMs := all.ForResource(configMapsResource), aWeb.ForResource(configMapsResource)
	if all.ForResource(configMapsResource) != allCMs {
		t.Error("ForResource did not return the shared informer")
	}
	for _, g := range []cache.SharedIndexInformer{allCMs.Informer(), aWebCMs.Informer()} {
		if factory.PersistentIndexer(g) == nil {
			t.Fatalf("informer %T does not persist", g)
		}
	}
	stopAll, stopAWeb := startMetadata(t, all), startMetadata(t, aWeb)

	if got := strings.Join(listNames(t, allCMs.Lister()), ","); got != "a/db1,a/web1,b/web2" {
		t.Errorf("unfiltered factory lists %s", got)
	}
	if got := strings.Join(listNames(t, aWebCMs.Lister()), ","); got != "a/web1" {
		t.Errorf("filtered factory lists %s", got)
	}
	got, err := aWebCMs.Lister().ByNamespace("a").Get("web1")
	if err != nil {
		t.Fatal(err)
	}
	if want := partial("ConfigMap", "a", "web1", web, nil); !reflect.DeepEqual(got.(*metav1.PartialObjectMetadata).TypeMeta, want.TypeMeta) ||
		got.(*metav1.PartialObjectMetadata).UID != want.UID {
		t.Errorf("lister Get = %#v, want %#v", got, want)
	}
	stopAll()
	stopAWeb()

	objects := map[string]int{"metadata/v1/configmaps": 3, "metadata/v1/configmaps ns=a labels=app=web": 1}
	for _, info := range requireCollections(t, db, "metadata/v1/configmaps", "metadata/v1/configmaps ns=a labels=app=web") {
		if info.Description["source"] != "metadata" || info.Objects != objects[info.Name] {
			t.Errorf("collection %q: %d objects, described as %v", info.Name, info.Objects, info.Description)
		}
	}
}

// WithMetadataTransform is applied before objects are stored.
func TestMetadataFactoryTransform(t *testing.T) {
	const secretNote = "annotation-the-transform-drops"
	path := filepath.Join(t.TempDir(), "cache.db")
	db, err := persist.Open(path, persist.Options{NoSync: true}) // no scheme: metadata needs none
	if err != nil {
		t.Fatal(err)
	}
	client := newMetadataClient(partial("ConfigMap", "a", "cm", nil, map[string]string{"note": secretNote}))
	strip := func(obj interface{}) (interface{}, error) {
		m := obj.(*metav1.PartialObjectMetadata).DeepCopy()
		m.Annotations = nil
		return m, nil
	}
	f := factory.NewMetadataSharedInformerFactoryWithOptions(client, 0, db,
		factory.WithMetadataTransform(strip), factory.WithMetadataPersistence(factory.PersistenceOptions{TransformVersion: "strip-annotations/1"}))
	lister := f.ForResource(configMapsResource).Lister()
	stop := startMetadata(t, f)
	got, err := lister.ByNamespace("a").Get("cm")
	if err != nil {
		t.Fatal(err)
	}
	if a := got.(*metav1.PartialObjectMetadata).Annotations; a != nil {
		t.Errorf("transformed object has annotations %v", a)
	}
	stop()
	raw := closeAndRead(t, db)
	if bytes.Contains(raw, []byte(secretNote)) {
		t.Error("the file holds the annotation the transform drops")
	}
	if !bytes.Contains(raw, []byte("uid-a-cm")) {
		t.Error("the file does not hold the transformed object")
	}
}

// A Secret's metadata can carry its data (kubectl apply's
// last-applied-configuration annotation): it never reaches the file unless
// the program opts in.
func TestMetadataSecretsStayInMemoryUnlessOptedIn(t *testing.T) {
	const value = "s3cr3t-value-in-last-applied-configuration"
	secret := partial("Secret", "a", "db", nil, map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"` + value + `"}}`,
	})
	for _, optIn := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "cache.db")
		db, err := persist.Open(path, persist.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		f := factory.NewMetadataSharedInformerFactory(newMetadataClient(secret), 0, db,
			factory.WithMetadataPersistence(factory.PersistenceOptions{PersistSecrets: optIn}))
		generic := f.ForResource(secretsResource)
		if persistent := factory.PersistentIndexer(generic.Informer()) != nil; persistent != optIn {
			t.Errorf("optIn=%v: informer persistent = %v", optIn, persistent)
		}
		stop := startMetadata(t, f)
		if got := strings.Join(listNames(t, generic.Lister()), ","); got != "a/db" {
			t.Errorf("optIn=%v: lister lists %s", optIn, got)
		}
		stop()
		if onDisk := bytes.Contains(closeAndRead(t, db), []byte(value)); onDisk != optIn {
			t.Errorf("optIn=%v: secret data in the file = %v", optIn, onDisk)
		}
	}
}

// Without a cache file an informer cannot be built: it never syncs and says
// why, as the other factories' do.
func TestMetadataFactoryWithoutCacheFile(t *testing.T) {
	f := factory.NewMetadataSharedInformerFactory(newMetadataClient(), 0, nil)
	informer := f.ForResource(configMapsResource).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if synced := f.WaitForCacheSync(ctx.Done()); synced[configMapsResource] || len(synced) != 1 {
		t.Errorf("WaitForCacheSync = %v, want configmaps unsynced", synced)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err == nil || !strings.Contains(err.Error(), "no cache file") {
		t.Errorf("AddEventHandler = %v, want an error saying there is no cache file", err)
	}
}

// The default cluster identity is the kube-system namespace's UID, read
// through the metadata client. A client that cannot read it syncs nothing
// and reports why. A declared identity needs no read.
func TestMetadataFactoryClusterIdentity(t *testing.T) {
	s := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(s)
	client := metadatafake.NewSimpleMetadataClient(s, partial("ConfigMap", "a", "cm", nil, nil)) // no kube-system

	f := factory.NewMetadataSharedInformerFactory(client, 0, openDB(t))
	informer := f.ForResource(configMapsResource).Informer()
	errs := make(chan error, 1)
	if err := informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		select {
		case errs <- err:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	err := <-errs
	synced := informer.HasSynced()
	cancel()
	f.Shutdown()
	if err == nil || !strings.Contains(err.Error(), metav1.NamespaceSystem) || !strings.Contains(err.Error(), "PersistenceOptions.ClusterIdentity") {
		t.Errorf("watch error %v, want one naming %s and PersistenceOptions.ClusterIdentity", err, metav1.NamespaceSystem)
	}
	if synced {
		t.Error("synced without the cluster's identity")
	}

	declared := factory.NewMetadataSharedInformerFactory(client, 0, openDB(t), factory.WithMetadataPersistence(factory.PersistenceOptions{ClusterIdentity: "declared"}))
	lister := declared.ForResource(configMapsResource).Lister()
	stop := startMetadata(t, declared)
	defer stop()
	if got := strings.Join(listNames(t, lister), ","); got != "a/cm" {
		t.Errorf("declared identity: lister lists %s", got)
	}
}
