// Command restartbench times restarts of kube-scheduler and
// kube-controller-manager v1.37.2 on boltinformer (warm on their cache
// files) beside the stock binaries, against a kube-apiserver it starts and
// fills: --nodes Nodes, --pods bound Pods for the scheduler, and Deployments
// of --pods Pods for the controller manager (made by a priming run).
//
// A start is timed from the process's start until the component does its
// work: the scheduler binds a new Pod; the controller manager makes a new
// Deployment's ReplicaSet and Pod. Meanwhile it reads the apiserver's LIST
// requests and encoded bytes (its metrics) and CPU-seconds (/proc), and at
// the end the component's RssAnon. Variants alternate order; the first
// boltinformer start is cold.
//
//	cd components && go run ./bench/restartbench --pods 10000 --nodes 100 --reps 3
//
// --scenario apiserver-restart restarts kube-apiserver under both
// components instead (fleet.go). Both run with --kube-api-qps=1000 so the
// priming run does not take an hour.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"

	"github.com/boltinformer/boltinformer/components/internal/gobuild"
)

func main() {
	f := benchkit.NewFlags(flag.CommandLine, 10000, 3, "restartbench")
	var nodes int
	var logs, scenario string
	var window time.Duration
	flag.IntVar(&nodes, "nodes", 100, "Nodes")
	flag.StringVar(&logs, "logs", "", "directory to keep each start's component log in (default: a temporary directory, removed at the end)")
	flag.StringVar(&scenario, "scenario", "component-restart", "component-restart: restart each component; apiserver-restart: restart kube-apiserver under both components at once (fleet.go)")
	flag.DurationVar(&window, "window", 45*time.Second, "apiserver-restart: read the apiserver's figures this long after the restart (later if a component has not relisted by then)")
	flag.Parse()
	if scenario != "component-restart" && scenario != "apiserver-restart" {
		log.Fatalf("unknown --scenario %q", scenario)
	}
	if err := run(scenario, f.Pods, nodes, f.Reps, logs, window, f.Out); err != nil {
		log.Fatal(err)
	}
}

// deployments is how many Deployments the controller manager's Pods are
// spread over.
const deployments = 100

func run(scenario string, pods, nodes, reps int, logs string, window time.Duration, out string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "restartbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins, err := buildBinaries(dir)
	if err != nil {
		return err
	}

	start := time.Now()
	srv, err := benchkit.Launch(ctx, os.Stderr)
	if err != nil {
		return err
	}
	defer srv.Stop()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	cfg := srv.Config()
	cfg.UserAgent = "restartbench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	stopHeartbeat, err := apiservertest.Heartbeat(ctx, cs, "restartbench")
	if err != nil {
		return err
	}
	defer stopHeartbeat()
	b := &bench{cs: cs, cfg: cfg, srv: srv, dir: dir, logs: dir, kubeconfig: kubeconfig}
	if logs != "" {
		if err := os.MkdirAll(logs, 0o755); err != nil {
			return err
		}
		b.logs = logs
	}
	if err := b.createNodes(ctx, nodes); err != nil {
		return err
	}
	log.Printf("apiserver up and %d Nodes created in %v", nodes, time.Since(start).Round(time.Second))

	var rep *benchkit.Report
	var raw any
	name := fmt.Sprintf("%s-%s", scenario, benchkit.CountLabel(pods))
	if scenario == "apiserver-restart" {
		results, err := b.runFleet(ctx, bins, pods, reps, window)
		if err != nil {
			return err
		}
		rep, raw = reportFleet(results, pods, nodes, reps, window), results
	} else {
		var results []result
		for _, c := range []component{schedulerComponent, controllerManagerComponent} {
			rs, err := b.measure(ctx, bins[c.name], pods, reps)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			results = append(results, rs...)
		}
		rep, raw = report(results, pods, nodes, reps), results
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		return err
	}
	_, err = benchkit.Save(out, name, raw, rep)
	return err
}

// component is one component's two binaries and how to measure it.
type component struct {
	name        string
	bolt, stock string
	// populate fills the cluster with what the component works on.
	populate func(ctx context.Context, b *bench, pods int) error
	// probe does, once the component has started, what it must act on,
	// and returns once it has.
	probe func(ctx context.Context, b *bench, id string) error
	args  func(b *bench) []string
}

// buildBinaries builds the four binaries into dir with the ordinary build
// flags (so the cache of the module's other builds is reused).
func buildBinaries(dir string) (map[string]component, error) {
	const mod = "github.com/boltinformer/boltinformer/components/cmd/"
	out := map[string]component{}
	for _, c := range []component{schedulerComponent, controllerManagerComponent} {
		var err error
		if c.bolt, err = gobuild.Binary(dir, mod+c.name, c.name); err != nil {
			return nil, err
		}
		// Stock binaries keep the upstream name, so both have the same
		// user agent and defaults.
		if err := os.MkdirAll(filepath.Join(dir, "stock"), 0o755); err != nil {
			return nil, err
		}
		if c.stock, err = gobuild.Binary(dir, "k8s.io/kubernetes/cmd/"+c.name, filepath.Join("stock", c.name)); err != nil {
			return nil, err
		}
		out[c.name] = c
	}
	return out, nil
}

// startProcess starts a component with its output in logPath; it dies
// with this process.
func startProcess(bin, logPath string, args []string) (*benchkit.Child, error) {
	return benchkit.StartChild(context.Background(), benchkit.ChildOptions{Path: bin, Args: args, LogPath: logPath,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}})
}

// stopGrace is how long a component has to stop on SIGTERM (a boltinformer
// component closes its file) before it is killed.
const stopGrace = 30 * time.Second

// result is one start of one variant.
type result struct {
	Component, Variant string
	Rep                int
	Ready              float64 // seconds from process start to the probe's work done
	APIServerCPU       float64 // apiserver CPU-seconds meanwhile
	Lists              float64 // LIST requests meanwhile
	ListBytes          float64 // bytes of LIST responses and watch events meanwhile
	PrivateBytes       uint64  // the component's RssAnon at the end
}

func (r result) String() string {
	return fmt.Sprintf("%s %s #%d: ready %.2f s, %.0f LISTs, %.1f MiB listed+watched, apiserver %.2f CPU-s, private %.0f MiB",
		r.Component, r.Variant, r.Rep, r.Ready, r.Lists, r.ListBytes/(1<<20), r.APIServerCPU, float64(r.PrivateBytes)/(1<<20))
}

func report(results []result, pods, nodes, reps int) *benchkit.Report {
	rep := &benchkit.Report{}
	rep.Printf("\n%d Nodes; %d Pods per component (controller manager: over %d Deployments); medians of %d restarts (cold: one start on a new file)\n\n", nodes, pods, deployments, reps)
	t := rep.Table("component", "variant", "ready s", "× stock", "LIST requests", "MiB listed+watched", "apiserver CPU-s", "× stock", "private MiB")
	type key struct{ c, v string }
	order, by := benchkit.GroupBy(results, func(r result) key { return key{r.Component, r.Variant} })
	ready := func(r result) float64 { return r.Ready }
	cpu := func(r result) float64 { return r.APIServerCPU }
	for _, k := range order {
		rs, stock := by[k], by[key{k.c, "stock"}]
		t.Row(k.c, k.v, f2(benchkit.MedianOf(rs, ready)), f2(benchkit.MedianOf(rs, ready)/benchkit.MedianOf(stock, ready))+"×",
			fmt.Sprintf("%.0f", benchkit.MedianOf(rs, func(r result) float64 { return r.Lists })),
			fmt.Sprintf("%.1f", benchkit.MedianOf(rs, func(r result) float64 { return r.ListBytes })/(1<<20)),
			f2(benchkit.MedianOf(rs, cpu)), f2(benchkit.MedianOf(rs, cpu)/benchkit.MedianOf(stock, cpu))+"×",
			fmt.Sprintf("%.0f", benchkit.MedianOf(rs, func(r result) float64 { return float64(r.PrivateBytes) })/(1<<20)))
	}
	rep.Printf("\nready: process start → the scheduler bound a new Pod / the controller manager made a new Deployment's ReplicaSet and Pod.\n" +
		"LIST requests include a warm informer's limit=1 consistent reads (client-go's informers list through watch-list streams, not LISTs);\n" +
		"MiB listed+watched: what the apiserver encoded for LIST responses and watch events meanwhile, to every client.\n\nEach start:\n")
	for _, r := range results {
		rep.Printf("  %s\n", r)
	}
	return rep
}

func f2(x float64) string { return fmt.Sprintf("%.2f", x) }
