package controllerruntime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	bcache "github.com/boltinformer/boltinformer/cache"
	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/internal/testing/poll"
	"github.com/boltinformer/boltinformer/persist"
)

// TestCheckpointSkipsAtRegistration checks a warm restart with a
// checkpointed reconciler. The informer drops the initial adds of the
// ConfigMaps it acknowledged as controller-runtime registers the For
// handler. The metric counts them there. The predicate, which would drop
// them later, counts none of them. Only the ConfigMaps changed while the
// manager was down are reconciled.
func TestCheckpointSkipsAtRegistration(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	const n = 20
	for i := range n {
		createConfigMap(t, cs, ns, fmt.Sprintf("cm-%02d", i), ns, "")
	}
	path := filepath.Join(t.TempDir(), "cache.db")

	m := runCheckpointed(t, ns, path, srv.Config())
	m.settle(t, cs, ns, "sentinel-cold")
	// The acknowledgement follows the Reconcile's return.
	poll.Until(t, 30*time.Second, "every ConfigMap acknowledged", func() bool { return m.cp.Len() == n+1 })
	m.stop()
	if got := len(m.reconciled()); got != n+1 {
		t.Fatalf("cold start reconciled %d ConfigMaps, want %d", got, n+1)
	}

	ctx := context.Background()
	for _, name := range []string{"cm-03", "cm-11"} {
		patch := []byte(`{"metadata":{"labels":{"changed":"while-down"}}}`)
		if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	m = runCheckpointed(t, ns, path, srv.Config())
	m.settle(t, cs, ns, "sentinel-warm")
	// controller-runtime's priority queue, its default, takes initial adds
	// at low priority. So the changed ConfigMaps, given as initial adds
	// when the handler joins, may be reconciled after the sentinel.
	want := []string{ns + "/cm-03", ns + "/cm-11", ns + "/sentinel-warm"}
	poll.Until(t, 30*time.Second, "the changed ConfigMaps reconciled", func() bool {
		got := m.reconciled()
		return slices.Contains(got, want[0]) && slices.Contains(got, want[1])
	})
	// n-2 unchanged ConfigMaps and the cold start's sentinel.
	if got := m.skippedAtRegistration(t); got != n-1 {
		t.Errorf("the informer dropped %v acknowledged initial adds as the handler was registered, want %d", got, n-1)
	}
	m.stop()
	if got := m.reconciled(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("warm restart reconciled %v, want %v", got, want)
	}
	if got := m.cp.Skipped(); got != n-1 {
		t.Errorf("Skipped() = %d, want %d", got, n-1)
	}
}

// checkpointed is a manager whose one controller reconciles a namespace's
// ConfigMaps (those labelled app=<namespace>) through a checkpoint, on cfg;
// the cache also runs an informer for each of informers (other forms of
// ConfigMaps), built before the manager starts.
type checkpointed struct {
	cp    *boltcr.Checkpoint
	cache cache.Cache
	reg   *prometheus.Registry
	stop  func()

	mu   sync.Mutex
	seen map[string]bool
	// sentinel is closed when the ConfigMap named sentinelName is
	// reconciled.
	sentinelName string
	sentinel     chan struct{}
}

func runCheckpointed(t *testing.T, ns, path string, cfg *rest.Config, informers ...client.Object) *checkpointed {
	t.Helper()
	m := &checkpointed{reg: prometheus.NewRegistry(), seen: map[string]bool{}}
	metrics, err := bcache.NewMetrics(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// One namespace's ConfigMaps, through one informer (a
		// DefaultNamespaces cache has one per namespace, which checkpoints
		// do not support).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{"app": ns})},
		}},
		NewCache: boltcr.NewCache(boltcr.Options{Path: path, File: persist.Options{NoSync: true}, Metrics: metrics}),
	})
	if err != nil {
		t.Fatal(err)
	}
	m.cache = mgr.GetCache()
	ctx, cancel := context.WithCancel(context.Background())
	if m.cp, err = boltcr.NewCheckpoint(ctx, mgr.GetCache(), "configmaps", &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	for _, obj := range informers {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	r := reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.seen[req.String()] = true
		if req.Name == m.sentinelName && m.sentinel != nil {
			close(m.sentinel)
			m.sentinel = nil
		}
		return reconcile.Result{}, nil
	})
	// One worker: requests are handled in the order they are queued.
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}, m.cp.ForOption()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).Complete(m.cp.Reconciler(r)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	m.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(m.stop)
	return m
}

// settle creates the ConfigMap sentinel and waits until it is reconciled:
// with one worker, every request queued before it has been handled.
func (m *checkpointed) settle(t *testing.T, cs kubernetes.Interface, ns, sentinel string) {
	t.Helper()
	m.mu.Lock()
	m.sentinelName = sentinel
	ch := make(chan struct{})
	m.sentinel = ch
	m.mu.Unlock()
	createConfigMap(t, cs, ns, sentinel, ns, "")
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s was not reconciled", sentinel)
	}
}

func (m *checkpointed) reconciled() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// skippedAtRegistration reads the informer's count of dropped initial adds.
func (m *checkpointed) skippedAtRegistration(t *testing.T) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "boltinformer_checkpoint_skipped_initial_adds_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if label(s, "checkpoint") == "configmaps" {
				return s.GetCounter().GetValue()
			}
		}
	}
	return -1
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
