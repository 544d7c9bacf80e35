// Command checkpointbench measures a controller-runtime manager's restart
// when some Pods changed while it was down: on controller-runtime's default
// cache every Pod is reconciled again; on boltcr's persistent cache with a
// reconciler checkpoint (boltcr.Checkpoint) only the changed ones are.
//
// For each count in --changed and each repetition it labels that many Pods
// while no manager runs, then starts each variant in rotated order. A start
// is idle at the later of its last owed Reconcile and its cache synced;
// reconciles counts every call until then and for --window after.
// checkpoint-at-open (--variants) syncs on the stored state
// (boltcr.Options.SyncedAtOpen). With --expire, kube-apiserver restarts
// after the changes, so every stored resourceVersion is expired and boltcr
// recovers by what changed. Each start also reports the bytes it read, its
// Pod requests by kind and its CPU time.
//
//	go run ./bench/checkpointbench --pods 10000 --changed 0,100,1000 --reps 3
//	go run ./bench/checkpointbench --pods 100000 --changed 0.1%,1%,10% --expire --reps 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	boltcr "github.com/boltinformer/boltinformer/controllerruntime"
	"github.com/boltinformer/boltinformer/controllerruntime/bench/internal/manager"
	"github.com/boltinformer/boltinformer/controllerruntime/internal/benchpods"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/bench/runstats"
)

func main() {
	f := benchkit.NewFlags(flag.CommandLine, 10000, 3, "checkpointbench")
	changed := flag.String("changed", "0,100,1000", "comma-separated counts of Pods changed while the manager is down, or percentages of --pods (1%)")
	expire := flag.Bool("expire", false, "restart kube-apiserver after each round's changes, so every stored resourceVersion is expired (a downtime longer than the watch window)")
	workers := flag.Int("workers", 16, "concurrent creates while populating")
	window := flag.Duration("window", 2*time.Second, "how long to keep counting reconciles after the last one owed")
	only := flag.String("variants", "default,checkpoint", "comma-separated variants to run: default, checkpoint, checkpoint-at-open (boltcr.Options.SyncedAtOpen)")
	flag.Parse()
	var counts []int
	for _, c := range strings.Split(*changed, ",") {
		n, err := benchkit.ParseAmount(strings.TrimSpace(c), f.Pods)
		if err != nil || n > f.Pods {
			fmt.Fprintf(os.Stderr, "checkpointbench: --changed %q: counts between 0 and --pods, or percentages of --pods\n", c)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	variants := strings.Split(*only, ",")
	for _, v := range variants {
		if !slices.Contains(allVariants, v) {
			fmt.Fprintf(os.Stderr, "checkpointbench: --variants %q: one of %s\n", v, strings.Join(allVariants, ", "))
			os.Exit(2)
		}
	}
	if err := run(f.Pods, counts, variants, f.Reps, *workers, *window, *expire, f.Out); err != nil {
		fmt.Fprintln(os.Stderr, "checkpointbench:", err)
		os.Exit(1)
	}
}

// allVariants are the caches a restart can run on: controller-runtime's
// default, boltcr with a checkpoint, and the same synced on the stored state
// (SyncedAtOpen) instead of once caught up with the server.
var allVariants = []string{"default", "checkpoint", "checkpoint-at-open"}

// result is one start; durations in seconds.
type result struct {
	Variant string
	Changed int
	// Idle is the later of Owed, when the last reconcile owed was done,
	// and Synced, when the cache reported synced.
	Idle, Owed, Synced float64
	Reconciles         int64
	// Lists counts lists and watch-lists of whole Pods (a relist after a
	// 410 shows here); Metadata and Fetches a recovery's requests.
	Lists, Metadata, Fetches int64
	// Bytes is what the manager read until idle; CPU the process's CPU
	// seconds until idle.
	Bytes int64
	CPU   float64
}

func run(pods int, counts []int, only []string, reps, workers int, window time.Duration, expire bool, out string) error {
	ctx := context.Background()
	srv, cfg, err := benchkit.LaunchWithPods(ctx, benchkit.FixturePods(pods, workers, benchpods.Namespaces, os.Stdout))
	if err != nil {
		return err
	}
	defer srv.Stop()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "checkpointbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Each checkpoint variant has a file of its own: a restart acknowledges
	// what it reconciles, and the next variant on the same file would owe
	// nothing. Prime: a cold start on a new file reconciles (and
	// acknowledges) every Pod.
	paths := map[string]string{}
	for _, v := range only {
		if v == "default" {
			continue
		}
		paths[v] = filepath.Join(dir, v+".db")
		r, err := start1(cfg, paths[v], false, allPods(pods), window)
		if err != nil {
			return fmt.Errorf("priming %s: %w", v, err)
		}
		fmt.Printf("prime (%s, cold): idle %.3fs, %d reconciles\n", v, r.Idle, r.Reconciles)
	}
	var results []result
	round := 0
	for _, k := range counts {
		for rep := range reps {
			round++
			changed, err := change(ctx, cs, pods, k, round)
			if err != nil {
				return err
			}
			if expire {
				if err := benchkit.RestartAPIServer(ctx, srv, cs); err != nil {
					return err
				}
			}
			for _, v := range benchkit.Rotate(only, rep) {
				owed := changed
				if v == "default" {
					owed = allPods(pods)
				}
				r, err := start1(cfg, paths[v], v == "checkpoint-at-open", owed, window)
				if err != nil {
					return fmt.Errorf("%s, %d changed: %w", v, k, err)
				}
				r.Variant, r.Changed = v, k
				results = append(results, r)
				fmt.Printf("changed %6d rep %d %-10s idle %7.3fs (owed done %7.3fs, synced %7.3fs)  reconciles %7d  Pod lists %d, metadata lists %d, fetches %d  read %.1f MiB  CPU %.2fs\n",
					k, rep, v, r.Idle, r.Owed, r.Synced, r.Reconciles, r.Lists, r.Metadata, r.Fetches, mib(r.Bytes), r.CPU)
				if v != "default" && r.Reconciles != int64(len(changed)) {
					fmt.Printf("  ^ %s reconciled %d Pods, not the %d changed\n", v, r.Reconciles, len(changed))
				}
			}
		}
	}
	rep := report(results, pods, counts, only, reps, window, expire)
	if err := rep.WriteText(os.Stdout); err != nil {
		return err
	}
	name := "checkpoints-" + benchkit.CountLabel(pods)
	if expire {
		name += "-expire"
	}
	_, err = benchkit.Save(out, name, results, rep)
	return err
}

// report is the medians of every variant and count.
func report(results []result, pods int, counts []int, only []string, reps int, window time.Duration, expire bool) *benchkit.Report {
	restarts := "restarts"
	if expire {
		restarts = "restarts, each after an apiserver restart (stored resourceVersions expired)"
	}
	rep := &benchkit.Report{}
	rep.Printf("\n%d Pods, medians of %d %s; idle: ctrl.NewManager → the last reconcile owed, or synced if later; reconciles: all, in that time and %v after; read: bytes from the apiserver until idle; CPU: client CPU until idle\n", pods, reps, restarts, window)
	t := rep.Table("changed", "cache", "idle s", "owed done s", "synced s", "reconciles", "read MiB", "CPU s", "Pod lists", "× default")
	type key struct {
		variant string
		changed int
	}
	_, by := benchkit.GroupBy(results, func(r result) key { return key{r.Variant, r.Changed} })
	for _, k := range counts {
		med := func(v string, f func(result) float64) float64 { return benchkit.MedianOf(by[key{v, k}], f) }
		idle := func(r result) float64 { return r.Idle }
		for _, v := range allVariants {
			if !slices.Contains(only, v) {
				continue
			}
			ratio := "-"
			if slices.Contains(only, "default") {
				ratio = fmt.Sprintf("%.2f×", med(v, idle)/med("default", idle))
			}
			t.Row(fmt.Sprintf("%d (%.3g%%)", k, 100*float64(k)/float64(pods)), v, fmt.Sprintf("%.3f", med(v, idle)),
				fmt.Sprintf("%.3f", med(v, func(r result) float64 { return r.Owed })), fmt.Sprintf("%.3f", med(v, func(r result) float64 { return r.Synced })),
				fmt.Sprint(med(v, func(r result) float64 { return float64(r.Reconciles) })), fmt.Sprintf("%.1f", mib(int64(med(v, func(r result) float64 { return float64(r.Bytes) })))),
				fmt.Sprintf("%.2f", med(v, func(r result) float64 { return r.CPU })), fmt.Sprint(med(v, func(r result) float64 { return float64(r.Lists) })), ratio)
		}
	}
	return rep
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func allPods(n int) map[types.NamespacedName]bool {
	out := make(map[types.NamespacedName]bool, n)
	for i := range n {
		out[types.NamespacedName{Namespace: benchpods.Namespace(i), Name: benchpods.Name(i)}] = true
	}
	return out
}

// change labels k Pods, spread evenly over the namespaces and within each,
// with a value new in this round, and returns them.
func change(ctx context.Context, cs kubernetes.Interface, pods, k, round int) (map[types.NamespacedName]bool, error) {
	out := map[types.NamespacedName]bool{}
	if k == 0 {
		return out, nil
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"checkpointbench-round":"%d"}}}`, round))
	for j := range k {
		i := namespaceMajor(j*pods/k, pods)
		nn := types.NamespacedName{Namespace: benchpods.Namespace(i), Name: benchpods.Name(i)}
		if _, err := cs.CoreV1().Pods(nn.Namespace).Patch(ctx, nn.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("changing %s: %w", nn, err)
		}
		out[nn] = true
	}
	return out, nil
}

// namespaceMajor returns the index of the p-th of pods Pods (benchpods
// numbering) when they are ordered by namespace, then by index: evenly
// spaced positions are then evenly spread over the namespaces and within
// each, as changes in a cluster are, where evenly spaced indexes (Pod i is
// in namespace i mod benchpods.Namespaces) could all fall in one namespace.
func namespaceMajor(p, pods int) int {
	for ns := range benchpods.Namespaces {
		n := (pods - ns + benchpods.Namespaces - 1) / benchpods.Namespaces // Pods in ns
		if p < n {
			return ns + p*benchpods.Namespaces
		}
		p -= n
	}
	panic(fmt.Sprintf("namespaceMajor: position beyond %d Pods", pods))
}

// start1 starts a manager with one Pod controller — on controller-runtime's
// default cache if path is "", else on the persistent cache with a
// checkpoint, synced on the stored state if atOpen — waits until every Pod
// in owed has been reconciled, counts reconciles for window more, and stops
// it.
func start1(base *rest.Config, path string, atOpen bool, owed map[types.NamespacedName]bool, window time.Duration) (result, error) {
	cfg := rest.CopyConfig(base)
	// No client-side rate limit, as ctrl.GetConfig sets up a manager's
	// config (controller-runtime relies on API Priority and Fairness).
	cfg.QPS, cfg.Burst = -1, 0
	runtime.GC() // the previous start's garbage is not this one's CPU
	cpuBegin := runstats.SelfCPU()
	begin := time.Now()
	mgr, counter, err := manager.New(cfg, path, atOpen)
	if err != nil {
		return result{}, err
	}
	var (
		mu         sync.Mutex
		remaining  = len(owed)
		seen       = map[types.NamespacedName]bool{}
		reconciles int64 // guarded by mu
		idle       = make(chan time.Duration, 1)
	)
	if remaining == 0 {
		idle <- 0 // nothing owed: idle once synced (below)
	}
	c := mgr.GetClient()
	var r reconcile.Reconciler = reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		mu.Lock()
		reconciles++
		mu.Unlock()
		var p corev1.Pod
		if err := c.Get(ctx, req.NamespacedName, &p); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		mu.Lock()
		if owed[req.NamespacedName] && !seen[req.NamespacedName] {
			seen[req.NamespacedName] = true
			if remaining--; remaining == 0 {
				idle <- time.Since(begin)
			}
		}
		mu.Unlock()
		return reconcile.Result{}, nil
	})
	b := ctrl.NewControllerManagedBy(mgr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if path != "" {
		cp, err := boltcr.NewCheckpoint(ctx, mgr.GetCache(), "pods", &corev1.Pod{})
		if err != nil {
			return result{}, err
		}
		b = b.For(&corev1.Pod{}, cp.ForOption())
		r = cp.Reconciler(r)
	} else {
		b = b.For(&corev1.Pod{}, builder.WithPredicates())
	}
	if err := b.Complete(r); err != nil {
		return result{}, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	// When the cache reports synced, measured apart from the reconciles.
	synced := make(chan time.Duration, 1)
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			synced <- time.Since(begin)
		}
		close(synced)
	}()
	var owedAt, syncedAt time.Duration
	select {
	case owedAt = <-idle:
	case err := <-done:
		return result{}, fmt.Errorf("manager stopped: %v", err)
	case <-time.After(10 * time.Minute):
		return result{}, fmt.Errorf("%d of %d owed reconciles not done in 10m", remaining, len(owed))
	}
	// Idle also means caught up: the owed reconciles can be done before the
	// cache has synced (a warm informer syncs once caught up with the
	// server; see the cache package), and with nothing owed that is all.
	var ok bool
	if syncedAt, ok = <-synced; !ok {
		return result{}, fmt.Errorf("cache did not sync")
	}
	if owedAt == 0 {
		// Nothing owed: it was done before the cache synced.
		owedAt = syncedAt
	}
	res := result{Idle: max(owedAt, syncedAt).Seconds(), Owed: owedAt.Seconds(), Synced: syncedAt.Seconds(),
		CPU: (runstats.SelfCPU() - cpuBegin).Seconds(), Bytes: counter.TotalBytes()}
	// The observation window: what a restart does beyond what it owes.
	time.Sleep(window)
	mu.Lock()
	res.Reconciles = reconciles
	mu.Unlock()
	res.Lists = counter.Count(benchkit.List) + counter.Count(benchkit.WatchList)
	res.Metadata, res.Fetches = counter.Count(benchkit.MetaList), counter.Count(benchkit.Fetch)
	cancel()
	if err := <-done; err != nil {
		return result{}, err
	}
	return res, nil
}
