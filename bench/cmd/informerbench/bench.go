package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
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
	work, err := mkWorkDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if opts.logDir == "" {
		opts.logDir = filepath.Join(work, "logs")
	}
	for _, dir := range []string{opts.out, opts.logDir, opts.profileDir} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	cl, err := connect(ctx, opts.kubeconfig, work, out)
	if err != nil {
		return err
	}
	defer cl.close()
	cs, err := cl.clientset()
	if err != nil {
		return err
	}
	mach := describeMachine(cs)

	for _, n := range opts.sizes {
		if err := populate(ctx, cl, n, opts.workers, out); err != nil {
			return err
		}
		fmt.Fprintf(out, "measuring %d Pods, %d repetitions…\n", n, opts.reps)
		r := &sizeRun{cl: cl, cs: cs, opts: opts, n: n, file: filepath.Join(work, "cache.db"), log: out, runs: map[string][]*childResult{}}
		if err := r.measure(ctx); err != nil {
			return err
		}
		res := &sizeResult{
			Pods: n, Reps: opts.reps, Date: time.Now().UTC().Format(time.RFC3339), Machine: mach,
			BoltContentType: opts.contentType, Churn: opts.churnFor(n), Updates: opts.updates,
			Runs: r.runs, Medians: map[string]map[string]float64{}, Notes: r.notes,
		}
		for v, runs := range r.runs {
			res.Medians[v] = medians(runs)
		}
		res.Targets = evaluateTargets(res.Medians, opts.contentType, res.Churn)
		if err := res.save(opts.out); err != nil {
			return err
		}
		printReport(out, res)
		fmt.Fprintf(out, "results: %s, %s\n", resultPath(opts.out, n, "json"), resultPath(opts.out, n, "csv"))
	}
	if opts.plot == "" {
		return nil
	}
	return plotResults(opts.out, opts.plot, out)
}
