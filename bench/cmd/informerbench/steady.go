package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
)

// The steady subcommand: the churn at several Pod counts, one after the
// other on one apiserver, at each size once for each skew of its updates,
// then one table of every steady-state figure beside client-go, with the
// project's targets marked (steadyreport.go).

// steadyOptions are the steady subcommand's flags. Every other churn
// option keeps its churn default.
type steadyOptions struct {
	sizes    []int       // increasing, distinct
	skews    []churnSkew // distinct, each run at every size in this order
	duration time.Duration
	rate     float64
	// boundedShare sizes the bounded child's cache at each size: a
	// percentage of its Pods or a count (benchkit.ParseAmount), at least 1.
	boundedShare string
	out          string
}

func (o *steadyOptions) AddFlags(fs *flag.FlagSet) {
	o.sizes = []int{3000, 30000, 100000}
	fs.Func("sizes", "Pod counts, comma-separated, run in increasing order on one apiserver (default 3k,30k,100k).", func(v string) (err error) {
		o.sizes, err = parseSizes(v)
		return err
	})
	o.skews = []churnSkew{{}, {zipfS: 1.1}}
	fs.Func("skews", "Laws by which updates pick their Pod (churn's --skew), comma-separated: one churn for each at every size, in this order (default uniform,zipf:1.1).", func(v string) (err error) {
		o.skews, err = parseSkews(v)
		return err
	})
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "How long each churn lasts.")
	fs.Float64Var(&o.rate, "rate", 100, "Changes per second.")
	fs.StringVar(&o.boundedShare, "bounded-share", "1%", "The bounded child's cache (CacheObjects) at each size: a percentage of its Pods, or a count; at least 1.")
	fs.StringVar(&o.out, "out", "", "Directory for steady.{json,txt}, with each churn's results in churn-<pods>[-zipf<S>]/ (default _output/bench/steady).")
}

// complete fills in defaults and checks the flags.
func (o *steadyOptions) complete() error {
	if len(o.sizes) == 0 || len(o.skews) == 0 || o.duration <= 0 || o.rate <= 0 {
		return errors.New("--sizes, --skews, --duration and --rate must be given and positive")
	}
	if _, err := boundedObjects(o.boundedShare, o.sizes[0]); err != nil {
		return fmt.Errorf("--bounded-share: %w", err)
	}
	if o.out == "" {
		o.out = benchkit.OutDir("steady")
	}
	return nil
}

// parseSizes reads comma-separated counts (benchkit.ParseCount) and
// returns them sorted and distinct: each size's populate then only adds
// Pods to the ones the last size left.
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := benchkit.ParseCount(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

// boundedObjects is the bounded child's CacheObjects at pods Pods: share
// of them, at least 1, since 0 would mean an unbounded cache.
func boundedObjects(share string, pods int) (int, error) {
	n, err := benchkit.ParseAmount(share, pods)
	if err != nil {
		return 0, err
	}
	return max(n, 1), nil
}

// runSteady is the steady subcommand: churnSize at each size and skew in
// turn on one session, then the summary. A churn that fails ends the run,
// after the summary of the churns before it.
func runSteady(ctx context.Context, args []string, out io.Writer) error {
	o := &steadyOptions{}
	fs := flag.NewFlagSet("steady", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.complete(); err != nil {
		return err
	}
	fmt.Fprintf(out, "Targets, marked for each churn and size in the summary:\n")
	for _, t := range steadyTargets() {
		fmt.Fprintf(out, "  %s\n", t)
	}
	var logDir string
	sess, err := openSession(ctx, &logDir, []string{o.out}, out)
	if err != nil {
		return err
	}
	defer sess.close()

	var results []*churnResult
	var runErr error
sizes:
	for i, pods := range o.sizes {
		for j, skew := range o.skews {
			c := &churnOptions{}
			c.setDefaults()
			c.pods, c.rate, c.duration, c.skew = pods, o.rate, o.duration, skew
			c.bounded, _ = boundedObjects(o.boundedShare, pods) // checked by complete
			label := benchkit.CountLabel(pods)
			dir := churnDirName(pods, skew)
			c.out = filepath.Join(o.out, dir)
			c.logDir = filepath.Join(logDir, strings.TrimPrefix(dir, "churn-"))
			if err := os.MkdirAll(c.logDir, 0o755); err != nil {
				return err
			}
			fmt.Fprintf(out, "\n== size %d of %d, churn %d of %d: %s Pods, updates %s, boltinformer-bounded caching %d objects, %v of churn at %.0f/s ==\n",
				i+1, len(o.sizes), j+1, len(o.skews), label, &skew, c.bounded, o.duration, o.rate)
			res, err := churnSize(ctx, sess, c, out)
			if err != nil {
				runErr = fmt.Errorf("%s Pods, updates %s: %w", label, &skew, err)
				break sizes
			}
			results = append(results, res)
		}
	}
	if len(results) == 0 {
		return runErr
	}
	sum := steadySummary(results, o.boundedShare)
	rep := steadyReport(sum)
	fmt.Fprintln(out)
	if err := rep.WriteText(out); err != nil {
		return errors.Join(runErr, err)
	}
	paths, err := benchkit.Save(o.out, "steady", sum, rep)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(out, "summary: %s\n", strings.Join(paths, ", "))
	return runErr
}
