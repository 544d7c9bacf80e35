package controllerruntime_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/persist"
)

// TestRemoveInformerThenReAdd: an informer removed from a started cache
// releases its collection, so the same type can be added again at once;
// the new informer resumes what the removed one stored, without a LIST,
// and sees what changed meanwhile. Pods are added after the cache started.
func TestRemoveInformerThenReAdd(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	for i := range 3 {
		createConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), "x", "o1")
	}
	cfg, reqs := counted()
	opts := boltcr.Options{Path: filepath.Join(t.TempDir(), "cache.db"), File: persist.Options{NoSync: true}}
	c := startCache(t, func() (cache.Cache, error) {
		return boltcr.New(cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}, opts)
	})
	defer c.stop()
	ref := startCache(t, func() (cache.Cache, error) {
		return cache.New(srv.Config(), cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}})
	})
	defer ref.stop()
	ctx := context.Background()

	// A type first asked for after the start.
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		t.Fatalf("List of Pods, first asked for after the start: %v", err)
	}

	lists := reqs.List("configmaps")
	for round := range 2 {
		for _, c := range []cache.Cache{c, ref} {
			if err := c.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
				t.Fatalf("round %d: RemoveInformer: %v", round, err)
			}
		}
		name := fmt.Sprintf("while-removed-%d", round)
		createConfigMap(t, cs, ns, name, "x", "o1")
		if _, err := ref.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
		informer, err := c.GetInformer(ctx, &corev1.ConfigMap{})
		if err != nil {
			t.Fatalf("round %d: GetInformer after RemoveInformer: %v", round, err)
		}
		if !informer.HasSynced() {
			t.Errorf("round %d: the re-added informer has not synced on return of GetInformer", round)
		}
		waitFor(t, func() bool {
			var cm corev1.ConfigMap
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm) == nil
		}, "the re-added informer to see %s/%s, created while it was removed", ns, name)
	}
	// The field index was added before the first informer ran; the re-added
	// informers have none (controller-runtime forgets it with the informer).
	sameViews(t, "after RemoveInformer and re-adding", c, ref, []string{ns})
	if n := reqs.List("configmaps") - lists; n != 0 {
		t.Errorf("re-adding the removed informer sent %d LISTs, want 0 (it resumes its collection)", n)
	}
}

// TestSecretsStayInMemory: Secrets, typed or metadata-only, are not written
// to the file (every start lists them) unless PersistSecrets is set.
func TestSecretsStayInMemory(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	if _, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"password": "hunter2"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	for _, persistSecrets := range []bool{false, true} {
		t.Run(fmt.Sprintf("PersistSecrets=%v", persistSecrets), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			start := func(cfg *rest.Config) running {
				return startCache(t, func() (cache.Cache, error) {
					return boltcr.New(cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
						boltcr.Options{Path: path, File: persist.Options{NoSync: true}, PersistSecrets: persistSecrets})
				})
			}
			for restart := range 2 {
				cfg, reqs := counted()
				c := start(cfg)
				var s corev1.Secret
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "s"}, &s); err != nil || string(s.Data["password"]) != "hunter2" {
					t.Errorf("Get secret: %v %q", err, s.Data["password"])
				}
				if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "s"}, secretMeta); err != nil {
					t.Errorf("Get secret metadata: %v", err)
				}
				c.stop()
				lists := reqs.List("secrets")
				switch {
				case restart == 0 && lists != 2:
					t.Errorf("cold start: %d LISTs of secrets, want 2 (typed and metadata)", lists)
				case restart == 1 && persistSecrets && lists != 0:
					t.Errorf("restart with PersistSecrets: %d LISTs of secrets, want 0", lists)
				case restart == 1 && !persistSecrets && lists != 2:
					t.Errorf("restart without PersistSecrets: %d LISTs of secrets, want 2 (kept in memory only)", lists)
				}
			}
		})
	}
}

// TestFieldIndexVersionChange: a changed declared version rebuilds the
// field index once from the stored objects (without a LIST) when IndexField
// adds it, and the rebuilt index is reused by the start after.
func TestFieldIndexVersionChange(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	for i := range 5 {
		createConfigMap(t, cs, ns, fmt.Sprintf("cm-%d", i), "x", fmt.Sprintf("o%d", i%2))
	}
	path := filepath.Join(t.TempDir(), "cache.db")
	for i, tc := range []struct {
		version      string
		wantCalls    func(int64) bool
		wantCallsSay string
	}{
		{"1", func(n int64) bool { return n == 0 }, "none (cold: nothing stored to build from)"},
		{"1", func(n int64) bool { return n == 0 }, "none (index reused)"},
		{"2", func(n int64) bool { return n == 5 }, "one per stored object (rebuilt for the new version)"},
		{"2", func(n int64) bool { return n == 0 }, "none (rebuilt index reused)"},
	} {
		cfg, reqs := counted()
		c := startCache(t, func() (cache.Cache, error) {
			return boltcr.New(cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}, boltcr.Options{
				Path: path, File: persist.Options{NoSync: true},
				ByObject: map[client.Object]boltcr.Object{&corev1.ConfigMap{}: {FieldIndexVersions: map[string]string{"owner": tc.version}}},
			})
		})
		var list corev1.ConfigMapList
		if err := c.List(context.Background(), &list, client.MatchingFields{"owner": "o1"}); err != nil || len(list.Items) != 2 {
			t.Errorf("start %d: MatchingFields owner=o1: %d items, %v; want 2", i, len(list.Items), err)
		}
		if n := c.rebuildCalls; !tc.wantCalls(n) {
			t.Errorf("start %d (version %s): IndexField ran the extractor %d times, want %s", i, tc.version, n, tc.wantCallsSay)
		}
		if n := reqs.List("configmaps"); i > 0 && n != 0 {
			t.Errorf("start %d: %d LISTs of configmaps, want 0", i, n)
		}
		c.stop()
	}
}

// waitFor polls cond until it holds, failing the test after 30s.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for "+format, args...)
	}
}

// TestRemoveInformerBeforeStart: an informer removed before the cache
// started never runs; its collection is released at once, so the informer
// added again in its place resumes it when the cache starts.
func TestRemoveInformerBeforeStart(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	createConfigMap(t, cs, ns, "cm", "x", "o1")
	path := filepath.Join(t.TempDir(), "cache.db")
	build := func(cfg *rest.Config) (*boltcr.Cache, error) {
		return boltcr.New(cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
			boltcr.Options{Path: path, File: persist.Options{NoSync: true}})
	}
	startCache(t, func() (cache.Cache, error) { return build(srv.Config()) }).stop() // fills the file

	cfg, reqs := counted()
	c := startCache(t, func() (cache.Cache, error) {
		c, err := build(cfg)
		if err != nil {
			return nil, err
		}
		ctx := context.Background()
		if _, err := c.GetInformer(ctx, &corev1.ConfigMap{}); err != nil {
			return nil, err
		}
		if err := c.RemoveInformer(ctx, &corev1.ConfigMap{}); err != nil {
			return nil, err
		}
		return c, nil
	})
	defer c.stop()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cm"}, &cm); err != nil {
		t.Fatal(err)
	}
	if n := reqs.List("configmaps"); n != 0 {
		t.Errorf("%d LISTs of configmaps, want 0: the informer added after the removal should resume the file", n)
	}
}

// TestSecondStartIsRejected: a second Start of a running cache fails at
// once, as controller-runtime's default cache's does (with the same
// words), and leaves the running cache alone: it keeps its file open and
// sees what changes after.
func TestSecondStartIsRejected(t *testing.T) {
	cs := clientset(t)
	ns := namespaces(t, cs, 1)[0]
	createConfigMap(t, cs, ns, "cm-2", "y", "o2")
	cacheOpts := func() cache.Options { return cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}} }
	opts := boltcr.Options{Path: filepath.Join(t.TempDir(), "cache.db"), File: persist.Options{NoSync: true}}
	c := startCache(t, func() (cache.Cache, error) { return boltcr.New(srv.Config(), cacheOpts(), opts) })
	defer c.stop()
	ref := startCache(t, func() (cache.Cache, error) { return cache.New(srv.Config(), cacheOpts()) })
	defer ref.stop()

	for name, c := range map[string]cache.Cache{"persistent": c, "default": ref} {
		// A Start that ran the cache would return nil when ctx ends.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.Start(ctx)
		cancel()
		// controller-runtime's own suite checks for these words.
		if err == nil || !strings.Contains(err.Error(), "informer already started") {
			t.Errorf("%s cache: a second Start returned %v, want an error saying \"informer already started\"", name, err)
		}
	}
	createConfigMap(t, cs, ns, "cm-1", "x", "o1")
	sameViews(t, "after a rejected second Start", c, ref, []string{ns})
}

// TestNeverStartedHoldsNothing builds a cache, a cluster or a manager with
// a controller on NewCache, and never starts it. manager.New may also fail
// after it built the cache, as when it cannot create its client. None of
// them may hold the cache file or a goroutine. controller-runtime's own
// cache.New holds nothing before Start either. Its pkg/controller suite
// checks that ("should not create goroutines if never started"). Another
// cache on the same file then opens it.
func TestNeverStartedHoldsNothing(t *testing.T) {
	errNoClient := errors.New("no client for you")
	for _, tc := range []struct {
		name    string
		build   func(cfg *rest.Config, newCache cache.NewCacheFunc) error
		wantErr error
	}{
		{name: "cache", build: func(cfg *rest.Config, newCache cache.NewCacheFunc) error {
			_, err := newCache(cfg, cache.Options{})
			return err
		}},
		{name: "cluster", build: func(cfg *rest.Config, newCache cache.NewCacheFunc) error {
			_, err := cluster.New(cfg, func(o *cluster.Options) { o.NewCache = newCache })
			return err
		}},
		{name: "manager with a controller", build: func(cfg *rest.Config, newCache cache.NewCacheFunc) error {
			m, err := manager.New(cfg, manager.Options{NewCache: newCache, Metrics: metricsserver.Options{BindAddress: "0"}})
			if err != nil {
				return err
			}
			_, err = controller.New("never-started", m, controller.Options{
				Reconciler:         reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
				SkipNameValidation: ptr.To(true),
			})
			return err
		}},
		{name: "manager.New failing after building the cache", wantErr: errNoClient, build: func(cfg *rest.Config, newCache cache.NewCacheFunc) error {
			_, err := manager.New(cfg, manager.Options{
				NewCache:  newCache,
				NewClient: func(*rest.Config, client.Options) (client.Client, error) { return nil, errNoClient },
				Metrics:   metricsserver.Options{BindAddress: "0"},
			})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cache.db")
			opts := boltcr.Options{Path: path, File: persist.Options{NoSync: true, LockTimeout: 100 * time.Millisecond}}
			cfg := srv.Config()
			var transport http.RoundTripper
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				transport = rt
				return rt
			})
			before := goleak.IgnoreCurrent()
			if err := tc.build(cfg, boltcr.NewCache(opts)); !errors.Is(err, tc.wantErr) {
				t.Fatalf("building: %v, want %v", err, tc.wantErr)
			}
			// Idle keep-alive connections to the apiserver are not the
			// cache's; closed as controller-runtime's spec closes them.
			if transport != nil {
				utilnet.CloseIdleConnectionsFor(transport)
			}
			if err := goleak.Find(before,
				goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
				goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
				goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
				goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
				goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
			); err != nil {
				t.Errorf("built and never started, it left goroutines running: %v", err)
			}
			if db, err := persist.Open(path, opts.File); err != nil {
				t.Errorf("built and never started, it holds the cache file: %v", err)
			} else if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			startCache(t, func() (cache.Cache, error) { return boltcr.New(srv.Config(), cache.Options{}, opts) }).stop()
		})
	}
}

// TestInformersBeforeStartHoldTheFile: a cache that built an informer
// before Start (IndexField, as a controller's setup does) holds the file
// from then on; a Start, even with a cancelled context, releases it.
func TestInformersBeforeStartHoldTheFile(t *testing.T) {
	opts := boltcr.Options{Path: filepath.Join(t.TempDir(), "cache.db"), File: persist.Options{NoSync: true}}
	ctx := context.Background()
	build := func() *boltcr.Cache {
		c, err := boltcr.New(srv.Config(), cache.Options{}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := build()
	if first.DB() != nil {
		t.Errorf("New opened the file")
	}
	if err := first.IndexField(ctx, &corev1.ConfigMap{}, "owner", ownerField(&atomic.Int64{})); err != nil {
		t.Fatal(err)
	}
	if first.DB() == nil {
		t.Errorf("IndexField did not open the file")
	}
	if err := build().IndexField(ctx, &corev1.ConfigMap{}, "owner", ownerField(&atomic.Int64{})); !errors.Is(err, persist.ErrOpenInProcess) {
		t.Errorf("IndexField of a second cache while the first holds the file: %v, want persist.ErrOpenInProcess", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := first.Start(cancelled); err != nil {
		t.Fatalf("Start with a cancelled context: %v", err)
	}
	startCache(t, func() (cache.Cache, error) { return build(), nil }).stop()
}
