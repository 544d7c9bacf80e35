package widgets_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/boltinformer/boltinformer/controllerruntime/examples/widgets"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/apicount"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/crtest"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := widgets.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// directClient talks to the server without a cache.
func directClient(t testing.TB) client.Client {
	t.Helper()
	c, err := client.New(srv.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var crdOnce sync.Once

// installCRD creates the Widget CRD once and waits until it is Established.
func installCRD(t testing.TB) {
	t.Helper()
	crdOnce.Do(func() {
		c := directClient(t)
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(widgets.CRD), &crd.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(crd.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("the Widget CRD was not Established: %v", err)
		}
	})
}

// operator is a running manager with the Widget controller.
type operator struct {
	reqs *crtest.Requests
	// counts tells a recovery's metadata lists and fetches from lists.
	counts *apicount.Counter
	stop   func()
	// indexBuildCalls are the owner index extractor's calls while the
	// controller set up its indexes (IndexField), before the start: a
	// build over the stored ConfigMaps.
	indexBuildCalls int64
}

// runOperator starts the operator's manager; a non-empty path gives it the
// persistent cache.
func runOperator(t *testing.T, path string) *operator {
	t.Helper()
	return runOperatorWith(t, path, "")
}

// runOperatorWith is runOperator with the reconciler's checkpoint name.
func runOperatorWith(t *testing.T, path, checkpoint string) *operator {
	t.Helper()
	reqs, counts := &crtest.Requests{}, &apicount.Counter{}
	cfg := rest.CopyConfig(srv.Config())
	cfg.Wrap(reqs.Wrap)
	cfg.Wrap(counts.Wrap)
	opts := ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if path != "" {
		opts.NewCache = widgets.PersistentCache(path)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &widgets.Reconciler{Client: mgr.GetClient(), Checkpoint: checkpoint}
	before := widgets.OwnerIndexCalls()
	if err := r.SetupWithManager(mgr, controller.Options{}); err != nil {
		t.Fatal(err)
	}
	indexBuildCalls := widgets.OwnerIndexCalls() - before
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	o := &operator{reqs: reqs, counts: counts, indexBuildCalls: indexBuildCalls, stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}}
	t.Cleanup(o.stop)
	return o
}

// state is what the operator should have made of a namespace: per Widget
// ConfigMap name, its data.
type state map[string]string

// wantState computes the desired state from the Widgets and Services on the
// server; gotState reads the ConfigMaps.
func wantState(t *testing.T, c client.Client, ns string) state {
	t.Helper()
	var ws widgets.WidgetList
	if err := c.List(context.Background(), &ws, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var svcs corev1.ServiceList
	if err := c.List(context.Background(), &svcs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, s := range svcs.Items {
		exists[s.Name] = true
	}
	out := state{}
	for _, w := range ws.Items {
		service := "absent"
		if exists[w.Spec.ServiceName] {
			service = "present"
		}
		out[widgets.ConfigMapName(w.Name)] = "message=" + w.Spec.Message + " service=" + service
	}
	return out
}

func gotState(t *testing.T, c client.Client, ns string) state {
	t.Helper()
	var cms corev1.ConfigMapList
	if err := c.List(context.Background(), &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := state{}
	for _, cm := range cms.Items {
		if metav1.GetControllerOf(&cm) != nil {
			out[cm.Name] = "message=" + cm.Data["message"] + " service=" + cm.Data["service"]
		}
	}
	return out
}

// converge waits until the operator has made the namespace what the server
// asks for, and returns how long that took.
func converge(t *testing.T, what string, ns string) time.Duration {
	t.Helper()
	c := directClient(t)
	start := time.Now()
	var got, want state
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, want = gotState(t, c, ns), wantState(t, c, ns)
		return maps.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("%s: the operator did not converge:\n got  %v\n want %v", what, sorted(got), sorted(want))
	}
	return time.Since(start)
}

func sorted(s state) []string {
	var out []string
	for k, v := range s {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return out
}

func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("w%d", time.Now().UnixNano()%1_000_000_000))
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func createWidget(t *testing.T, c client.Client, ns, name, message, service string) {
	t.Helper()
	w := &widgets.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: widgets.WidgetSpec{Message: message, ServiceName: service}}
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

func createService(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := c.Create(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
}

func deleteObject(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func updateMessage(t *testing.T, c client.Client, ns, name, message string) {
	t.Helper()
	var w widgets.Widget
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &w); err != nil {
		t.Fatal(err)
	}
	w.Spec.Message = message
	if err := c.Update(context.Background(), &w); err != nil {
		t.Fatal(err)
	}
}

// watchedResources are the resources the operator's cache holds.
var watchedResources = []string{"widgets", "configmaps", "services"}

// TestOperatorRestarts runs the example operator with a persistent cache
// through a cold start, a change seen through its metadata-only watch, a
// restart after changes made while it was down (no LIST, no field index
// rebuild), and a restart that finds its stored resourceVersions expired
// (kube-apiserver restarted: 410) and relists.
func TestOperatorRestarts(t *testing.T) {
	installCRD(t)
	c := directClient(t)
	ns := newNamespace(t, c)
	createService(t, c, ns, "svc-a")
	const n = 20
	for i := range n {
		createWidget(t, c, ns, fmt.Sprintf("w-%d", i), fmt.Sprintf("hello %d", i), []string{"svc-a", "svc-b"}[i%2])
	}
	path := filepath.Join(t.TempDir(), "cache.db")

	// Cold start.
	op := runOperator(t, path)
	took := converge(t, "cold start", ns)
	for _, r := range watchedResources {
		if op.reqs.List(r) == 0 {
			t.Errorf("cold start: no LIST of %s", r)
		}
	}
	t.Logf("cold start: converged in %v; LISTs widgets=%d configmaps=%d services=%d", took.Round(time.Millisecond),
		op.reqs.List("widgets"), op.reqs.List("configmaps"), op.reqs.List("services"))
	// The metadata-only watch of Services: svc-b appears.
	createService(t, c, ns, "svc-b")
	converge(t, "svc-b created while running", ns)
	op.stop()

	// Changes while it is down: a Widget added, one deleted (its ConfigMap
	// must go), one changed, a Service deleted.
	createWidget(t, c, ns, "w-new", "new", "svc-b")
	deleteObject(t, c, &widgets.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-0"}})
	updateMessage(t, c, ns, "w-1", "changed while down")
	deleteObject(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-a"}})

	op = runOperator(t, path)
	took = converge(t, "warm restart", ns)
	for _, r := range watchedResources {
		if got := op.reqs.List(r); got != 0 {
			t.Errorf("warm restart: %d LISTs of %s, want 0", got, r)
		}
	}
	// The owner index is stored and reused: IndexField did not rebuild it
	// over the stored ConfigMaps.
	if op.indexBuildCalls != 0 {
		t.Errorf("warm restart: IndexField ran the owner index extractor %d times over the %d stored ConfigMaps: the index was rebuilt", op.indexBuildCalls, n)
	}
	t.Logf("warm restart: converged in %v; LISTs widgets=%d configmaps=%d services=%d; index build calls %d",
		took.Round(time.Millisecond), op.reqs.List("widgets"), op.reqs.List("configmaps"), op.reqs.List("services"), op.indexBuildCalls)
	op.stop()

	// Down again; the apiserver restarts, so every stored resourceVersion
	// is expired: the informers get 410, and the deletions since still
	// reach the reconciler. The Widget and ConfigMap informers recover by
	// what changed (a metadata list, fetches of what changed), listing no
	// objects; the metadata-only Services relist (their list is metadata).
	createWidget(t, c, ns, "w-after-410", "late", "svc-a")
	deleteObject(t, c, &widgets.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-2"}})
	createService(t, c, ns, "svc-a")
	srv.RestartAPIServer(t)
	op = runOperator(t, path)
	took = converge(t, "restart after 410", ns)
	t.Logf("restart after 410: converged in %v; LISTs widgets=%d configmaps=%d services=%d", took.Round(time.Millisecond),
		op.reqs.List("widgets"), op.reqs.List("configmaps"), op.reqs.List("services"))
	for _, r := range []string{"widgets", "configmaps"} {
		lists := op.counts.Requests(r, apicount.List) + op.counts.Requests(r, apicount.WatchList)
		metadata, fetches := op.counts.Requests(r, apicount.Metadata), op.counts.Requests(r, apicount.Fetch)
		t.Logf("restart after 410: %s: %d metadata lists, %d fetches, %d lists", r, metadata, fetches, lists)
		if lists != 0 || metadata == 0 {
			t.Errorf("restart after 410: %s: %d lists and %d metadata lists, want a recovery: no list, a metadata list", r, lists, metadata)
		}
	}
	op.stop()
}

// TestOperatorCheckpointRestart runs the example operator with its
// checkpoint: a warm restart must reconcile exactly the Widgets whose
// inputs changed while it was down — a Widget updated, one deleted, one
// created, and those naming a Service that appeared — and no other Widget,
// in this namespace or any other the operator watches.
func TestOperatorCheckpointRestart(t *testing.T) {
	installCRD(t)
	c := directClient(t)
	ns := newNamespace(t, c)
	createService(t, c, ns, "svc-a")
	const n = 40
	for i := range n {
		createWidget(t, c, ns, fmt.Sprintf("w-%d", i), fmt.Sprintf("hello %d", i), []string{"svc-a", "svc-b"}[i%2])
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	// settle waits until the operator has converged and has handled every
	// request queued so far: a sentinel Widget's ConfigMap appears after
	// them (one worker, a FIFO queue).
	sentinels := 0
	settle := func(what string) {
		t.Helper()
		converge(t, what, ns)
		sentinels++
		createWidget(t, c, ns, fmt.Sprintf("sentinel-%d", sentinels), "sentinel", "")
		converge(t, what+", sentinel", ns)
	}

	op := runOperatorWith(t, path, "widgets")
	settle("cold start")
	op.stop()
	cold := widgets.TakeReconciles()
	if len(cold) < n {
		t.Fatalf("cold start reconciled %d Widgets, want at least %d", len(cold), n)
	}

	// While it is down: w-1 changed (it names svc-b), w-0 deleted, w-new
	// created, svc-b created: every Widget naming svc-b has a new input.
	updateMessage(t, c, ns, "w-1", "changed while down")
	deleteObject(t, c, &widgets.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-0"}})
	createWidget(t, c, ns, "w-new", "new", "svc-a")
	createService(t, c, ns, "svc-b")
	want := map[string]bool{ns + "/w-0": true, ns + "/w-new": true, ns + "/sentinel-2": true}
	for i := 1; i < n; i += 2 {
		want[fmt.Sprintf("%s/w-%d", ns, i)] = true
	}

	op = runOperatorWith(t, path, "widgets")
	settle("warm restart with a checkpoint")
	op.stop()
	got := widgets.TakeReconciles()
	var extra, missing []string
	for key := range got {
		if !want[key] {
			extra = append(extra, key)
		}
	}
	for key := range want {
		if got[key] == 0 {
			missing = append(missing, key)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra) > 0 || len(missing) > 0 {
		t.Errorf("warm restart reconciled %d Widgets (%d on the cold start); not changed but reconciled: %v; changed but not reconciled: %v",
			len(got), len(cold), extra, missing)
	}
	t.Logf("warm restart with a checkpoint: %d Widgets reconciled of %d on the cold start", len(got), len(cold))
}
