// Command checkpointbench measures what a controller-runtime manager does
// after a restart when some of its objects changed while it was down: with
// controller-runtime's default cache (every Pod is reconciled again), and
// with boltinformer's persistent cache and a reconciler checkpoint
// (boltcr.Checkpoint: only the changed Pods are). It starts a kube-apiserver
// on loopback, creates --pods Pods, and for each count in --changed and each
// repetition changes that many Pods (a label) while no manager runs, then
// starts each variant in turn (order alternating between repetitions). It
// reports idle, from ctrl.NewManager to the last Reconcile the restart owes
// (every Pod for the default cache, the changed ones for the checkpoint) or
// to the cache synced, whichever is later (both are reported: a warm cache
// syncs once caught up with the server, which waits for a watch bookmark when
// other resources were written after the last Pod change), and reconciles,
// every Reconcile call in that time and in the observation window (--window)
// after it, when nothing more is owed. The variant checkpoint-at-open
// (--variants) runs the checkpoint with boltcr.Options.SyncedAtOpen: the
// cache reports synced on the stored state rather than once caught up with
// the server, and what changed while the manager was down arrives as
// updates.
//
//	go run ./bench/checkpointbench --pods 10000 --changed 0,100,1000 --reps 3
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
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
	changed := flag.String("changed", "0,100,1000", "comma-separated counts of Pods changed while the manager is down")
	reps := flag.Int("reps", 3, "repetitions of each count")
	workers := flag.Int("workers", 16, "concurrent creates while populating")
	window := flag.Duration("window", 2*time.Second, "how long to keep counting reconciles after the last one owed")
	profile := flag.String("cpuprofile", "", "directory to write a CPU profile of each checkpoint start to")
	traceDir := flag.String("trace", "", "directory to write an execution trace (runtime/trace) of each checkpoint start to")
	only := flag.String("variants", "default,checkpoint", "comma-separated variants to run: default, checkpoint, checkpoint-at-open (boltcr.Options.SyncedAtOpen)")
	flag.Parse()
	log.SetLogger(logr.Discard())
	var counts []int
	for _, c := range strings.Split(*changed, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 0 || n > *pods {
			fmt.Fprintf(os.Stderr, "checkpointbench: --changed %q: counts between 0 and --pods\n", c)
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
	if err := run(*pods, counts, variants, *reps, *workers, *window, *profile, *traceDir); err != nil {
		fmt.Fprintln(os.Stderr, "checkpointbench:", err)
		os.Exit(1)
	}
}

// allVariants are the caches a restart can run on: controller-runtime's
// default, boltcr with a checkpoint, and the same synced on the stored state
// (SyncedAtOpen) instead of once caught up with the server.
var allVariants = []string{"default", "checkpoint", "checkpoint-at-open"}

type result struct {
	idle time.Duration
	// owed is when the last reconcile owed was done, synced when the
	// cache reported synced; idle is the later of the two.
	owed, synced time.Duration
	reconciles   int64
	// lists counts the LISTs of Pods the start made (a relist after a 410
	// shows here), or watch-list streams for the default cache.
	lists int64
}

func run(pods int, counts []int, only []string, reps, workers int, window time.Duration, profile, traceDir string) error {
	ctx := context.Background()
	srv, cfg, err := benchpods.Start(ctx, pods, workers)
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
		fmt.Printf("prime (%s, cold): idle %v, %d reconciles\n", v, r.idle.Round(time.Millisecond), r.reconciles)
	}

	results := map[string][]result{}
	round := 0
	for _, k := range counts {
		for rep := range reps {
			round++
			changed, err := change(ctx, cs, pods, k, round)
			if err != nil {
				return err
			}
			variants := slices.Clone(only)
			if rep%2 == 1 {
				slices.Reverse(variants)
			}
			for _, v := range variants {
				var r result
				if v == "default" {
					r, err = start1(cfg, "", false, allPods(pods), window)
				} else {
					stop, perr := startProfile(profile, traceDir, fmt.Sprintf("%s-%d-%d", v, k, rep))
					if perr != nil {
						return perr
					}
					r, err = start1(cfg, paths[v], v == "checkpoint-at-open", changed, window)
					stop()
				}
				if err != nil {
					return fmt.Errorf("%s, %d changed: %w", v, k, err)
				}
				key := fmt.Sprintf("%s/%d", v, k)
				results[key] = append(results[key], r)
				fmt.Printf("changed %6d rep %d %-10s idle %9v (owed done %9v, synced %9v)  reconciles %7d  LISTs %d\n", k, rep, v,
					r.idle.Round(time.Millisecond), r.owed.Round(time.Millisecond), r.synced.Round(time.Millisecond), r.reconciles, r.lists)
			}
		}
	}
	fmt.Printf("\n%d Pods, medians of %d restarts; idle: ctrl.NewManager → the last reconcile owed, or synced if later; reconciles: all, in that time and %v after\n", pods, reps, window)
	fmt.Printf("%-9s %-11s %10s %10s %10s %11s %10s\n", "changed", "cache", "idle", "owed done", "synced", "reconciles", "× default")
	for _, k := range counts {
		for _, v := range allVariants {
			if !slices.Contains(only, v) {
				continue
			}
			m := median(results[fmt.Sprintf("%s/%d", v, k)])
			ratio := "-"
			if slices.Contains(only, "default") {
				ratio = fmt.Sprintf("%.2f×", float64(m.idle)/float64(median(results[fmt.Sprintf("default/%d", k)]).idle))
			}
			fmt.Printf("%-9d %-11s %10v %10v %10v %11d %10s\n", k, v, m.idle.Round(time.Millisecond), m.owed.Round(time.Millisecond),
				m.synced.Round(time.Millisecond), m.reconciles, ratio)
		}
	}
	return nil
}

// startProfile starts a CPU profile written to profileDir/name.pprof and an
// execution trace written to traceDir/name.trace (each only if its
// directory is given) and returns what stops them.
func startProfile(profileDir, traceDir, name string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if profileDir != "" {
		f, err := os.Create(filepath.Join(profileDir, name+".pprof"))
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if traceDir != "" {
		f, err := os.Create(filepath.Join(traceDir, name+".trace"))
		if err != nil {
			stop()
			return nil, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return nil, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}

// median returns each measure's median over rs (taken separately).
func median(rs []result) result {
	var idle, owed, synced []time.Duration
	var rec []int64
	for _, r := range rs {
		idle, owed, synced, rec = append(idle, r.idle), append(owed, r.owed), append(synced, r.synced), append(rec, r.reconciles)
	}
	return result{idle: mid(idle), owed: mid(owed), synced: mid(synced), reconciles: mid(rec)}
}

func mid[T int64 | time.Duration](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func allPods(n int) map[types.NamespacedName]bool {
	out := make(map[types.NamespacedName]bool, n)
	for i := range n {
		out[types.NamespacedName{Namespace: benchpods.Namespace(i), Name: benchpods.Name(i)}] = true
	}
	return out
}

// change labels k Pods, spread evenly, with a value new in this round, and
// returns them.
func change(ctx context.Context, cs kubernetes.Interface, pods, k, round int) (map[types.NamespacedName]bool, error) {
	out := map[types.NamespacedName]bool{}
	if k == 0 {
		return out, nil
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"checkpointbench-round":"%d"}}}`, round))
	for j := range k {
		i := j * pods / k
		nn := types.NamespacedName{Namespace: benchpods.Namespace(i), Name: benchpods.Name(i)}
		if _, err := cs.CoreV1().Pods(nn.Namespace).Patch(ctx, nn.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("changing %s: %w", nn, err)
		}
		out[nn] = true
	}
	return out, nil
}

// start1 starts a manager with one Pod controller — on controller-runtime's
// default cache if path is "", else on the persistent cache with a
// checkpoint, synced on the stored state if atOpen — waits until every Pod
// in owed has been reconciled, counts reconciles for window more, and stops
// it.
func start1(base *rest.Config, path string, atOpen bool, owed map[types.NamespacedName]bool, window time.Duration) (result, error) {
	cfg := rest.CopyConfig(base)
	var lists atomic.Int64
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			// A LIST (limit=1 consistent reads of a catching-up informer
			// excluded), or a watch that starts with the whole list.
			q := req.URL.Query()
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") &&
				((q.Get("watch") == "" && q.Get("limit") != "1") || q.Get("sendInitialEvents") == "true") {
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
		opts.NewCache = boltcr.NewCache(boltcr.Options{Path: path, File: persist.Options{NoSync: true}, SyncedAtOpen: atOpen})
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return result{}, err
	}
	var (
		mu         sync.Mutex
		remaining  = len(owed)
		seen       = map[types.NamespacedName]bool{}
		reconciles atomic.Int64
		idle       = make(chan time.Duration, 1)
	)
	if remaining == 0 {
		idle <- 0 // nothing owed: idle once synced (below)
	}
	c := mgr.GetClient()
	var r reconcile.Reconciler = reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		reconciles.Add(1)
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
	var res result
	select {
	case res.owed = <-idle:
	case err := <-done:
		return result{}, fmt.Errorf("manager stopped: %v", err)
	case <-time.After(10 * time.Minute):
		return result{}, fmt.Errorf("%d of %d owed reconciles not done in 10m", remaining, len(owed))
	}
	// Idle also means caught up: the owed reconciles can be done before the
	// cache has synced (a warm informer syncs once caught up with the
	// server; see the cache package), and with nothing owed that is all.
	var ok bool
	if res.synced, ok = <-synced; !ok {
		return result{}, fmt.Errorf("cache did not sync")
	}
	if res.owed == 0 {
		// Nothing owed: it was done before the cache synced.
		res.owed = res.synced
	}
	res.idle = max(res.owed, res.synced)
	// The observation window: what a restart does beyond what it owes.
	time.Sleep(window)
	res.reconciles = reconciles.Load()
	res.lists = lists.Load()
	cancel()
	if err := <-done; err != nil {
		return result{}, err
	}
	return res, nil
}
