package controllerruntime_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/crtest"
	"github.com/boltinformer/boltinformer/persist"
)

// counted returns the server's config with LIST requests counted.
func counted() (*rest.Config, *crtest.Requests) {
	r := &crtest.Requests{}
	cfg := srv.Config()
	cfg.Wrap(r.Wrap)
	return cfg, r
}

func clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespaces creates n namespaces named after the test.
func namespaces(t testing.TB, cs kubernetes.Interface, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		name := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1_000_000_000, i)
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	return out
}

func createConfigMap(t testing.TB, cs kubernetes.Interface, ns, name, app, owner string) {
	t.Helper()
	_, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Data:       map[string]string{"owner": owner},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// ownerField returns the field index extractor of the tests, counting its
// calls in calls: a warm start must not call it for every stored object.
func ownerField(calls *atomic.Int64) client.IndexerFunc {
	return func(obj client.Object) []string {
		calls.Add(1)
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Data["owner"] != "" {
			return []string{cm.Data["owner"]}
		}
		return nil
	}
}

// running is a started cache and how to stop it.
type running struct {
	cache.Cache
	stop func()
	// extractorCalls counts the calls of the cache's owner field index.
	extractorCalls *atomic.Int64
	// rebuildCalls are the extractor's calls while IndexField ran, before
	// the start: building the index over stored objects. A warm start
	// reuses the stored index and makes none. (During the start the core
	// may run the extractors once more per stored object, to verify the
	// stored entries of an index whose function cannot be identified.)
	rebuildCalls int64
}

// startCache builds a cache with build, indexes ConfigMaps by owner, starts
// it, and waits for its informers of typed, unstructured and metadata-only
// ConfigMaps to sync. stop cancels it and waits for Start to return.
func startCache(t *testing.T, build func() (cache.Cache, error)) running {
	t.Helper()
	c, err := build()
	if err != nil {
		t.Fatal(err)
	}
	calls := &atomic.Int64{}
	if err := c.IndexField(context.Background(), &corev1.ConfigMap{}, "owner", ownerField(calls)); err != nil {
		t.Fatal(err)
	}
	rebuildCalls := calls.Load()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache Start: %v", err)
		}
	}
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			stop()
		}
	})
	for _, obj := range []client.Object{&corev1.ConfigMap{}, unstructuredConfigMap(), metadataConfigMap()} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		t.Fatal("cache did not sync")
	}
	return running{Cache: c, stop: stop, extractorCalls: calls, rebuildCalls: rebuildCalls}
}

func unstructuredConfigMap() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	return u
}

func metadataConfigMap() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return m
}

// views are the reads a controller makes, each as sorted namespace/name
// (plus the app label), over typed, unstructured and metadata objects.
func views(t *testing.T, c client.Reader, nss []string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	add := func(name string, list client.ObjectList, opts ...client.ListOption) {
		if err := c.List(ctx, list, opts...); err != nil {
			out[name] = []string{"error: " + err.Error()}
			return
		}
		var keys []string
		switch l := list.(type) {
		case *corev1.ConfigMapList:
			for _, o := range l.Items {
				keys = append(keys, o.Namespace+"/"+o.Name+" app="+o.Labels["app"]+" owner="+o.Data["owner"])
			}
		case *unstructured.UnstructuredList:
			for _, o := range l.Items {
				owner, _, _ := unstructured.NestedString(o.Object, "data", "owner")
				keys = append(keys, o.GetNamespace()+"/"+o.GetName()+" app="+o.GetLabels()["app"]+" owner="+owner)
			}
		case *metav1.PartialObjectMetadataList:
			for _, o := range l.Items {
				keys = append(keys, o.Namespace+"/"+o.Name+" app="+o.Labels["app"]+" kind="+o.Kind)
			}
		}
		sort.Strings(keys)
		out[name] = keys
	}
	uList := func() *unstructured.UnstructuredList {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("v1")
		l.SetKind("ConfigMapList")
		return l
	}
	mList := func() *metav1.PartialObjectMetadataList {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		return l
	}
	add("typed all", &corev1.ConfigMapList{})
	add("typed labels app=x", &corev1.ConfigMapList{}, client.MatchingLabels{"app": "x"})
	add("typed selector app in (x,y)", &corev1.ConfigMapList{}, client.MatchingLabelsSelector{Selector: mustSelector("app in (x,y)")})
	add("typed fields owner=o1", &corev1.ConfigMapList{}, client.MatchingFields{"owner": "o1"})
	add("typed field metadata.name", &corev1.ConfigMapList{}, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "cm-1")}, client.InNamespace(nss[0]))
	add("unstructured all", uList())
	add("unstructured labels app=y", uList(), client.MatchingLabels{"app": "y"})
	add("metadata all", mList())
	for _, ns := range nss {
		add("typed ns="+ns, &corev1.ConfigMapList{}, client.InNamespace(ns))
		add("typed ns="+ns+" owner=o2", &corev1.ConfigMapList{}, client.InNamespace(ns), client.MatchingFields{"owner": "o2"})
		add("metadata ns="+ns, mList(), client.InNamespace(ns))
		add("unstructured ns="+ns, uList(), client.InNamespace(ns))
		var cm corev1.ConfigMap
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-1"}, &cm)
		out["get "+ns+"/cm-1"] = []string{fmt.Sprint(cm.Data["owner"], " ", errString(err))}
		m := metadataConfigMap()
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cm-2"}, m)
		out["get metadata "+ns+"/cm-2"] = []string{fmt.Sprint(m.Labels["app"], " ", errString(err))}
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func mustSelector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

// sameViews waits until the persistent cache's views equal the default
// cache's (the watch delivers changes asynchronously) and reports the
// difference if they never do.
func sameViews(t *testing.T, what string, persistent, reference client.Reader, nss []string) {
	t.Helper()
	var got, want map[string][]string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, want = views(t, persistent, nss), views(t, reference, nss)
		return reflect.DeepEqual(got, want), nil
	})
	if err != nil {
		for k := range want {
			if !slices.Equal(got[k], want[k]) {
				t.Errorf("%s: %s:\n persistent %q\n default    %q", what, k, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: %s only in the persistent cache", what, k)
			}
		}
	}
}

// TestRestartResumesEveryInformer compares a multi-namespace cache with
// controller-runtime's default cache over the same server. It covers Get
// and List across namespaces, label and field selectors, and
// MatchingFields on an index. It covers typed, unstructured and metadata
// objects. It compares them on a cold start and after a restart, with
// changes made while the cache was down. The restart must neither LIST nor
// rebuild the field index.
func TestRestartResumesEveryInformer(t *testing.T) {
	cs := clientset(t)
	nss := namespaces(t, cs, 3)
	watched := nss[:2]
	for _, ns := range nss {
		for i := range 6 {
			createConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), []string{"x", "y", "z"}[i%3], fmt.Sprintf("o%d", i%2+1))
		}
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	cacheOpts := func() cache.Options {
		return cache.Options{DefaultNamespaces: map[string]cache.Config{watched[0]: {}, watched[1]: {}}}
	}
	opts := boltcr.Options{
		Path:     path,
		File:     persist.Options{NoSync: true},
		ByObject: map[client.Object]boltcr.Object{&corev1.ConfigMap{}: {FieldIndexVersions: map[string]string{"owner": "1"}}},
	}
	persistent := func(cfg *rest.Config) func() (cache.Cache, error) {
		return func() (cache.Cache, error) { return boltcr.New(cfg, cacheOpts(), opts) }
	}
	reference := func() (cache.Cache, error) { return cache.New(srv.Config(), cacheOpts()) }

	cfg, reqs := counted()
	cold := startCache(t, persistent(cfg))
	ref := startCache(t, reference)
	if n := reqs.List("configmaps"); n == 0 {
		t.Errorf("cold start sent no LIST of configmaps")
	}
	sameViews(t, "cold start", cold, ref, watched)
	if n := cold.extractorCalls.Load(); n < 12 {
		t.Errorf("cold start called the field index extractor %d times, want once per object (12)", n)
	}
	cold.stop()
	ref.stop()

	// While it is down: one added, one deleted, one relabelled and
	// re-owned, in each watched namespace.
	for _, ns := range watched {
		createConfigMap(t, cs, ns, "added", "x", "o1")
		if err := cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), "cm-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "cm-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Labels["app"], cm.Data["owner"] = "x", "o1"
		if _, err := cs.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cfg, reqs = counted()
	warm := startCache(t, persistent(cfg))
	ref = startCache(t, reference)
	sameViews(t, "warm restart", warm, ref, watched)
	if n := reqs.List("configmaps"); n != 0 {
		t.Errorf("warm restart sent %d LISTs of configmaps, want 0", n)
	}
	// The stored field index is reused, not rebuilt over the stored objects.
	if n := warm.rebuildCalls; n != 0 {
		t.Errorf("warm restart: IndexField ran the extractor %d times; want 0 (the stored index is reused, not rebuilt)", n)
	}
	warm.stop()
	ref.stop()
}

// TestFileHeldByAnotherCache: a second cache on the file a running cache
// of the same process holds is built (New opens nothing), and its first
// use, and every one after, fails at once, not after LockTimeout, saying
// that this process holds the file.
func TestFileHeldByAnotherCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	opts := boltcr.Options{Path: path, File: persist.Options{NoSync: true, LockTimeout: 5 * time.Second}}
	first := startCache(t, func() (cache.Cache, error) { return boltcr.New(srv.Config(), cache.Options{}, opts) })
	defer first.stop()
	start := time.Now()
	second, err := boltcr.New(srv.Config(), cache.Options{}, opts)
	if err != nil {
		t.Fatalf("New of a second cache on %s: %v; want the file opened at its first use", path, err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, persist.ErrLocked) || !errors.Is(err, persist.ErrOpenInProcess) {
			t.Errorf("%s: %v, want an error wrapping persist.ErrLocked and persist.ErrOpenInProcess", what, err)
		} else if !strings.Contains(err.Error(), "another cache (or DB) of this process") {
			t.Errorf("%s: %q does not say that this process holds the file", what, err)
		}
	}
	ctx := context.Background()
	check("IndexField", second.IndexField(ctx, &corev1.ConfigMap{}, "owner", ownerField(&atomic.Int64{})))
	_, err = second.GetInformer(ctx, &corev1.ConfigMap{})
	check("GetInformer", err)
	err = second.Start(ctx)
	check("Start", err)
	if d := time.Since(start); d >= opts.File.LockTimeout {
		t.Errorf("the second cache took %v to fail, its whole LockTimeout", d)
	}
	t.Logf("second cache: %v", err)
}

// TestNewCacheErrorReturnsNilCache: on error the cache.NewCacheFunc
// returns an untyped nil, as cache.New does, so that `c != nil` is false.
func TestNewCacheErrorReturnsNilCache(t *testing.T) {
	c, err := boltcr.NewCache(boltcr.Options{})(srv.Config(), cache.Options{})
	if err == nil {
		t.Fatal("NewCache without Path or DB: no error")
	}
	if c != nil {
		t.Errorf("NewCache returned the cache %#v (a non-nil %T) with its error %q; want nil", c, c, err)
	}
}
