package factory_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

// An index function that fails for one Pod of a paged cold start: the docs
// say the list leaves out only that Pod, applies the rest, and the error
// names the refusal.
func TestFailingIndexFunctionOnColdStart(t *testing.T) {
	const n = 600
	srv := newPodAPIServer(t)
	for i := 0; i < n; i++ {
		srv.apply(watch.Added, parityPod(i))
	}
	db, err := persist.Open(filepath.Join(t.TempDir(), "cache.db"), persist.Options{Scheme: scheme.Scheme, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := factory.NewSharedInformerFactory(srv.clientset(t), 0, db)
	inf := f.Core().V1().Pods().Informer()
	const bad = "ns1/pod-0007"
	if err := inf.AddIndexers(cache.Indexers{"failing": func(obj any) ([]string, error) {
		if p := obj.(*corev1.Pod); p.Namespace+"/"+p.Name == bad {
			return nil, errors.New("no value for this Pod")
		}
		return []string{"v"}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	ctx, cancel := context.WithCancel(context.Background())
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		mu.Lock()
		reported = append(reported, err.Error())
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	log := newEventLog()
	if _, err := inf.AddEventHandler(log.handler(inf)); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	res := f.WaitForCacheSyncWithContext(ctx)
	defer f.Shutdown()
	defer cancel()
	if res.Err != nil {
		t.Fatalf("WaitForCacheSync: %v", res.Err)
	}
	got := len(log.waitFor(n - 1))
	if keys := inf.GetIndexer().ListKeys(); len(keys) != n-1 {
		t.Errorf("after a list with one refused Pod the store holds %d keys, want %d", len(keys), n-1)
	}
	if _, ok, _ := inf.GetIndexer().GetByKey(bad); ok {
		t.Errorf("the refused Pod %s is in the store", bad)
	}
	mu.Lock()
	defer mu.Unlock()
	named := false
	for _, r := range reported {
		named = named || strings.Contains(r, bad)
	}
	if !named {
		t.Errorf("the watch error handler was told %q; none names the refused Pod %s (handlers got %d adds)", reported, bad, got)
	}
}

// Objects without a resourceVersion written through the informer's store,
// as unit tests seed listers: client-go's lister serves them.
func TestStoreWritesWithoutResourceVersion(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "seeded"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	check := func(name string, f informers.SharedInformerFactory) string {
		inf := f.Core().V1().Pods().Informer()
		if err := inf.AddIndexers(parityIndexers()); err != nil {
			t.Fatal(err)
		}
		var out []string
		if err := inf.GetIndexer().Add(pod.DeepCopy()); err != nil {
			out = append(out, "Add: "+err.Error())
		}
		got, err := f.Core().V1().Pods().Lister().Pods("a").Get("seeded")
		out = append(out, fmt.Sprintf("lister Get: %v %v", got != nil, err))
		objs, err := inf.GetIndexer().ByIndex("byNode", "n1")
		out = append(out, fmt.Sprintf("ByIndex: %d %v", len(objs), err))
		upd := pod.DeepCopy()
		upd.Spec.NodeName = "n2"
		if err := inf.GetIndexer().Update(upd); err != nil {
			out = append(out, "Update: "+err.Error())
		}
		objs, err = inf.GetIndexer().ByIndex("byNode", "n2")
		out = append(out, fmt.Sprintf("ByIndex after Update: %d %v", len(objs), err))
		return strings.Join(out, "; ")
	}
	want := check("client-go", informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0))
	got := check("boltinformer", factory.NewSharedInformerFactory(fake.NewSimpleClientset(kubeSystem()), 0, openDB(t)))
	if got != want {
		t.Errorf("writes without a resourceVersion through the store of an unstarted informer:\nclient-go:    %s\nboltinformer: %s", want, got)
	}
}

// A second InformerFor of the same type with another tweak: client-go's
// factory keys informers by type and returns the first one.
func TestSecondInformerForSameTypeOtherTweak(t *testing.T) {
	newFunc := func(sel string) func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
		return func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredPodInformer(c, "", resync, cache.Indexers{},
				func(o *metav1.ListOptions) { o.LabelSelector = sel })
		}
	}
	pods := []runtime.Object{kubeSystem(),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db", Labels: map[string]string{"app": "db"}}}}
	run := func(f informers.SharedInformerFactory) string {
		first := f.InformerFor(&corev1.Pod{}, newFunc("app=web"))
		second := f.InformerFor(&corev1.Pod{}, newFunc("app=db"))
		ctx, cancel := context.WithCancel(context.Background())
		defer f.Shutdown()
		defer cancel()
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
		return fmt.Sprintf("same informer %v; first holds %q; second holds %q", first == second, first.GetStore().ListKeys(), second.GetStore().ListKeys())
	}
	want := run(informers.NewSharedInformerFactory(fake.NewSimpleClientset(pods...), 0))
	got := run(factory.NewSharedInformerFactory(fake.NewSimpleClientset(pods...), 0, openDB(t)))
	t.Logf("client-go: %s", want)
	if got != want {
		t.Errorf("two InformerFor of Pods with different tweaks:\nclient-go:    %s\nboltinformer: %s", want, got)
	}
}

// AddIndexers after Start, allowed by client-go v0.37.2 until the informer
// stops, on a cold start and on a warm one before it is synced, the warm
// one with a changed index function.
func TestAddIndexersAfterStart(t *testing.T) {
	const n = 600
	srv := newPodAPIServer(t)
	for i := 0; i < n; i++ {
		srv.apply(watch.Added, parityPod(i))
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	for round := 0; round < 2; round++ {
		db, err := persist.Open(path, persist.Options{Scheme: scheme.Scheme, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cg := informers.NewSharedInformerFactory(srv.clientset(t), 0)
		bf := factory.NewSharedInformerFactory(srv.clientset(t), 0, db)
		cgi, bfi := cg.Core().V1().Pods().Informer(), bf.Core().V1().Pods().Informer()
		cg.Start(ctx.Done())
		bf.Start(ctx.Done())
		// The second round's byNode is another function under the same name.
		indexers := parityIndexersWith(strings.Repeat("v2:", round))
		errs := fmt.Sprintf("client-go %v, boltinformer %v", cgi.AddIndexers(indexers), bfi.AddIndexers(indexers))
		if errs != "client-go <nil>, boltinformer <nil>" {
			t.Errorf("round %d: AddIndexers right after Start: %s", round, errs)
		}
		cg.WaitForCacheSync(ctx.Done())
		if res := bf.WaitForCacheSyncWithContext(ctx); res.Err != nil {
			t.Fatal(res.Err)
		}
		if ia, ib := indexAnswers(t, cgi), indexAnswers(t, bfi); ia != ib {
			t.Errorf("round %d: indexes added after Start answer otherwise:\nclient-go only:\n%s\nboltinformer only:\n%s", round,
				diffLines(strings.Split(ia, "\n"), strings.Split(ib, "\n")), diffLines(strings.Split(ib, "\n"), strings.Split(ia, "\n")))
		}
		if pages, want := srv.takeFullLists(), []int{2, 0}[round]; pages != want {
			t.Errorf("round %d: %d list pages requested, want %d", round, pages, want)
		}
		if k := len(bfi.GetIndexer().ListKeys()); k != n {
			t.Errorf("round %d: boltinformer holds %d Pods, want %d", round, k, n)
		}
		srv.apply(watch.Modified, parityPod(round+10))
		cancel()
		cg.Shutdown()
		bf.Shutdown()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// The same writes through the store of a started, synced informer.
func TestStoreWritesWithoutResourceVersionAfterSync(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "seeded"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	check := func(f informers.SharedInformerFactory) string {
		inf := f.Core().V1().Pods().Informer()
		if err := inf.AddIndexers(parityIndexers()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer f.Shutdown()
		defer cancel()
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
		var out []string
		if err := inf.GetIndexer().Add(pod.DeepCopy()); err != nil {
			out = append(out, "Add: "+err.Error())
		}
		got, err := f.Core().V1().Pods().Lister().Pods("a").Get("seeded")
		out = append(out, fmt.Sprintf("lister Get: %v %v", got != nil, err))
		upd := pod.DeepCopy()
		upd.Spec.NodeName = "n2"
		if err := inf.GetIndexer().Update(upd); err != nil {
			out = append(out, "Update: "+err.Error())
		}
		objs, err := inf.GetIndexer().ByIndex("byNode", "n2")
		out = append(out, fmt.Sprintf("ByIndex after Update: %d %v", len(objs), err))
		if err := inf.GetIndexer().Delete(upd); err != nil {
			out = append(out, "Delete: "+err.Error())
		}
		out = append(out, fmt.Sprintf("keys after Delete: %q", inf.GetIndexer().ListKeys()))
		return strings.Join(out, "; ")
	}
	want := check(informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0))
	got := check(factory.NewSharedInformerFactory(fake.NewSimpleClientset(kubeSystem()), 0, openDB(t)))
	if got != want {
		t.Errorf("writes without a resourceVersion through the store of a synced informer:\nclient-go:    %s\nboltinformer: %s", want, got)
	}
}
