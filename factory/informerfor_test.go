package factory_test

import (
	"context"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/informertest"
)

// schedulerPodSelector is the field selector kube-scheduler's Pod informer
// lists with: pods that can still hold resources.
const schedulerPodSelector = "status.phase!=Succeeded,status.phase!=Failed"

// newSchedulerPodInformer is kube-scheduler's newPodInformer
// (pkg/scheduler/scheduler.go): a field-selected Pod informer, with an
// index, whose transform strips managedFields.
func newSchedulerPodInformer(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	tweak := func(o *metav1.ListOptions) { o.FieldSelector = schedulerPodSelector }
	informer := coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{"node": podNode}, tweak)
	_ = informer.SetTransform(stripManagedFields)
	return informer
}

func podNode(obj interface{}) ([]string, error) {
	return []string{obj.(*corev1.Pod).Spec.NodeName}, nil
}

func stripManagedFields(obj interface{}) (interface{}, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// selectorClient is a fake clientset whose Pod lists honour label and field
// selectors (metadata.name, metadata.namespace, status.phase), as the
// apiserver does; client-go's fake ignores field selectors. It records the
// field selector of every Pod list and watch it serves, as parsed.
type selectorClient struct {
	*fake.Clientset
	mu     sync.Mutex
	fields []string // "list fields=..." / "watch fields=..."
}

func newSelectorClient(objs ...runtime.Object) *selectorClient {
	c := &selectorClient{Clientset: fake.NewSimpleClientset(objs...)}
	c.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		la := action.(k8stesting.ListActionImpl)
		c.record("list fields=" + la.ListRestrictions.Fields.String())
		obj, err := c.Tracker().List(podsResource, corev1.SchemeGroupVersion.WithKind("Pod"), la.Namespace)
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		kept := list.Items[:0]
		for _, p := range list.Items {
			set := fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace, "status.phase": string(p.Status.Phase)}
			if la.ListRestrictions.Labels.Matches(labels.Set(p.Labels)) && la.ListRestrictions.Fields.Matches(set) {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		return true, list, nil
	})
	c.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		c.record("watch fields=" + action.(k8stesting.WatchActionImpl).WatchRestrictions.Fields.String())
		return false, nil, nil
	})
	return c
}

func (c *selectorClient) record(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fields = append(c.fields, s)
}

func (c *selectorClient) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.fields)
}

func phasePod(name string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func storeKeys(s cache.Store) []string {
	keys := s.ListKeys()
	sort.Strings(keys)
	return keys
}

// startAndSync starts f and fails the test unless every informer syncs.
func startAndSync(t *testing.T, ctx context.Context, f *factory.Factory) {
	t.Helper()
	f.Start(ctx.Done())
	if res := f.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		t.Fatalf("WaitForCacheSync: %v", res.Err)
	}
}

// A constructor passed to InformerFor decides what its informer lists, as
// in client-go: kube-scheduler's field-selected, transformed Pod informer
// holds exactly what client-go's would, persistently, in its own collection
// beside a plain Pods informer on the same file.
func TestInformerForListsWhatNewFuncLists(t *testing.T) {
	db := openDB(t)
	client := newSelectorClient(phasePod("running", corev1.PodRunning), phasePod("done", corev1.PodSucceeded), phasePod("failed", corev1.PodFailed))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	theirs := informers.NewSharedInformerFactory(client, 0)
	want := theirs.InformerFor(&corev1.Pod{}, newSchedulerPodInformer)
	theirs.Start(ctx.Done())
	theirs.WaitForCacheSync(ctx.Done())
	defer theirs.Shutdown()
	if got := storeKeys(want.GetStore()); !slices.Equal(got, []string{"default/running"}) {
		t.Fatalf("client-go's informer holds %v: the fake does not filter", got)
	}

	scheduler := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithClusterIdentity("test"))
	plain := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithClusterIdentity("test"))
	informer := scheduler.InformerFor(&corev1.Pod{}, newSchedulerPodInformer)
	plainInformer := plain.Core().V1().Pods().Informer()
	if scheduler.InformerFor(&corev1.Pod{}, newSchedulerPodInformer) != informer {
		t.Error("InformerFor did not return the shared informer")
	}
	defer func() { cancel(); scheduler.Shutdown(); plain.Shutdown() }()
	before := len(client.requests())
	startAndSync(t, ctx, scheduler)
	startAndSync(t, ctx, plain)

	idx := informertest.PersistentIndexer(informer)
	if idx == nil {
		t.Fatalf("InformerFor's informer %T does not persist", informer)
	}
	if got, want := storeKeys(informer.GetStore()), storeKeys(want.GetStore()); !slices.Equal(got, want) {
		t.Errorf("InformerFor's informer holds %v, client-go's %v", got, want)
	}
	if got := storeKeys(plainInformer.GetStore()); !slices.Equal(got, []string{"default/done", "default/failed", "default/running"}) {
		t.Errorf("plain Pods informer holds %v", got)
	}
	obj, exists, err := informer.GetStore().GetByKey("default/running")
	if err != nil || !exists {
		t.Fatalf("running pod: exists=%v err=%v", exists, err)
	}
	if mf := obj.(*corev1.Pod).ManagedFields; mf != nil {
		t.Errorf("newFunc's transform was not applied: managedFields %v", mf)
	}
	if byNode, err := informer.GetIndexer().ByIndex("node", "node-1"); err != nil || len(byNode) != 1 {
		t.Errorf("newFunc's index: ByIndex(node, node-1) = %d objects, %v", len(byNode), err)
	}
	// Selectors as the fake parsed them (sorted).
	sel := fields.ParseSelectorOrDie(schedulerPodSelector).String()
	for _, r := range client.requests()[before:] {
		if r != "list fields=" && r != "watch fields=" && r != "list fields="+sel && r != "watch fields="+sel {
			t.Errorf("unexpected request %q", r)
		}
	}
	if !slices.Contains(client.requests()[before:], "list fields="+sel) {
		t.Errorf("no list with the scheduler's field selector reached the client: %v", client.requests()[before:])
	}

	name := idx.Collection().Name()
	if name == requirePersistentIndexer(t, plainInformer).Collection().Name() {
		t.Errorf("scheduler and plain Pods informers share collection %q", name)
	}
	infos, err := db.Collections()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Name == name && info.Description["fieldSelector"] != schedulerPodSelector {
			t.Errorf("collection %q described as %v", name, info.Description)
		}
	}
	if len(infos) != 2 {
		t.Errorf("%d collections, want 2 (scheduler's and plain Pods)", len(infos))
	}
}

func requirePersistentIndexer(t *testing.T, informer cache.SharedIndexInformer) *bcache.Indexer {
	t.Helper()
	idx := informertest.PersistentIndexer(informer)
	if idx == nil {
		t.Fatalf("informer %T does not persist", informer)
	}
	return idx
}

// A constructor that lists through another client than the one it is
// given: the factory cannot tell what it lists, so it returns the
// constructor's own informer, in memory, listing from that client, as
// client-go's factory does.
func TestInformerForOtherClientRunsInMemory(t *testing.T) {
	db := openDB(t)
	here := fake.NewSimpleClientset(phasePod("here", corev1.PodRunning))
	elsewhere := fake.NewSimpleClientset(phasePod("elsewhere", corev1.PodRunning))
	newFunc := func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPodInformer(elsewhere, metav1.NamespaceAll, resync, cache.Indexers{})
	}
	f := factory.NewSharedInformerFactoryWithOptions(here, 0, db, factory.WithClusterIdentity("test"))
	informer := f.InformerFor(&corev1.Pod{}, newFunc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); f.Shutdown() }()
	startAndSync(t, ctx, f)
	if informertest.PersistentIndexer(informer) != nil {
		t.Error("the informer persists, though the factory cannot know what it lists")
	}
	if got := storeKeys(informer.GetStore()); !slices.Equal(got, []string{"default/elsewhere"}) {
		t.Errorf("informer holds %v, want what the constructor's client lists", got)
	}
	if infos, _ := db.Collections(); len(infos) != 0 {
		t.Errorf("collections in the file: %+v", infos)
	}
}

// A constructor for a type no typed client serves (here metadata-only
// objects from the metadata client; a CRD type of another generated
// clientset is the same case) yields its own informer, which syncs, as in
// client-go.
func TestInformerForUntypedClientRunsInMemory(t *testing.T) {
	db := openDB(t)
	sch := runtime.NewScheme()
	metav1.AddMetaToScheme(sch)
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	w := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w1"}}
	meta := metadatafake.NewSimpleMetadataClient(sch, w)
	newFunc := func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return metadatainformer.NewFilteredMetadataInformer(meta, gvr, metav1.NamespaceAll, resync, cache.Indexers{}, nil).Informer()
	}
	f := factory.NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(), 0, db, factory.WithClusterIdentity("test"))
	informer := f.InformerFor(&metav1.PartialObjectMetadata{}, newFunc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); f.Shutdown() }()
	startAndSync(t, ctx, f)
	if got := storeKeys(informer.GetStore()); !slices.Equal(got, []string{"default/w1"}) {
		t.Errorf("informer holds %v", got)
	}
}
