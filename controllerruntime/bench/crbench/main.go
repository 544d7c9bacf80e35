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
// pods are counted on the wire. Results go to --out as crbench-<N>.{json,txt}.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/boltinformer/boltinformer/controllerruntime/bench/internal/manager"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/benchpods"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

func main() {
	f := benchkit.NewFlags(flag.CommandLine, 10000, 3, "crbench")
	workers := flag.Int("workers", 16, "concurrent creates while populating")
	flag.Parse()
	if err := run(f.Pods, f.Reps, *workers, f.Out); err != nil {
		fmt.Fprintln(os.Stderr, "crbench:", err)
		os.Exit(1)
	}
}

// result is one start; durations in seconds.
type result struct {
	Mode               string
	Synced, First, All float64
	Lists              int64
}

func run(pods, reps, workers int, out string) error {
	ctx := context.Background()
	srv, cfg, err := benchkit.LaunchWithPods(ctx, benchkit.FixturePods(pods, workers, benchpods.Namespaces, os.Stdout))
	if err != nil {
		return err
	}
	defer srv.Stop()
	dir, err := os.MkdirTemp("", "crbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var results []result
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
			r.Mode = mode
			fmt.Printf("rep %d %-16s synced %6.3fs  first reconcile %6.3fs  all reconciled %6.3fs  LISTs %d\n", rep, mode, r.Synced, r.First, r.All, r.Lists)
			results = append(results, r)
		}
	}
	rep := &benchkit.Report{}
	rep.Printf("\n%d Pods, %d reps, GOMAXPROCS=%d, NumCPU=%d; medians:\n", pods, reps, runtime.GOMAXPROCS(0), runtime.NumCPU())
	t := rep.Table("mode", "synced s", "first reconcile s", "all reconciled s", "LISTs", "synced × default", "first reconcile × default")
	_, by := benchkit.GroupBy(results, func(r result) string { return r.Mode })
	med := func(mode string, f func(result) float64) float64 { return benchkit.MedianOf(by[mode], f) }
	synced := func(r result) float64 { return r.Synced }
	first := func(r result) float64 { return r.First }
	for _, mode := range modes {
		t.Row(mode, f3(med(mode, synced)), f3(med(mode, first)), f3(med(mode, func(r result) float64 { return r.All })),
			fmt.Sprint(med(mode, func(r result) float64 { return float64(r.Lists) })),
			f2(med(mode, synced)/med("default", synced)), f2(med(mode, first)/med("default", first)))
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		return err
	}
	_, err = benchkit.Save(out, "crbench-"+benchkit.CountLabel(pods), results, rep)
	return err
}

func f2(x float64) string { return fmt.Sprintf("%.2f", x) }
func f3(x float64) string { return fmt.Sprintf("%.3f", x) }

// startManager builds and starts a manager with one controller over Pods,
// measures, and stops it (which, for the persistent cache, flushes and
// closes the file). A LIST, or a watch that starts with the whole list
// (the default cache's watch-list), counts as a list.
func startManager(base *rest.Config, path string, pods int) (result, error) {
	var (
		firstOnce  sync.Once
		first      time.Duration
		reconciled atomic.Int64
		allDone    = make(chan time.Duration, 1)
	)
	begin := time.Now()
	mgr, requests, err := manager.New(base, path, false)
	if err != nil {
		return result{}, err
	}
	c := mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			firstOnce.Do(func() { first = time.Since(begin) })
			var p corev1.Pod
			if err := c.Get(ctx, req.NamespacedName, &p); err != nil && !apierrors.IsNotFound(err) {
				return reconcile.Result{}, err
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
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false)); err != nil {
		return result{}, err
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return result{}, fmt.Errorf("cache did not sync")
	}
	synced := time.Since(begin)
	var all time.Duration
	select {
	case all = <-allDone:
	case <-time.After(10 * time.Minute):
		return result{}, fmt.Errorf("not every Pod reconciled in 10m (%d)", reconciled.Load())
	}
	cancel()
	if err := <-done; err != nil {
		return result{}, err
	}
	return result{Synced: synced.Seconds(), First: first.Seconds(), All: all.Seconds(),
		Lists: requests.Count(benchkit.List) + requests.Count(benchkit.WatchList)}, nil
}
