// Command crbench measures a controller-runtime manager's start — from
// building the manager to its Pod informer synced, and to the first
// Reconcile call — with controller-runtime's default cache, with the
// persistent cache starting cold (new file), and with the persistent cache
// starting warm (the file the cold run left), over the same Pods on a real
// kube-apiserver, in one run, and prints medians and ratios.
//
//	go run ./bench/crbench --pods 10000 --reps 3
//
// Each start runs in this process, one after another, after a GC; LISTs of
// pods are counted on the wire.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/benchpods"
	"github.com/boltinformer/boltinformer/persist"
)

func main() {
	pods := flag.Int("pods", 10000, "Pods to create and watch")
	reps := flag.Int("reps", 3, "starts per mode")
	workers := flag.Int("workers", 16, "concurrent creates while populating")
	flag.Parse()
	log.SetLogger(logr.Discard()) // controller-runtime logs every start and stop
	if err := run(*pods, *reps, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "crbench:", err)
		os.Exit(1)
	}
}

func run(pods, reps, workers int) error {
	ctx := context.Background()
	srv, cfg, err := benchpods.Start(ctx, pods, workers)
	if err != nil {
		return err
	}
	defer srv.Stop()

	dir, err := os.MkdirTemp("", "crbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	results := map[string][]result{}
	modes := []string{"default", "persistent-cold", "persistent-warm"}
	for rep := range reps {
		path := filepath.Join(dir, fmt.Sprintf("cache-%d.db", rep))
		for _, mode := range modes {
			runtime.GC()
			p := path
			if mode == "default" {
				p = ""
			}
			r, err := startManager(cfg, p, pods)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			fmt.Printf("rep %d %-16s synced %8v  first reconcile %8v  all reconciled %8v  LISTs %d\n", rep, mode,
				r.synced.Round(time.Millisecond), r.first.Round(time.Millisecond), r.all.Round(time.Millisecond), r.lists)
			results[mode] = append(results[mode], r)
		}
	}
	fmt.Printf("\n%d Pods, %d reps, GOMAXPROCS=%d, NumCPU=%d; medians:\n", pods, reps, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Printf("%-16s %10s %16s %15s %6s\n", "mode", "synced", "first reconcile", "all reconciled", "LISTs")
	def := median(results["default"])
	for _, mode := range modes {
		m := median(results[mode])
		fmt.Printf("%-16s %10v %16v %15v %6d   (synced %.2fx, first reconcile %.2fx of default)\n", mode,
			m.synced.Round(time.Millisecond), m.first.Round(time.Millisecond), m.all.Round(time.Millisecond), m.lists,
			float64(m.synced)/float64(def.synced), float64(m.first)/float64(def.first))
	}
	return nil
}

type result struct {
	synced, first, all time.Duration
	lists              int64
}

func median(rs []result) result {
	pick := func(f func(result) time.Duration) time.Duration {
		ds := make([]time.Duration, len(rs))
		for i, r := range rs {
			ds[i] = f(r)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	return result{
		synced: pick(func(r result) time.Duration { return r.synced }),
		first:  pick(func(r result) time.Duration { return r.first }),
		all:    pick(func(r result) time.Duration { return r.all }),
		lists:  rs[len(rs)/2].lists,
	}
}

// startManager builds and starts a manager with one controller over Pods,
// measures, and stops it (which, for the persistent cache, flushes and
// closes the file).
func startManager(base *rest.Config, path string, pods int) (result, error) {
	var lists atomic.Int64
	cfg := rest.CopyConfig(base)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			// A LIST, or a watch that starts with the whole list (client-go's
			// WatchListClient, which the default cache uses).
			q := req.URL.Query()
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") && (q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") {
				lists.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	begin := time.Now()
	opts := ctrl.Options{
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if path != "" {
		opts.NewCache = boltcr.NewCache(boltcr.Options{Path: path, File: persist.Options{NoSync: true}})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return result{}, err
	}
	var (
		firstOnce  sync.Once
		first      time.Duration
		reconciled atomic.Int64
		allDone    = make(chan time.Duration, 1)
	)
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			firstOnce.Do(func() { first = time.Since(begin) })
			var p corev1.Pod
			if err := c.Get(ctx, req.NamespacedName, &p); err != nil {
				return reconcile.Result{}, client404(err)
			}
			if reconciled.Add(1) == int64(pods) {
				allDone <- time.Since(begin)
			}
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false)); err != nil {
		cancel()
		return result{}, err
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return result{}, fmt.Errorf("cache did not sync")
	}
	synced := time.Since(begin)
	var all time.Duration
	select {
	case all = <-allDone:
	case <-time.After(10 * time.Minute):
		cancel()
		return result{}, fmt.Errorf("not every Pod reconciled in 10m (%d)", reconciled.Load())
	}
	cancel()
	if err := <-done; err != nil {
		return result{}, err
	}
	return result{synced: synced, first: first, all: all, lists: lists.Load()}, nil
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
