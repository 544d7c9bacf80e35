package factory_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	bcache "github.com/boltinformer/boltinformer/cache"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/internal/testing/metrictest"
)

// recordErrors makes utilruntime.HandleError record what it is given, for
// the rest of the test.
func recordErrors(t *testing.T) *[]error {
	t.Helper()
	saved := utilruntime.ErrorHandlers
	var errs []error
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{func(_ context.Context, err error, _ string, _ ...interface{}) {
		errs = append(errs, err)
	}}
	t.Cleanup(func() { utilruntime.ErrorHandlers = saved })
	return &errs
}

// newMetrics returns metrics on a registry of their own.
func newMetrics(t *testing.T) (*bcache.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := bcache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// setUnexportedZero sets the unexported field name of client-go's
// sharedIndexInformer to its zero value. The informer may sit in typed
// wrappers. A client-go whose informers are laid out otherwise would
// present the field so.
func setUnexportedZero(informer cache.SharedIndexInformer, name string) {
	v := reflect.ValueOf(informer).Elem()
	for v.Type().Name() != "sharedIndexInformer" {
		v = reflect.ValueOf(v.FieldByName("SharedIndexInformer").Interface()).Elem()
	}
	f := v.FieldByName(name)
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetZero()
}

// newFunc's informer may be client-go's while its private state is not the
// client-go version the factory reads. Here its processor is gone, as if
// client-go had moved its handlers elsewhere. InformerFor then falls back
// to newFunc's informer in memory and says so loudly. An error through
// utilruntime.HandleError says what happened, what it costs and what to do.
// boltinformer_factory_fallbacks_total{reason="client-go-layout"} counts
// it.
func TestInformerForReportsClientGoLayout(t *testing.T) {
	errs := recordErrors(t)
	metrics, reg := newMetrics(t)
	newFunc := func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		informer := coreinformers.NewPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{})
		setUnexportedZero(informer, "processor")
		return informer
	}
	f := factory.NewSharedInformerFactoryWithOptions(fake.NewSimpleClientset(), 0, openDB(t),
		factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test", Metrics: metrics}))
	defer f.Shutdown()
	informer := f.InformerFor(&corev1.Pod{}, newFunc)
	if factory.PersistentIndexer(informer) != nil {
		t.Error("the informer persists, though the factory could not read it")
	}
	if len(*errs) != 1 {
		t.Fatalf("HandleError got %v, want one error", *errs)
	}
	msg := (*errs)[0].Error()
	for _, want := range []string{"*v1.Pod", "runs in memory", "nothing of it is persisted", "pin k8s.io/client-go to v0.37.2", "file an issue"} {
		if !strings.Contains(msg, want) {
			t.Errorf("reported %q, which does not say %q", msg, want)
		}
	}
	labels := map[string]string{"resource": "/v1, Resource=pods", "reason": "client-go-layout"}
	if got := metrictest.CounterValue(t, reg, "boltinformer_factory_fallbacks_total", labels); got != 1 {
		t.Errorf("boltinformer_factory_fallbacks_total%v = %v, want 1", labels, got)
	}
	// InformerFor builds an informer once per type: asking again reports
	// nothing more.
	f.InformerFor(&corev1.Pod{}, newFunc)
	if len(*errs) != 1 || metrictest.CounterValue(t, reg, "boltinformer_factory_fallbacks_total", labels) != 1 {
		t.Errorf("a second InformerFor reported again: %v", *errs)
	}
}

// The documented fallbacks (an informer that is not client-go's, a custom
// ListerWatcher without a declared version) are counted by reason but are
// not errors. A persistent informer's own metrics are exported through
// PersistenceOptions.Metrics too.
func TestInformerForCountsFallbacks(t *testing.T) {
	errs := recordErrors(t)
	metrics, reg := newMetrics(t)
	client := fake.NewSimpleClientset(phasePod("p1", corev1.PodRunning))
	f := factory.NewSharedInformerFactoryWithOptions(client, 0, openDB(t),
		factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test", Metrics: metrics}))
	type wrapped struct{ cache.SharedIndexInformer }
	f.InformerFor(&corev1.Pod{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return &wrapped{coreinformers.NewPodInformer(cs, metav1.NamespaceAll, resync, cache.Indexers{})}
	})
	// A custom ListerWatcher on a fake clientset never syncs (the fake sends
	// no bookmark for watch-list), so its factory is not started.
	unstarted := factory.NewSharedInformerFactoryWithOptions(client, 0, openDB(t),
		factory.WithPersistence(factory.PersistenceOptions{ClusterIdentity: "test", Metrics: metrics}))
	defer unstarted.Shutdown()
	unstarted.InformerFor(&corev1.Node{}, func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Nodes().List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Nodes().Watch(ctx, opts)
			},
		}, &corev1.Node{}, resync, cache.Indexers{})
	})
	persistent := f.Core().V1().ConfigMaps().Informer()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer func() { cancel(); f.Shutdown() }()
	startAndSync(t, ctx, f)

	if len(*errs) != 0 {
		t.Errorf("documented fallbacks reported as errors: %v", *errs)
	}
	for _, c := range []struct{ resource, reason string }{
		{"/v1, Resource=pods", "not-client-go"},
		{"/v1, Resource=nodes", "custom-lister-watcher"},
	} {
		labels := map[string]string{"resource": c.resource, "reason": c.reason}
		if got := metrictest.CounterValue(t, reg, "boltinformer_factory_fallbacks_total", labels); got != 1 {
			t.Errorf("boltinformer_factory_fallbacks_total%v = %v, want 1", labels, got)
		}
	}
	if factory.PersistentIndexer(persistent) == nil {
		t.Fatal("the ConfigMaps informer does not persist")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !slices.Contains(names, "boltinformer_informer_starts_total") {
		t.Errorf("the persistent informer's metrics are not exported: %v", names)
	}
}
