package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/boltinformer/boltinformer/internal/bench/benchkit"
	"slices"
	"sort"
	"strings"
	"time"
)

// benchOptions are the benchmark's flags.
type benchOptions struct {
	sizes    []int
	shape    podShape
	reps     int
	churn    int             // pods changed while a boltinformer is down; 0: 1% of N
	workers  int             // concurrent writers when populating and driving
	variants map[string]bool // --variants; nil: all (see runs)
	out      string
	plot     string
	logDir   string
	settle   time.Duration
}

func (o *benchOptions) AddFlags(fs *flag.FlagSet) {
	o.settle = 2 * time.Second
	fs.Func("sizes", "Comma-separated Pod counts to run in sequence, e.g. 10k,50k,100k; the server is reused and Pods are added.", o.setSizes)
	o.shape = shapeRealistic
	fs.Var(&o.shape, "pod-size", "Pods to create: realistic (about 6 KB of protobuf each) or small (about 2.7 KB); results of small runs are saved as informerbench-<N>-small.*.")
	fs.IntVar(&o.reps, "reps", 3, "Repetitions per variant; the report shows medians.")
	fs.IntVar(&o.churn, "churn", 0, "Pods patched while boltinformer is down, before the warm and the 410 restarts (0: 1% of N, at least 10).")
	fs.IntVar(&o.workers, "workers", 48, "Concurrent requests when creating and patching Pods.")
	fs.Func("variants", "Comma-separated variants to run, default all: "+strings.Join(variantOrder, ",")+
		". The boltinformer ones run in the order cold, warm, bounded, recover and 410 on one file; without bolt-cold, a cold start that is not reported fills the file first.", o.setVariants)
	fs.StringVar(&o.out, "out", benchkit.OutDir("informerbench"), "Directory for the results (informerbench-<N>.{json,txt}).")
	fs.StringVar(&o.plot, "plot", "sync-time", "Name in --out of the sync-time plot of every result there; empty: no plot.")
}

func (o *benchOptions) setSizes(v string) error {
	o.sizes = nil
	for _, s := range strings.Split(v, ",") {
		n, err := benchkit.ParseCount(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		o.sizes = append(o.sizes, n)
	}
	sort.Ints(o.sizes)
	return nil
}

func (o *benchOptions) setVariants(v string) error {
	o.variants = map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(variantOrder, name) {
			return fmt.Errorf("unknown variant %q: want some of %s", name, strings.Join(variantOrder, ","))
		}
		o.variants[name] = true
	}
	return nil
}

// runs reports whether variant v is to be measured: every variant by
// default, else those --variants names.
func (o *benchOptions) runs(v string) bool {
	return o.variants == nil || o.variants[v]
}

func (o *benchOptions) validate() error {
	if len(o.sizes) == 0 {
		return errors.New("give --sizes")
	}
	if o.reps < 1 || o.workers < 1 {
		return errors.New("--reps and --workers must be positive")
	}
	return nil
}

// churnFor is how many Pods change while boltinformer is down.
func (o *benchOptions) churnFor(n int) int {
	if o.churn > 0 {
		return min(o.churn, n)
	}
	return min(max(n/100, 10), n)
}
