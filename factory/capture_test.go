package factory

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/internal/listidentity"
	"github.com/boltinformer/boltinformer/persist"
)

// capture and readClientGoInformer read client-go v0.37.2's
// sharedIndexInformer fields; this test pins them: if client-go renames
// one, every InformerFor call would fall back to memory, and this test says
// why.
func TestCaptureReadsClientGoInformer(t *testing.T) {
	c, err := newCaptureClient()
	if err != nil {
		t.Fatal(err)
	}
	marked := func(obj interface{}) (interface{}, error) {
		obj.(*corev1.Pod).Labels = map[string]string{"transformed": "yes"}
		return obj, nil
	}
	handler := cache.ResourceEventHandlerFuncs{}
	var watchErrors []error
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer := coreinformers.NewFilteredPodInformer(cs, "team-a", 2*resync, cache.Indexers{"node": cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) {
				o.LabelSelector, o.FieldSelector, o.Limit = "app=web", "spec.nodeName=n1", 7
			})
		_ = informer.SetTransform(marked)
		_ = informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { watchErrors = append(watchErrors, err) })
		_, _ = informer.AddEventHandlerWithResyncPeriod(handler, 3*time.Minute)
		return informer
	}
	_, gvr, err := resourceOf(&corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.capture(&corev1.Pod{}, gvr, newFunc, time.Minute)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	if req.namespace != "team-a" || req.options.LabelSelector != "app=web" || req.options.FieldSelector != "spec.nodeName=n1" {
		t.Errorf("captured namespace %q, options %+v", req.namespace, req.options)
	}
	if req.options.Limit != 0 {
		t.Errorf("captured the page size %d as a filter", req.options.Limit)
	}
	if !req.requestOnly || !strings.Contains(req.code, "k8s.io/client-go/informers/core/v1.") {
		t.Errorf("generated Pod informer's ListerWatcher %s: requestOnly = %v", req.code, req.requestOnly)
	}
	if reqs := c.take(); len(reqs) != 0 {
		t.Errorf("%d requests left over", len(reqs))
	}

	parts, err := readClientGoInformer(newFunc(fake.NewSimpleClientset(), time.Minute))
	if err != nil {
		t.Fatalf("readClientGoInformer: %v", err)
	}
	if parts.resync != 2*time.Minute {
		t.Errorf("read resync %v, want the constructor's 2m", parts.resync)
	}
	if _, ok := parts.indexers["node"]; !ok || len(parts.indexers) != 1 {
		t.Errorf("read indexers %v", parts.indexers)
	}
	if parts.transform == nil {
		t.Fatal("transform not read")
	}
	out, _ := parts.transform(&corev1.Pod{})
	if out.(*corev1.Pod).Labels["transformed"] != "yes" {
		t.Error("read transform is not the constructor's")
	}
	if parts.watchErrorHandler == nil {
		t.Fatal("watch error handler not read")
	}
	parts.watchErrorHandler(context.Background(), nil, errCaptured)
	if len(watchErrors) != 1 {
		t.Error("read watch error handler is not the constructor's")
	}
	if len(parts.handlers) != 1 || parts.handlers[0].resync != 3*time.Minute {
		t.Errorf("read handlers %+v, want the constructor's one with resync 3m", parts.handlers)
	}
	if _, ok := parts.example.(*corev1.Pod); !ok || parts.listerWatcher == nil {
		t.Errorf("read example %T, ListerWatcher %v", parts.example, parts.listerWatcher)
	}
}

// A wrapper around client-go's informer may change its behaviour, so it is
// not looked through.
func TestCaptureRejectsWrappedInformer(t *testing.T) {
	c, err := newCaptureClient()
	if err != nil {
		t.Fatal(err)
	}
	type wrapped struct{ cache.SharedIndexInformer }
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return &wrapped{coreinformers.NewPodInformer(cs, "", resync, cache.Indexers{})}
	}
	_, gvr, _ := resourceOf(&corev1.Pod{})
	if _, err := c.capture(&corev1.Pod{}, gvr, newFunc, 0); err == nil || !strings.Contains(err.Error(), "not client-go's shared informer") {
		t.Errorf("capture of a wrapped informer: %v", err)
	}
	// And one for another type than the example object.
	if _, err := c.capture(&corev1.ConfigMap{}, gvr, newFunc, 0); err == nil {
		t.Error("capture accepted an informer of Pods for ConfigMaps")
	}
}

// The list identity stored with a collection differs whenever what is
// listed differs.
func TestListIdentity(t *testing.T) {
	_, pods, _ := resourceOf(&corev1.Pod{})
	base := listidentity.FromOptions("typed", pods, "Pod", "", metav1.ListOptions{})
	same := listidentity.FromOptions("typed", pods, "Pod", "", metav1.ListOptions{Limit: 500, ResourceVersion: "7", Watch: true})
	if base.String() != same.String() {
		t.Errorf("paging and resume fields change the identity: %s vs %s", base, same)
	}
	for _, other := range []listidentity.List{
		listidentity.FromOptions("dynamic", pods, "", "", metav1.ListOptions{}),
		listidentity.FromOptions("typed", pods, "Pod", "a", metav1.ListOptions{}),
		listidentity.FromOptions("typed", pods, "Pod", "", metav1.ListOptions{LabelSelector: "app=web"}),
		listidentity.FromOptions("typed", pods, "Pod", "", metav1.ListOptions{FieldSelector: "status.phase!=Failed"}),
	} {
		if other.String() == base.String() {
			t.Errorf("identity %s equals the unfiltered one", other)
		}
	}

	// A custom ListerWatcher's code and declared version are part of the
	// identity. Its collection is named apart from the plain list's, but
	// not after the version. So a new version reuses it cold.
	custom := base.WithListerWatcher("*cache.ListWatch{ListWithContextFunc=main.f.func1}", "v1")
	for i, other := range []listidentity.List{
		custom,
		base.WithListerWatcher("*cache.ListWatch{ListWithContextFunc=main.f.func1}", "v2"),
		base.WithListerWatcher("*cache.ListWatch{ListWithContextFunc=main.g.func1}", "v1"),
		base.WithListerWatcher("*cache.ListWatch{ListWithContextFunc=main.f.func1}", ""),
	} {
		if other.String() == base.String() {
			t.Errorf("identity %s equals the plain list's", other)
		}
		if i != 0 && other.String() == custom.String() {
			t.Errorf("identity %s equals %s", other, custom)
		}
		if other.Collection() == base.Collection() || other.Collection() != custom.Collection() {
			t.Errorf("custom ListerWatcher's collection %q (plain list's %q, v1's %q)", other.Collection(), base.Collection(), custom.Collection())
		}
	}
}

// client-go's own ListerWatchers (generated informers',
// cache.NewListWatchFromClient's) are told from custom ones by their
// functions' names, through client-go's wrapper or not.
func TestListerWatcherCode(t *testing.T) {
	cs := fake.NewSimpleClientset()
	generated, _ := readClientGoInformer(coreinformers.NewFilteredPodInformer(cs, "", 0, nil, nil))
	plain := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cs.CoreV1().Pods("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods("").Watch(ctx, o)
		},
	}
	type ownLW struct{ cache.ListerWatcher }
	for _, c := range []struct {
		name        string
		lw          cache.ListerWatcher
		requestOnly bool
		contains    string
	}{
		{"generated", generated.listerWatcher, true, "k8s.io/client-go/informers/core/v1.NewTypedPodInformerWithOptions"},
		{"hand-written", plain, false, "factory.TestListerWatcherCode.func1"},
		{"hand-written, wrapped by client-go", cache.ToListWatcherWithWatchListSemantics(plain, cs), false, "factory.TestListerWatcherCode.func2"},
		{"generated, in another type", ownLW{generated.listerWatcher}, false, "factory.ownLW"},
		{"cache.NewListWatchFromClient", cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", fields.Everything()), true, "k8s.io/client-go/tools/cache.NewFilteredListWatchFromClient"},
	} {
		code, requestOnly := listerWatcherCode(c.lw)
		if requestOnly != c.requestOnly || !strings.Contains(code, c.contains) {
			t.Errorf("%s: code %s, requestOnly %v; want %v and %q in the code", c.name, code, requestOnly, c.requestOnly, c.contains)
		}
	}
}

// With WithInformerName, client-go's generated informer reserves its
// metrics name for its resource, so its FIFO publishes metrics. The
// informer InformerFor builds must hold that reservation, as client-go's
// does, not the informer built to capture the request, which never runs.
func TestInformerForKeepsMetricsName(t *testing.T) {
	reserved := func(t *testing.T, name string, build func(*cache.InformerName) cache.SharedIndexInformer) bool {
		t.Helper()
		n, err := cache.NewInformerName(name)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Release()
		informer := build(n)
		// The generated accessors wrap the informer in a typed wrapper.
		for {
			f := reflect.ValueOf(informer).Elem().FieldByName("SharedIndexInformer")
			if !f.IsValid() {
				break
			}
			informer = f.Interface().(cache.SharedIndexInformer)
		}
		if bi, ok := informer.(*bcache.Informer); ok {
			id, ok := unexportedValue(reflect.ValueOf(bi).Elem(), "opts").FieldByName("Identifier").Interface().(cache.InformerNameAndResource)
			if !ok {
				t.Fatal("bcache.Informer keeps no opts.Identifier")
			}
			return id.Reserved()
		}
		parts, err := readClientGoInformer(informer)
		if err != nil {
			t.Fatal(err)
		}
		return parts.identifier.Reserved()
	}
	client := fake.NewSimpleClientset()
	if !reserved(t, "boltinformer-test-client-go", func(n *cache.InformerName) cache.SharedIndexInformer {
		return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithInformerName(n)).Core().V1().Pods().Informer()
	}) {
		t.Fatal("client-go's informer does not hold its metrics name")
	}
	if !reserved(t, "boltinformer-test-ours", func(n *cache.InformerName) cache.SharedIndexInformer {
		f := NewSharedInformerFactoryWithOptions(client, 0, openTestDB(t), WithInformerName(n), WithPersistence(PersistenceOptions{ClusterIdentity: "test"}))
		return f.Core().V1().Pods().Informer()
	}) {
		t.Error("InformerFor's informer does not hold its metrics name: its FIFO publishes no metrics")
	}
	// kube-scheduler's Pod informer: newFunc closes over the InformerName
	// instead of reading the factory's, so the capture registers it first.
	if !reserved(t, "boltinformer-test-closure", func(n *cache.InformerName) cache.SharedIndexInformer {
		f := NewSharedInformerFactoryWithOptions(client, 0, openTestDB(t), WithInformerName(n), WithPersistence(PersistenceOptions{ClusterIdentity: "test"}))
		return f.InformerFor(&corev1.Pod{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewPodInformerWithOptions(cs, metav1.NamespaceAll, internalinterfaces.InformerOptions{
				ResyncPeriod: resync, InformerName: n,
			})
		})
	}) {
		t.Error("InformerFor's informer, from a newFunc that closes over the InformerName, does not hold its metrics name")
	}
}

func openTestDB(t *testing.T) *persist.DB {
	t.Helper()
	db, err := persist.Open(filepath.Join(t.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
