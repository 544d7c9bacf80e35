package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
)

// runBench is the default command: for each size, populate, measure every
// variant, save and print the results; then redraw the plot.
func runBench(ctx context.Context, args []string, out io.Writer) error {
	opts := &benchOptions{}
	fs := flag.NewFlagSet("informerbench", flag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := opts.validate(); err != nil {
		return err
	}
	sess, err := openSession(ctx, &opts.logDir, []string{opts.out}, out)
	if err != nil {
		return err
	}
	defer sess.close()
	work, cl, cs, mach := sess.work, sess.cl, sess.cs, sess.mach

	for _, n := range opts.sizes {
		podBytes, stopHeartbeat, err := readyPods(ctx, cl, cs, opts.shape, n, opts.workers, out)
		if err != nil {
			return err
		}
		idleAS, idleEtcd := idleCPU(ctx, cl, 5*time.Second)
		fmt.Fprintf(out, "measuring %d %s Pods (%.1f KB of protobuf each), %d repetitions; idle kube-apiserver %.3f CPU-s/s, etcd %.3f…\n",
			n, opts.shape, podBytes/1000, opts.reps, idleAS, idleEtcd)
		r := &sizeRun{cl: cl, cs: cs, opts: opts, n: n, file: filepath.Join(work, "cache.db"), log: out, runs: map[string][]*childResult{}}
		err = r.measure(ctx)
		renewed, failed := stopHeartbeat()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  cluster heartbeat: %d Lease renewals (%d failed) while measuring\n", renewed, failed)
		res := &sizeResult{
			runHeader: runHeader{Pods: n, Reps: opts.reps, Date: time.Now().UTC().Format(time.RFC3339), Machine: mach,
				PodSize: string(opts.shape), PodProtoBytes: podBytes, LoadAvg: r.load, IdleAPIServerCPU: idleAS, IdleEtcdCPU: idleEtcd},
			BoltContentType: protobufContentType, Churn: opts.churnFor(n), Runs: r.runs, Medians: map[string]map[string]float64{},
			Heartbeat: &heartbeatStats{IntervalSeconds: apiservertest.HeartbeatInterval.Seconds(), Lease: apiservertest.HeartbeatNamespace + "/" + heartbeatLease, Renewed: renewed, Failed: failed},
		}
		for v, runs := range r.runs {
			res.Medians[v] = medians(runs)
		}
		res.Ratios = res.computeRatios()
		res.Targets = evaluateTargets(res.Medians, res.Churn)
		rep := sizeReport(res)
		if err := rep.WriteText(out); err != nil {
			return err
		}
		paths, err := benchkit.Save(opts.out, res.name(), res, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "results: %s\n", strings.Join(paths, ", "))
	}
	if opts.plot == "" {
		return nil
	}
	// The sync-time plot covers every size saved in --out.
	all, err := loadResults(opts.out)
	if err != nil {
		return err
	}
	plot := syncTimePlot(all)
	plot.Name = opts.plot
	paths, err := benchkit.Save(opts.out, opts.plot, nil, &benchkit.Report{Plots: []benchkit.Plot{plot}})
	fmt.Fprintf(out, "plot: %s\n", strings.Join(paths, ", "))
	return err
}
