package factory_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
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
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
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
// in client-go. kube-scheduler's field-selected, transformed Pod informer
// holds exactly what client-go's would, persistently. It has its own
// collection beside a plain Pods informer on the same file.
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

	scheduler := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	plain := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	informer := scheduler.InformerFor(&corev1.Pod{}, newSchedulerPodInformer)
	plainInformer := plain.Core().V1().Pods().Informer()
	if scheduler.InformerFor(&corev1.Pod{}, newSchedulerPodInformer) != informer {
		t.Error("InformerFor did not return the shared informer")
	}
	defer func() { cancel(); scheduler.Shutdown(); plain.Shutdown() }()
	before := len(client.requests())
	startAndSync(t, ctx, scheduler)
	startAndSync(t, ctx, plain)

	idx := factory.PersistentIndexer(informer)
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
	idx := factory.PersistentIndexer(informer)
	if idx == nil {
		t.Fatalf("informer %T does not persist", informer)
	}
	return idx
}

// A constructor may list through another client than the one it is given.
// The factory cannot tell what it lists. So it returns the constructor's
// own informer, in memory, listing from that client, as client-go's factory
// does.
func TestInformerForOtherClientRunsInMemory(t *testing.T) {
	db := openDB(t)
	here := fake.NewSimpleClientset(phasePod("here", corev1.PodRunning))
	elsewhere := fake.NewSimpleClientset(phasePod("elsewhere", corev1.PodRunning))
	newFunc := func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewPodInformer(elsewhere, metav1.NamespaceAll, resync, cache.Indexers{})
	}
	f := factory.NewSharedInformerFactoryWithOptions(here, 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	informer := f.InformerFor(&corev1.Pod{}, newFunc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); f.Shutdown() }()
	startAndSync(t, ctx, f)
	if factory.PersistentIndexer(informer) != nil {
		t.Error("the informer persists, though the factory cannot know what it lists")
	}
	if got := storeKeys(informer.GetStore()); !slices.Equal(got, []string{"default/elsewhere"}) {
		t.Errorf("informer holds %v, want what the constructor's client lists", got)
	}
	if infos, _ := db.Collections(); len(infos) != 0 {
		t.Errorf("collections in the file: %+v", infos)
	}
}

// A constructor for a type no typed client serves yields its own informer,
// which syncs, as in client-go. Here the type is metadata-only objects from
// the metadata client. A CRD type of another generated clientset is the
// same case.
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
	f := factory.NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(), 0, db, factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	informer := f.InformerFor(&metav1.PartialObjectMetadata{}, newFunc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); f.Shutdown() }()
	startAndSync(t, ctx, f)
	if got := storeKeys(informer.GetStore()); !slices.Equal(got, []string{"default/w1"}) {
		t.Errorf("informer holds %v", got)
	}
}

// dropLabel marks the Pods newGoFilteredPodInformer's ListerWatcher drops
// in Go; rewrittenAnnotation is what it sets on the Pods it keeps.
const (
	dropLabel           = "go-filter-drop"
	rewrittenAnnotation = "go-filter-rewritten"
)

// newGoFilteredPodInformer is a constructor whose ListerWatcher filters and
// rewrites in Go, which no request shows: List drops Pods labelled
// dropLabel and annotates the others; Watch does the same through
// watch.Filter.
func newGoFilteredPodInformer(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	keep := func(p *corev1.Pod) bool { return p.Labels[dropLabel] == "" }
	rewrite := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[rewrittenAnnotation] = "yes"
		return p
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			kept := list.Items[:0]
			for i := range list.Items {
				if keep(&list.Items[i]) {
					kept = append(kept, *rewrite(&list.Items[i]))
				}
			}
			list.Items = kept
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				p, ok := e.Object.(*corev1.Pod)
				if !ok || e.Type == watch.Bookmark {
					return e, true
				}
				if !keep(p) {
					return e, false
				}
				e.Object = rewrite(p)
				return e, true
			}), nil
		},
	}
	// As generated informers do: the fake clientset then says it does not
	// stream lists (watch-list), which it cannot.
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, cs), &corev1.Pod{}, resync, cache.Indexers{})
}

func labelledPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels}}
}

// keyRecorder is a handler that records the keys of the objects it is
// given and says when a key has arrived.
type keyRecorder struct {
	mu      sync.Mutex
	seen    map[string]bool
	updates map[string]int // OnUpdate calls per key
	arrived map[string]chan struct{}
}

func newKeyRecorder() *keyRecorder {
	return &keyRecorder{seen: map[string]bool{}, updates: map[string]int{}, arrived: map[string]chan struct{}{}}
}

func (r *keyRecorder) chanLocked(key string) chan struct{} {
	ch, ok := r.arrived[key]
	if !ok {
		ch = make(chan struct{})
		r.arrived[key] = ch
	}
	return ch
}

func (r *keyRecorder) record(obj interface{}, update bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	r.mu.Lock()
	defer r.mu.Unlock()
	if update {
		r.updates[key]++
		if r.updates[key] == 1 {
			close(r.chanLocked("update " + key))
		}
	}
	if !r.seen[key] {
		r.seen[key] = true
		close(r.chanLocked(key))
	}
}

func (r *keyRecorder) OnAdd(obj interface{}, _ bool) { r.record(obj, false) }
func (r *keyRecorder) OnUpdate(_, obj interface{})   { r.record(obj, true) }
func (r *keyRecorder) OnDelete(obj interface{})      { r.record(obj, false) }
func (r *keyRecorder) keys() []string                { r.mu.Lock(); defer r.mu.Unlock(); return sortedKeys(r.seen) }
func (r *keyRecorder) arrival(key string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chanLocked(key)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// waitArrival fails the test unless each recorder is given key before ctx
// ends.
func waitArrival(t *testing.T, ctx context.Context, key string, recs ...*keyRecorder) {
	t.Helper()
	for _, r := range recs {
		select {
		case <-r.arrival(key):
		case <-ctx.Done():
			t.Fatalf("%s never reached a handler (it saw %v)", key, r.keys())
		}
	}
}

// A constructor's ListerWatcher may filter and rewrite objects in Go.
// client-go's informer never holds nor hands out a filtered object, and
// holds only rewritten ones. Neither does ours. It persists with a declared
// ListerWatcher version. Without one, it is newFunc's own informer, in
// memory.
func TestInformerForKeepsGoSideFilter(t *testing.T) {
	for _, declared := range []bool{true, false} {
		t.Run(map[bool]string{true: "declared version", false: "no declared version"}[declared], func(t *testing.T) {
			db := openDB(t)
			client := fake.NewSimpleClientset(labelledPod("keep-1", nil), labelledPod("drop-1", map[string]string{dropLabel: "yes"}))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			theirs := informers.NewSharedInformerFactory(client, 0)
			want := theirs.InformerFor(&corev1.Pod{}, newGoFilteredPodInformer)
			wantEvents := newKeyRecorder()
			if _, err := want.AddEventHandler(wantEvents); err != nil {
				t.Fatal(err)
			}
			persistence := factory.PersistenceOptions{ClusterIdentity: "test"}
			if declared {
				persistence.ListerWatcherVersion = ptr.To("v1")
			}
			ours := factory.NewSharedInformerFactoryWithOptions(client, 0, db, factory.WithPersistence(persistence))
			got := ours.InformerFor(&corev1.Pod{}, newGoFilteredPodInformer)
			gotEvents := newKeyRecorder()
			if _, err := got.AddEventHandler(gotEvents); err != nil {
				t.Fatal(err)
			}
			defer func() { cancel(); theirs.Shutdown(); ours.Shutdown() }()
			theirs.Start(ctx.Done())
			if synced := theirs.WaitForCacheSync(ctx.Done()); !synced[reflect.TypeFor[*corev1.Pod]()] {
				t.Fatal("client-go's informer did not sync")
			}
			startAndSync(t, ctx, ours)

			if _, err := client.CoreV1().Pods("default").Create(ctx, labelledPod("drop-2", map[string]string{dropLabel: "yes"}), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.CoreV1().Pods("default").Create(ctx, labelledPod("keep-2", nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// One watch delivers both in order: once keep-2 arrived, drop-2
			// would have.
			waitArrival(t, ctx, "default/keep-2", wantEvents, gotEvents)

			wantKeys := []string{"default/keep-1", "default/keep-2"}
			if k := storeKeys(want.GetStore()); !slices.Equal(k, wantKeys) {
				t.Fatalf("client-go's informer holds %v, want %v", k, wantKeys)
			}
			if k := storeKeys(got.GetStore()); !slices.Equal(k, wantKeys) {
				t.Errorf("InformerFor's informer holds %v, client-go's %v", k, wantKeys)
			}
			if k := gotEvents.keys(); !slices.Equal(k, wantEvents.keys()) {
				t.Errorf("InformerFor's informer handed out %v, client-go's %v", k, wantEvents.keys())
			}
			for _, obj := range got.GetStore().List() {
				if p := obj.(*corev1.Pod); p.Annotations[rewrittenAnnotation] != "yes" {
					t.Errorf("%s/%s was not rewritten by the ListerWatcher", p.Namespace, p.Name)
				}
			}
			infos, err := db.Collections()
			if err != nil {
				t.Fatal(err)
			}
			if !declared {
				if factory.PersistentIndexer(got) != nil || len(infos) != 0 {
					t.Errorf("without a declared ListerWatcher version the informer persists (collections %+v)", infos)
				}
				return
			}
			name := requirePersistentIndexer(t, got).Collection().Name()
			if !strings.HasSuffix(name, " listwatch=custom") {
				t.Errorf("collection %q does not say its ListerWatcher is custom", name)
			}
			if len(infos) != 1 || infos[0].Description["listerWatcherVersion"] != "v1" || !strings.Contains(infos[0].Description["listerWatcher"], "newGoFilteredPodInformer") {
				t.Errorf("collections %+v, want one describing the ListerWatcher and its version", infos)
			}
		})
	}
}

// Handlers and a watch error handler newFunc registers on its informer act
// as they do on client-go's. The handler gets the objects, and its resyncs
// at the period it asked for. The watch error handler gets the list error.
func TestInformerForKeepsNewFuncHandlers(t *testing.T) {
	injected := errors.New("injected list failure")
	// failFirstList makes the first List of Pods through client fail.
	failFirstList := func(client *fake.Clientset) {
		var once sync.Once
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			failed := false
			once.Do(func() { failed = true })
			if failed {
				return true, nil, injected
			}
			return false, nil, nil
		})
	}
	type registered struct {
		events    *keyRecorder
		watchErrs chan error
		newFunc   internalinterfaces.NewInformerFunc
	}
	newRegistered := func() *registered {
		r := &registered{events: newKeyRecorder(), watchErrs: make(chan error, 10)}
		r.newFunc = func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			informer := coreinformers.NewPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{})
			if _, err := informer.AddEventHandlerWithResyncPeriod(r.events, time.Second); err != nil {
				t.Error(err)
			}
			if err := informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
				select {
				case r.watchErrs <- err:
				default:
				}
			}); err != nil {
				t.Error(err)
			}
			return informer
		}
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	theirClient := fake.NewSimpleClientset(phasePod("running", corev1.PodRunning))
	failFirstList(theirClient)
	// An informer resyncs only with a resync period of its own; its
	// handlers may then ask for shorter ones.
	theirs := informers.NewSharedInformerFactory(theirClient, time.Hour)
	theirReg := newRegistered()
	theirs.InformerFor(&corev1.Pod{}, theirReg.newFunc)

	ourClient := fake.NewSimpleClientset(phasePod("running", corev1.PodRunning))
	failFirstList(ourClient)
	ours := factory.NewSharedInformerFactoryWithOptions(ourClient, time.Hour, openDB(t), factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	ourReg := newRegistered()
	informer := ours.InformerFor(&corev1.Pod{}, ourReg.newFunc)
	requirePersistentIndexer(t, informer)
	defer func() { cancel(); theirs.Shutdown(); ours.Shutdown() }()
	theirs.Start(ctx.Done())
	ours.Start(ctx.Done())

	for _, c := range []struct {
		who string
		r   *registered
	}{{"client-go's", theirReg}, {"InformerFor's", ourReg}} {
		select {
		case err := <-c.r.watchErrs:
			if !strings.Contains(err.Error(), injected.Error()) {
				t.Errorf("%s informer: newFunc's watch error handler got %v, want the list failure", c.who, err)
			}
		case <-ctx.Done():
			t.Errorf("%s informer: newFunc's watch error handler was not called", c.who)
		}
		select {
		case <-c.r.events.arrival("default/running"):
		case <-ctx.Done():
			t.Errorf("%s informer: newFunc's handler was not given default/running", c.who)
		}
		// The handler asked for resyncs every second.
		select {
		case <-c.r.events.arrival("update default/running"):
		case <-ctx.Done():
			t.Errorf("%s informer: newFunc's handler, registered with a resync period, got no resync", c.who)
		}
	}
}

// client-go's typed wrappers around client-go's informer, however deep,
// are looked through: the informer persists and holds what client-go's
// does.
func TestInformerForUnwrapsNestedTypedWrappers(t *testing.T) {
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		// NewFilteredPodInformer returns a typed wrapper already.
		inner := coreinformers.NewFilteredPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{}, nil)
		return cache.NewTypedSharedIndexInformer[*corev1.Pod](cache.NewTypedSharedIndexInformer[*corev1.Pod](inner))
	}
	client := fake.NewSimpleClientset(phasePod("running", corev1.PodRunning), phasePod("done", corev1.PodSucceeded))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	theirs := informers.NewSharedInformerFactory(client, 0)
	want := theirs.InformerFor(&corev1.Pod{}, newFunc)
	ours := factory.NewSharedInformerFactoryWithOptions(client, 0, openDB(t), factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	got := ours.InformerFor(&corev1.Pod{}, newFunc)
	defer func() { cancel(); theirs.Shutdown(); ours.Shutdown() }()
	theirs.Start(ctx.Done())
	theirs.WaitForCacheSync(ctx.Done())
	startAndSync(t, ctx, ours)
	requirePersistentIndexer(t, got)
	if g, w := storeKeys(got.GetStore()), storeKeys(want.GetStore()); !slices.Equal(g, w) || len(w) != 2 {
		t.Errorf("InformerFor's informer holds %v, client-go's %v", g, w)
	}
	// client-go returns newFunc's informer, so a caller may assert its type.
	if _, ok := want.(cache.TypedSharedIndexInformer[*corev1.Pod]); !ok {
		t.Fatalf("client-go's InformerFor returned %T", want)
	}
	if _, ok := got.(cache.TypedSharedIndexInformer[*corev1.Pod]); !ok {
		t.Errorf("InformerFor returned %T, not a cache.TypedSharedIndexInformer[*v1.Pod] as newFunc's informer is", got)
	}
}

// A constructor that returns nil gets an informer that says so, not a nil
// one that panics when the factory starts it.
func TestInformerForNilFromNewFunc(t *testing.T) {
	f := factory.NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(), 0, openDB(t), factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test"}))
	informer := f.InformerFor(&corev1.Pod{}, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer { return nil })
	if informer == nil {
		t.Fatal("InformerFor returned nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	cancel()
	if res := f.WaitForCacheSyncWithContext(ctx); res.Err == nil || !strings.Contains(res.Err.Error(), "nil informer") {
		t.Errorf("SyncResult.Err = %v, want one saying newFunc returned nil", res.Err)
	}
	f.Shutdown()
}
