// Command restartbench times restarts of kube-scheduler and
// kube-controller-manager v1.37.2 on boltinformer (this module's binaries,
// warm on their cache files) beside the stock binaries built from the same
// Kubernetes module, against a kube-apiserver and etcd it starts on
// loopback (internal/apiservertest) and fills itself:
//
//   - --nodes Nodes (API objects, no kubelets);
//   - for the scheduler, --pods Pods already bound to them;
//   - for the controller manager, Deployments of --pods Pods in all (their
//     ReplicaSets and Pods made by a first, priming controller manager run;
//     the Pods name a scheduler that does not exist, so they stay pending).
//
// Each start is measured from the process's start until the component does
// the work it exists for: the scheduler binds a new pending Pod; the
// controller manager makes the ReplicaSet and Pod of a new Deployment. Over
// that time it also reads, from the apiserver's metrics, the LIST requests
// and the bytes encoded for LIST responses and watch events (client-go's
// informers list through watch-list streams), the apiserver's CPU-seconds
// (/proc), and the
// component's private memory (RssAnon) at the end. The variants alternate
// order between repetitions; every start but the first boltinformer one
// (cold, on a new file) is a restart.
//
//	cd components && go run ./bench/restartbench --pods 10000 --nodes 100 --reps 3
//
// With --scenario apiserver-restart it instead restarts kube-apiserver
// (etcd kept) under both components running together, stock or both on
// boltinformer, and measures their recovery and the apiserver's cost
// (fleet.go).
//
// Both components run with --kube-api-qps=1000 --kube-api-burst=2000 (the
// same for stock and boltinformer), so the priming run does not take an hour
// at the controller manager's default of 20 requests a second.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/boltinformer/boltinformer/internal/apiservertest"
	"github.com/boltinformer/boltinformer/internal/runstats"

	"github.com/boltinformer/boltinformer/components/internal/gobuild"
)

func main() {
	pods := flag.Int("pods", 10000, "Pods per component: bound Pods for the scheduler, Deployment replicas in all for the controller manager")
	nodes := flag.Int("nodes", 100, "Nodes")
	deployments := flag.Int("deployments", 100, "Deployments the controller manager's Pods are spread over")
	reps := flag.Int("reps", 3, "restarts of each variant")
	which := flag.String("components", "kube-scheduler,kube-controller-manager", "components to measure")
	logs := flag.String("logs", "", "directory to keep each start's component log in (default: a temporary directory, removed at the end)")
	scenario := flag.String("scenario", "component-restart", "component-restart: restart each component; apiserver-restart: restart kube-apiserver under both components at once (fleet.go)")
	window := flag.Duration("window", 45*time.Second, "apiserver-restart: read the apiserver's figures this long after the restart (later if a component has not relisted by then)")
	baseline := flag.Bool("baseline", true, "apiserver-restart: also restart the apiserver with no component running")
	flag.Parse()
	if *scenario != "component-restart" && *scenario != "apiserver-restart" {
		log.Fatalf("unknown --scenario %q", *scenario)
	}
	if err := run(*scenario, *pods, *nodes, *deployments, *reps, strings.Split(*which, ","), *logs, *window, *baseline); err != nil {
		log.Fatal(err)
	}
}

func run(scenario string, pods, nodes, deployments, reps int, which []string, logs string, window time.Duration, baseline bool) error {
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
	srv, err := apiservertest.Launch(ctx, apiservertest.Options{EtcdQuotaBackendBytes: 8 << 30})
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
	b := &bench{cs: cs, srv: srv, dir: dir, logs: dir, kubeconfig: kubeconfig}
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

	if scenario == "apiserver-restart" {
		results, err := b.runFleet(ctx, bins, pods, deployments, reps, window, baseline)
		if err != nil {
			return err
		}
		reportFleet(os.Stdout, results, pods, nodes, deployments, reps, window)
		return nil
	}

	var results []result
	for _, name := range which {
		c, ok := bins[name]
		if !ok {
			return fmt.Errorf("unknown component %q", name)
		}
		rs, err := b.measure(ctx, c, pods, deployments, reps)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results = append(results, rs...)
	}
	report(os.Stdout, results, pods, nodes, deployments, reps)
	return nil
}

// component is one component's two binaries and how to measure it.
type component struct {
	name        string
	bolt, stock string
	// populate fills the cluster with what the component works on.
	populate func(ctx context.Context, b *bench, pods, deployments int) error
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

// process is a running component.
type process struct {
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
}

func startProcess(bin, logPath string, args []string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop asks the process to stop (SIGTERM: a boltinformer component closes
// its file) and waits; SIGKILL after 30 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// result is one start of one variant.
type result struct {
	component, variant string
	rep                int
	ready              time.Duration // process start → the probe's work done
	apiserverCPU       float64       // apiserver CPU-seconds meanwhile
	lists              float64       // LIST requests meanwhile
	listBytes          float64       // bytes of LIST responses meanwhile
	privateBytes       uint64        // the component's RssAnon at the end
}

func report(w *os.File, results []result, pods, nodes, deployments, reps int) {
	fmt.Fprintf(w, "\n%d Nodes; %d Pods per component (controller manager: over %d Deployments); medians of %d restarts (cold: one start on a new file)\n\n", nodes, pods, deployments, reps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "component\tvariant\tready s\t× stock\tLIST requests\tMiB listed+watched\tapiserver CPU-s\t× stock\tprivate MiB\t")
	type key struct{ c, v string }
	by := map[key][]result{}
	var order []key
	for _, r := range results {
		k := key{r.component, r.variant}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	med := func(rs []result, f func(result) float64) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		return runstats.Median(xs)
	}
	for _, k := range order {
		rs := by[k]
		stock := by[key{k.c, "stock"}]
		ready := med(rs, func(r result) float64 { return r.ready.Seconds() })
		cpu := med(rs, func(r result) float64 { return r.apiserverCPU })
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f×\t%.0f\t%.1f\t%.2f\t%.2f×\t%.0f\t\n", k.c, k.v,
			ready, ready/med(stock, func(r result) float64 { return r.ready.Seconds() }),
			med(rs, func(r result) float64 { return r.lists }),
			med(rs, func(r result) float64 { return r.listBytes })/(1<<20),
			cpu, cpu/med(stock, func(r result) float64 { return r.apiserverCPU }),
			med(rs, func(r result) float64 { return float64(r.privateBytes) })/(1<<20))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nready: process start → the scheduler bound a new Pod / the controller manager made a new Deployment's ReplicaSet and Pod.")
	fmt.Fprintln(w, "LIST requests include a warm informer's limit=1 consistent reads (client-go's informers list through watch-list streams, not LISTs);")
	fmt.Fprintln(w, "MiB listed+watched: what the apiserver encoded for LIST responses and watch events meanwhile, to every client.")
	fmt.Fprintln(w, "\nEach start:")
	for _, r := range results {
		fmt.Fprintf(w, "  %s %s #%d: ready %.2f s, %.0f LISTs, %.1f MiB listed+watched, apiserver %.2f CPU-s, private %.0f MiB\n",
			r.component, r.variant, r.rep, r.ready.Seconds(), r.lists, r.listBytes/(1<<20), r.apiserverCPU, float64(r.privateBytes)/(1<<20))
	}
}
